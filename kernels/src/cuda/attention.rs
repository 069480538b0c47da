//! Launchers for paged decode attention (`cuda/paged_attention.cu`) and shared-prefix cascade
//! attention (`cuda/cascade_attention.cu`), with the same arguments, layout, grouping and
//! errors as the CPU's `attention::{paged_attention, cascade_attention}`, so the engine can
//! switch devices without changing its bookkeeping.
//!
//! A call validates everything on the host with the CPU's own checks (`shape`, `cascade`),
//! flattens the sequences into per-row metadata (block table offset, first and one-past-last
//! key position) and per-group metadata (prefix table, prefix length, member rows), then
//! queues up to three kernels on the stream: `cascade_prefix_*` (each group's prefix once for
//! all its rows, split along the prefix), `paged_partial_*` (every row's own keys, split along
//! the KV length, GQA heads sharing loads) and `attention_merge` (log-sum-exp merge of all
//! splits, prefix first, normalised into `out`). Splits are `SPLIT_TOKENS` positions, fixed by
//! position, so a row's result does not depend on the rest of the batch.
//!
//! Numerics: f32 accumulation for every KV type; results equal the CPU reference within float
//! tolerance (the summation order differs), and are deterministic run to run.
#![allow(unsafe_code)]

use cudarc::driver::{CudaSlice, DeviceRepr, LaunchConfig, PushKernelArg};

use super::device::{CudaKernels, Module};
use super::error::{grid_yz, u32_arg, CudaError};
use crate::attention::cascade::{validate_groups, ValidGroup, SPLIT_TOKENS};
use crate::attention::plan::{plan_units, Sharing};
use crate::attention::shape::{validate_dims_of, KvDims, SeqArgs, SeqShape, Shape};
use crate::attention::{AttentionParams, AttentionStats, PrefixGroup};
use crate::kv::{KvDtype, KvElem};

/// Largest head dim the CUDA attention kernels support (8 floats per lane of a warp).
pub const MAX_HEAD_DIM: usize = 256;
/// Threads per attention CTA (4 warps), as the kernels' `NWARPS`.
const THREADS: u32 = 128;
/// Query heads one `paged_partial` CTA handles, as the kernel's `G_MAX`.
const G_MAX: usize = 8;
/// Static shared memory the cascade kernel may size its tiles and pairs to.
const CASCADE_SMEM: usize = 48 * 1024;

/// One layer's paged KV cache on the device: `[num_blocks, block_size, num_kv_heads,
/// head_dim]` of f32, f16 or bf16, as `attention::PagedKv`.
#[derive(Debug, Clone, Copy)]
pub struct CudaPagedKv<'a, T> {
    /// Keys.
    pub k: &'a CudaSlice<T>,
    /// Values, same layout.
    pub v: &'a CudaSlice<T>,
    /// Token slots per block.
    pub block_size: usize,
    /// Key/value heads.
    pub num_kv_heads: usize,
    /// Elements per head vector.
    pub head_dim: usize,
}

/// One sequence's query rows on the device, described on the host: `len` consecutive rows of
/// the call's `q` (`[rows, num_heads, head_dim]`, sequences in order), at positions
/// `start_pos..start_pos + len`, with the sequence's block table (as `SeqQueries`).
#[derive(Debug, Clone, Copy)]
pub struct SeqSpan<'a> {
    /// Query rows of this sequence in the call.
    pub len: usize,
    /// Block ids holding positions `0, block_size, 2 * block_size, ...`.
    pub block_table: &'a [u32],
    /// Position of the first query row.
    pub start_pos: usize,
}

impl SeqArgs for SeqSpan<'_> {
    fn q_len(&self, row_len: usize) -> usize {
        self.len.saturating_mul(row_len)
    }
    fn block_table(&self) -> &[u32] {
        self.block_table
    }
    fn start_pos(&self) -> usize {
        self.start_pos
    }
}

/// The kernels' `KvGeom`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct KvGeom {
    pub(crate) num_blocks: u32,
    pub(crate) block_size: u32,
    pub(crate) num_kv_heads: u32,
    pub(crate) head_dim: u32,
}

// SAFETY: plain `repr(C)` integers, laid out as the kernels' `KvGeom`.
unsafe impl DeviceRepr for KvGeom {}

/// The kernels' `AttnArgs` (and the head of `CascadeArgs`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct AttnArgs {
    g: KvGeom,
    num_heads: u32,
    split_tokens: u32,
    slots: u32,
    scale: f32,
}

// SAFETY: `repr(C)` of u32/f32 fields, laid out as the kernel's `AttnArgs`.
unsafe impl DeviceRepr for AttnArgs {}

/// The kernel's `CascadeArgs`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct CascadeArgs {
    a: AttnArgs,
    tile: u32,
    pairs_per_cta: u32,
}

// SAFETY: `repr(C)` of u32/f32 fields, laid out as the kernel's `CascadeArgs`.
unsafe impl DeviceRepr for CascadeArgs {}

/// Everything validated: shapes, groups and where each sequence's own keys begin.
struct Checked {
    shape: Shape,
    shapes: Vec<SeqShape>,
    groups: Vec<ValidGroup>,
    begin: Vec<usize>,
}

impl CudaKernels {
    /// Paged attention for a batch of sequences, grouping those whose block tables share
    /// leading, fully visible blocks exactly as the CPU's `paged_attention` does; `q` and
    /// `out` are `[rows, num_heads, head_dim]` with the sequences' rows in order.
    pub fn paged_attention<T: KvElem>(
        &self,
        kv: &CudaPagedKv<'_, T>,
        q: &CudaSlice<f32>,
        seqs: &[SeqSpan<'_>],
        params: &AttentionParams,
        out: &mut CudaSlice<f32>,
    ) -> Result<AttentionStats, CudaError> {
        let (shape, shapes) = check_shapes(kv, q, seqs, params, out)?;
        let units = plan_units(seqs, &shapes, shape.block_size, Sharing::Auto);
        let members: Vec<Vec<usize>> = units.iter().map(|u| u.members.clone()).collect();
        let groups: Vec<PrefixGroup<'_>> = units
            .iter()
            .zip(&members)
            .filter(|(u, _)| u.shared > 0)
            .map(|(u, m)| PrefixGroup {
                members: m,
                prefix_len: u.shared * shape.block_size,
            })
            .collect();
        let (groups, begin) = validate_groups(seqs, &shapes, &groups, shape.block_size)?;
        let unshared: usize = shapes.iter().filter(|s| s.len > 0).map(|s| s.blocks).sum();
        let saved: usize = units
            .iter()
            .map(|u| u.shared * u.members.len().saturating_sub(1))
            .sum();
        let checked = Checked {
            shape,
            shapes,
            groups,
            begin,
        };
        self.launch_attention(kv, q, seqs, &checked, out)?;
        Ok(AttentionStats {
            kv_blocks_read: unshared - saved,
            shared_block_reads_saved: saved,
        })
    }

    /// Attention with explicit prefix groups, as the CPU's `cascade_attention` (same checks
    /// and errors); `q` and `out` as in [`CudaKernels::paged_attention`].
    pub fn cascade_attention<T: KvElem>(
        &self,
        kv: &CudaPagedKv<'_, T>,
        q: &CudaSlice<f32>,
        seqs: &[SeqSpan<'_>],
        groups: &[PrefixGroup<'_>],
        params: &AttentionParams,
        out: &mut CudaSlice<f32>,
    ) -> Result<(), CudaError> {
        let (shape, shapes) = check_shapes(kv, q, seqs, params, out)?;
        let (groups, begin) = validate_groups(seqs, &shapes, groups, shape.block_size)?;
        let checked = Checked {
            shape,
            shapes,
            groups,
            begin,
        };
        self.launch_attention(kv, q, seqs, &checked, out)
    }

    fn launch_attention<T: KvElem>(
        &self,
        kv: &CudaPagedKv<'_, T>,
        q: &CudaSlice<f32>,
        seqs: &[SeqSpan<'_>],
        c: &Checked,
        out: &mut CudaSlice<f32>,
    ) -> Result<(), CudaError> {
        let (shape, hd) = (&c.shape, c.shape.head_dim);
        let rows: usize = c.shapes.iter().map(|s| s.len).sum();
        if rows == 0 {
            return Ok(());
        }
        let stream = self.stream();
        let split = SPLIT_TOKENS;
        // Per-row metadata and the concatenated (validated part of the) block tables.
        let mut tables = Vec::new();
        let mut table_at = Vec::with_capacity(seqs.len());
        let (mut row_table, mut row_begin, mut row_end) = (vec![], vec![], vec![]);
        let mut row_pre = vec![0u32; rows];
        let mut suf_slots = 1usize;
        for (s, sh) in c.shapes.iter().enumerate() {
            table_at.push(u32_arg("block tables", tables.len())?);
            tables.extend_from_slice(&seqs[s].block_table[..sh.blocks]);
            for i in 0..sh.len {
                let (begin, end) = (c.begin[s], sh.pos(i) + 1);
                row_table.push(table_at[s]);
                row_begin.push(u32_arg("seqs[].start_pos", begin)?);
                row_end.push(u32_arg("seqs[].start_pos", end)?);
                row_pre[sh.row_offset + i] = u32::from(begin > 0);
                suf_slots = suf_slots.max(end.div_ceil(split) - begin / split);
            }
        }
        let geom = KvGeom {
            num_blocks: u32_arg("kv blocks", shape.num_blocks)?,
            block_size: u32_arg("kv.block_size", shape.block_size)?,
            num_kv_heads: u32_arg("kv.num_kv_heads", shape.num_kv_heads)?,
            head_dim: u32_arg("kv.head_dim", hd)?,
        };
        let heads = shape.num_heads;
        let args = |slots: usize| -> Result<AttnArgs, CudaError> {
            Ok(AttnArgs {
                g: geom,
                num_heads: u32_arg("params.num_heads", heads)?,
                split_tokens: u32_arg("split", split)?,
                slots: u32_arg("splits", slots)?,
                scale: shape.scale,
            })
        };
        let tables = upload(self, &tables)?;

        // Cascade: each group's prefix once for all its rows.
        let pre_slots = c
            .groups
            .iter()
            .map(|g| g.prefix_len.div_ceil(split))
            .max()
            .unwrap_or(0);
        let state_len = |slots: usize| rows * heads * slots.max(1);
        let mut pre_m = stream.alloc_zeros::<f32>(state_len(pre_slots))?;
        let mut pre_l = stream.alloc_zeros::<f32>(state_len(pre_slots))?;
        let mut pre_acc = stream.alloc_zeros::<f32>(state_len(pre_slots) * hd)?;
        if !c.groups.is_empty() {
            let (mut g_table, mut g_len, mut g_rows, mut members) =
                (vec![], vec![], vec![0u32], vec![]);
            for g in &c.groups {
                g_table.push(table_at[g.members[0]]);
                g_len.push(u32_arg("groups[].prefix_len", g.prefix_len)?);
                for &s in &g.members {
                    let sh = &c.shapes[s];
                    for i in 0..sh.len {
                        members.push(u32_arg("rows", sh.row_offset + i)?);
                    }
                }
                g_rows.push(u32_arg("rows", members.len())?);
            }
            let tile: usize = if hd <= 128 { 32 } else { 16 };
            let fixed = (tile * (2 * hd + 1) + 4 * 32) * 4;
            let per_pair = (2 * hd + 2) * 4;
            let ppc = ((CASCADE_SMEM - fixed) / per_pair).clamp(1, 64);
            let max_pairs = c
                .groups
                .iter()
                .map(|g| g.members.iter().map(|&s| c.shapes[s].len).sum::<usize>() * shape.group)
                .max()
                .unwrap_or(0);
            let chunks = max_pairs.div_ceil(ppc);
            let cargs = CascadeArgs {
                a: args(pre_slots)?,
                tile: u32_arg("tile", tile)?,
                pairs_per_cta: u32_arg("pairs", ppc)?,
            };
            let cfg = LaunchConfig {
                grid_dim: (
                    u32_arg("groups", c.groups.len())?,
                    grid_yz("kv heads x pair chunks", shape.num_kv_heads * chunks)?,
                    grid_yz("prefix splits", pre_slots)?,
                ),
                block_dim: (THREADS, 1, 1),
                shared_mem_bytes: u32_arg("shared memory", fixed + ppc * per_pair)?,
            };
            let f = self.function(Module::CascadeAttention, &cascade_kernel(T::DTYPE))?;
            let (g_table, g_len) = (upload(self, &g_table)?, upload(self, &g_len)?);
            let (g_rows, members) = (upload(self, &g_rows)?, upload(self, &members)?);
            let mut b = stream.launch_builder(&f);
            b.arg(q)
                .arg(kv.k)
                .arg(kv.v)
                .arg(&tables)
                .arg(&g_table)
                .arg(&g_len);
            b.arg(&g_rows)
                .arg(&members)
                .arg(&mut pre_m)
                .arg(&mut pre_l)
                .arg(&mut pre_acc);
            b.arg(&cargs);
            // SAFETY: the arguments match `cascade_prefix_*` in cascade_attention.cu in number,
            // order and type; every block id, row and position they index was validated
            // above (`validate_dims_of`, `validate_groups`), and the buffers hold
            // `rows * num_heads * pre_slots` states, the most the grid writes.
            unsafe { b.launch(cfg) }?;
        }

        // Every row's own keys (from the prefix's end for group members).
        let mut suf_m = stream.alloc_zeros::<f32>(state_len(suf_slots))?;
        let mut suf_l = stream.alloc_zeros::<f32>(state_len(suf_slots))?;
        let mut suf_acc = stream.alloc_zeros::<f32>(state_len(suf_slots) * hd)?;
        let dpl = hd.div_ceil(32).next_power_of_two();
        let f = self.function(Module::PagedAttention, &partial_kernel(T::DTYPE, dpl))?;
        let (row_table, row_begin_d, row_end_d) = (
            upload(self, &row_table)?,
            upload(self, &row_begin)?,
            upload(self, &row_end)?,
        );
        let pargs = args(suf_slots)?;
        let cfg = LaunchConfig {
            grid_dim: (
                u32_arg("rows", rows)?,
                grid_yz(
                    "kv heads x head chunks",
                    shape.num_kv_heads * shape.group.div_ceil(G_MAX),
                )?,
                grid_yz("splits", suf_slots)?,
            ),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut b = stream.launch_builder(&f);
        b.arg(q)
            .arg(kv.k)
            .arg(kv.v)
            .arg(&tables)
            .arg(&row_table)
            .arg(&row_begin_d);
        b.arg(&row_end_d)
            .arg(&mut suf_m)
            .arg(&mut suf_l)
            .arg(&mut suf_acc)
            .arg(&pargs);
        // SAFETY: the arguments match `paged_partial_*` in paged_attention.cu; head_dim <=
        // 32 * dpl (checked in `check_shapes`); rows, tables and positions were validated; the
        // state buffers hold `rows * num_heads * suf_slots` states, the most the grid writes.
        unsafe { b.launch(cfg) }?;

        // Merge prefix and suffix splits, normalise into `out`.
        let f = self.function(Module::PagedAttention, MERGE_KERNEL)?;
        let row_pre = upload(self, &row_pre)?;
        let (pre_n, suf_n) = (u32_arg("splits", pre_slots)?, u32_arg("splits", suf_slots)?);
        let (heads_u, hd_u) = (
            u32_arg("params.num_heads", heads)?,
            u32_arg("kv.head_dim", hd)?,
        );
        let cfg = LaunchConfig {
            grid_dim: (
                u32_arg("rows", rows)?,
                grid_yz("params.num_heads", heads)?,
                1,
            ),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut b = stream.launch_builder(&f);
        b.arg(&pre_m)
            .arg(&pre_l)
            .arg(&pre_acc)
            .arg(&row_pre)
            .arg(&pre_n);
        b.arg(&suf_m).arg(&suf_l).arg(&suf_acc).arg(&suf_n);
        b.arg(out).arg(&heads_u).arg(&hd_u);
        // SAFETY: the arguments match `attention_merge`; it reads `pre_slots` / `suf_slots`
        // states per (row, head) from buffers of exactly that size (prefix states only for
        // rows with `row_pre` set, all of which the cascade kernel wrote) and writes `out`,
        // checked to hold `rows * num_heads * head_dim`.
        unsafe { b.launch(cfg) }?;
        Ok(())
    }
}

/// `paged_partial_<dtype>_d<dpl>`: the partial kernel for `dpl` head dims per lane (1, 2, 4
/// or 8: `head_dim <= 32 * dpl`).
pub(crate) fn partial_kernel(dtype: KvDtype, dpl: usize) -> String {
    format!("paged_partial_{}_d{dpl}", dtype.name())
}

/// `cascade_prefix_<dtype>`.
pub(crate) fn cascade_kernel(dtype: KvDtype) -> String {
    format!("cascade_prefix_{}", dtype.name())
}

/// The merge kernel (`paged_attention.cu`).
pub(crate) const MERGE_KERNEL: &str = "attention_merge";

/// The CPU's shape checks on a device cache, plus `q` / `out` lengths and the head-dim limit.
fn check_shapes<T>(
    kv: &CudaPagedKv<'_, T>,
    q: &CudaSlice<f32>,
    seqs: &[SeqSpan<'_>],
    params: &AttentionParams,
    out: &CudaSlice<f32>,
) -> Result<(Shape, Vec<SeqShape>), CudaError> {
    let dims = KvDims {
        k_len: kv.k.len(),
        v_len: kv.v.len(),
        block_size: kv.block_size,
        num_kv_heads: kv.num_kv_heads,
        head_dim: kv.head_dim,
    };
    let (shape, shapes) = validate_dims_of(dims, seqs, params, out.len())?;
    if q.len() != out.len() {
        return Err(CudaError::DeviceLen {
            arg: "q",
            got: q.len(),
            expected: out.len(),
        });
    }
    if shape.head_dim > MAX_HEAD_DIM {
        return Err(CudaError::HeadDimTooLarge {
            head_dim: shape.head_dim,
            max: MAX_HEAD_DIM,
        });
    }
    Ok((shape, shapes))
}

/// Copies `data` to the device (one zero element for an empty slice: no zero-size buffers).
pub(crate) fn upload(k: &CudaKernels, data: &[u32]) -> Result<CudaSlice<u32>, CudaError> {
    let data = if data.is_empty() { &[0u32][..] } else { data };
    Ok(k.stream().clone_htod(data)?)
}
