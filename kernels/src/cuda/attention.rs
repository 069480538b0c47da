//! Launchers for paged decode attention (`cuda/paged_attention.cu`) and shared-prefix cascade
//! attention (`cuda/cascade_attention.cu`), with the same arguments, layout, grouping and
//! errors as the CPU's `attention::{paged_attention, cascade_attention}`, so the engine can
//! switch devices without changing its bookkeeping.
//!
//! Plan, then run (FlashInfer's split): [`CudaKernels::plan_attention`] validates a step's
//! sequences on the host with the CPU's own checks, chooses groups and splits (`plan`), uploads
//! the block tables and row/group metadata once and allocates the partial-state scratch; the
//! engine builds one [`AttentionPlan`] per decode step. [`CudaKernels::run_attention`] then
//! launches it for each layer's cache with no host work beyond argument packing and no
//! host-device copies: `cascade_prefix_*` (each group's prefix once for all its rows, split
//! along the prefix; only with groups) and `paged_partial_*` (every row's own keys, split
//! along the KV length, GQA heads sharing loads, with the log-sum-exp merge of all splits fused
//! into the last split to finish). `paged_attention` and `cascade_attention` are plan + run in
//! one call.
//!
//! Numerics: f32 accumulation for every KV type; results equal the CPU reference within float
//! tolerance (the summation order differs), and are deterministic run to run for a given plan.
#![allow(unsafe_code)]

use std::marker::PhantomData;

use cudarc::driver::sys::CUfunction_attribute_enum;
use cudarc::driver::{CudaFunction, CudaSlice, DeviceRepr, LaunchConfig, PushKernelArg};

use super::device::{CudaKernels, Module};
use super::error::{grid_yz, u32_arg, CudaError};
use super::plan::{
    choose_groups, host_plan, Grouping, HostPlan, HEADS_PER_CTA, PAIRS_PER_CTA, PREFIX_TILE,
};
use crate::attention::shape::{validate_dims_of, KvDims, SeqArgs, Shape};
use crate::attention::{AttentionParams, AttentionStats, PrefixGroup};
use crate::kv::{KvDtype, KvElem};

/// Largest head dim the CUDA attention kernels support (8 floats per lane of a warp).
pub const MAX_HEAD_DIM: usize = 256;
/// Threads per attention CTA (4 warps), as the kernels' `NWARPS * WARP` and `C_THREADS`.
const THREADS: u32 = 128;
/// Dynamic shared memory a kernel may use without raising its limit.
const DEFAULT_SMEM: usize = 48 * 1024;

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

/// The kernel's `AttnArgs` (paged_attention.cu).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct AttnArgs {
    g: KvGeom,
    num_heads: u32,
    split_tokens: u32,
    slots: u32,
    scale: f32,
    pre_slots: u32,
}

// SAFETY: `repr(C)` of u32/f32 fields, laid out as the kernel's `AttnArgs`.
unsafe impl DeviceRepr for AttnArgs {}

/// The kernel's `CascadeArgs` (cascade_attention.cu).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct CascadeArgs {
    g: KvGeom,
    num_heads: u32,
    split_tokens: u32,
    slots: u32,
    scale: f32,
    max_chunks: u32,
}

// SAFETY: `repr(C)` of u32/f32 fields, laid out as the kernel's `CascadeArgs`.
unsafe impl DeviceRepr for CascadeArgs {}

/// What a plan launches, for benchmarks and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanLayout {
    /// Query rows.
    pub rows: usize,
    /// Prefix groups attended once for all their rows (0: ungrouped).
    pub groups: usize,
    /// Tokens per prefix split (0 without groups).
    pub prefix_split: usize,
    /// CTAs of the prefix kernel (0 without groups).
    pub prefix_ctas: usize,
    /// Tokens per suffix split.
    pub suffix_split: usize,
    /// CTAs of the suffix kernel (which also merges).
    pub suffix_ctas: usize,
    /// Kernel launches per run (1 or 2).
    pub launches: usize,
}

/// The cascade prefix launch of a plan.
#[derive(Debug)]
struct PrefixLaunch {
    f: CudaFunction,
    cfg: LaunchConfig,
    args: CascadeArgs,
    group_table: CudaSlice<u32>,
    group_len: CudaSlice<u32>,
    group_rows: CudaSlice<u32>,
    member_rows: CudaSlice<u32>,
}

/// One decode step's attention, planned and uploaded once, launched per layer by
/// [`CudaKernels::run_attention`] against any cache of the planned geometry and KV type `T`.
/// Holds the device metadata and the partial-state scratch (reused by every run: runs on one
/// stream are ordered, and the fused merge leaves its counters at zero for the next run).
#[derive(Debug)]
pub struct AttentionPlan<T> {
    dims: KvDims,
    q_len: usize,
    rows: usize,
    stats: AttentionStats,
    layout: PlanLayout,
    tables: CudaSlice<u32>,
    meta: CudaSlice<u32>,
    prefix: Option<PrefixLaunch>,
    partial: CudaFunction,
    partial_cfg: LaunchConfig,
    partial_args: AttnArgs,
    pre_m: CudaSlice<f32>,
    pre_l: CudaSlice<f32>,
    pre_acc: CudaSlice<f32>,
    part_m: CudaSlice<f32>,
    part_l: CudaSlice<f32>,
    part_acc: CudaSlice<f32>,
    counters: CudaSlice<u32>,
    dtype: PhantomData<T>,
}

impl<T> AttentionPlan<T> {
    /// Block loads a run performs, as the CPU's `paged_attention` counts them.
    pub fn stats(&self) -> AttentionStats {
        self.stats
    }

    /// Groups, splits and grid sizes of a run.
    pub fn layout(&self) -> PlanLayout {
        self.layout
    }
}

impl CudaKernels {
    /// Plans one attention step over `seqs` for caches shaped like `kv` (any layer's: only its
    /// geometry and lengths are read) with `grouping`; uploads the plan's metadata and
    /// allocates its scratch. Runs the CPU's checks, so every error a run could hit on its
    /// arguments is reported here, typed, before anything is launched.
    pub fn plan_attention<T: KvElem>(
        &self,
        kv: &CudaPagedKv<'_, T>,
        seqs: &[SeqSpan<'_>],
        params: &AttentionParams,
        grouping: Grouping<'_>,
    ) -> Result<AttentionPlan<T>, CudaError> {
        let dims = kv_dims(kv);
        let row_len = params.num_heads.saturating_mul(kv.head_dim);
        let q_len: usize = seqs.iter().map(|s| s.q_len(row_len)).sum();
        let (shape, shapes) = validate_dims_of(dims, seqs, params, q_len)?;
        if shape.head_dim > MAX_HEAD_DIM {
            return Err(CudaError::HeadDimTooLarge {
                head_dim: shape.head_dim,
                max: MAX_HEAD_DIM,
            });
        }
        let (mut groups, mut begin) = choose_groups(seqs, &shapes, shape.block_size, grouping)?;
        if !groups.is_empty() && cascade_smem_bytes(shape.head_dim) > self.max_shared_memory() {
            // The prefix kernel's tiles do not fit this GPU (head_dim 256 on a 99 KiB part):
            // every row attends to all its keys instead, with the same results.
            groups.clear();
            begin.fill(0);
        }
        let host = host_plan(seqs, &shape, &shapes, &groups, &begin, self.sm_count())?;
        self.upload_plan(dims, q_len, &shape, &host)
    }

    /// Launches `plan` on this layer's cache `kv`: `q` and `out` are `[rows, num_heads,
    /// head_dim]` with the planned sequences' rows in order. Checks only that `kv`, `q` and
    /// `out` have the planned geometry and lengths (typed `PlanMismatch` otherwise).
    pub fn run_attention<T: KvElem>(
        &self,
        plan: &mut AttentionPlan<T>,
        kv: &CudaPagedKv<'_, T>,
        q: &CudaSlice<f32>,
        out: &mut CudaSlice<f32>,
    ) -> Result<(), CudaError> {
        let got = kv_dims(kv);
        let want = plan.dims;
        for (arg, planned, got) in [
            ("kv.k", want.k_len, got.k_len),
            ("kv.v", want.v_len, got.v_len),
            ("kv.block_size", want.block_size, got.block_size),
            ("kv.num_kv_heads", want.num_kv_heads, got.num_kv_heads),
            ("kv.head_dim", want.head_dim, got.head_dim),
            ("q", plan.q_len, q.len()),
            ("out", plan.q_len, out.len()),
        ] {
            if planned != got {
                return Err(CudaError::PlanMismatch { arg, planned, got });
            }
        }
        if plan.rows == 0 {
            return Ok(());
        }
        let stream = self.stream();
        if let Some(p) = &plan.prefix {
            let mut b = stream.launch_builder(&p.f);
            b.arg(q).arg(kv.k).arg(kv.v).arg(&plan.tables);
            b.arg(&p.group_table).arg(&p.group_len).arg(&p.group_rows);
            b.arg(&p.member_rows);
            b.arg(&mut plan.pre_m)
                .arg(&mut plan.pre_l)
                .arg(&mut plan.pre_acc);
            b.arg(&p.args);
            // SAFETY: the arguments match `cascade_prefix_*` in cascade_attention.cu in number,
            // order and type; `kv` has the planned geometry and lengths (checked above), so
            // every block id, row and position the plan's metadata indexes was validated
            // (`validate_dims_of`, `validate_groups`); the state buffers hold `rows *
            // num_heads * pre_slots` states, the most the grid writes; the dynamic shared
            // memory was sized by `cascade_smem_bytes` and the kernel's limit raised to it.
            unsafe { b.launch(p.cfg) }?;
        }
        let mut b = stream.launch_builder(&plan.partial);
        b.arg(q)
            .arg(kv.k)
            .arg(kv.v)
            .arg(&plan.tables)
            .arg(&plan.meta);
        b.arg(&plan.pre_m).arg(&plan.pre_l).arg(&plan.pre_acc);
        b.arg(&mut plan.part_m)
            .arg(&mut plan.part_l)
            .arg(&mut plan.part_acc);
        b.arg(&mut plan.counters).arg(out).arg(&plan.partial_args);
        // SAFETY: the arguments match `paged_partial_*` in paged_attention.cu; head_dim <=
        // 32 * dpl (checked when planning); rows, tables and positions were validated; the
        // partial buffers hold `rows * num_heads * slots` states and the counters `rows *
        // grid.y`, the most the grid touches; each row reads at most `pre_slots` prefix states,
        // all written by the prefix launch queued before on this stream; `out` holds `rows *
        // num_heads * head_dim` (checked above).
        unsafe { b.launch(plan.partial_cfg) }?;
        Ok(())
    }

    /// Paged attention for a batch of sequences, grouping those whose block tables share
    /// leading, fully visible blocks when it pays ([`Grouping::Auto`]); `q` and `out` are
    /// `[rows, num_heads, head_dim]` with the sequences' rows in order. Plan + run in one call:
    /// a caller attending many layers per step should plan once and run per layer.
    pub fn paged_attention<T: KvElem>(
        &self,
        kv: &CudaPagedKv<'_, T>,
        q: &CudaSlice<f32>,
        seqs: &[SeqSpan<'_>],
        params: &AttentionParams,
        out: &mut CudaSlice<f32>,
    ) -> Result<AttentionStats, CudaError> {
        check_out(kv, q, seqs, params, out)?;
        let mut plan = self.plan_attention(kv, seqs, params, Grouping::Auto)?;
        self.run_attention(&mut plan, kv, q, out)?;
        Ok(plan.stats())
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
        check_out(kv, q, seqs, params, out)?;
        let mut plan = self.plan_attention(kv, seqs, params, Grouping::Explicit(groups))?;
        self.run_attention(&mut plan, kv, q, out)
    }

    /// Uploads a host plan: metadata, launch configurations, zeroed scratch.
    fn upload_plan<T: KvElem>(
        &self,
        dims: KvDims,
        q_len: usize,
        shape: &Shape,
        host: &HostPlan,
    ) -> Result<AttentionPlan<T>, CudaError> {
        let stream = self.stream();
        let (hd, heads) = (shape.head_dim, shape.num_heads);
        let geom = KvGeom {
            num_blocks: u32_arg("kv blocks", shape.num_blocks)?,
            block_size: u32_arg("kv.block_size", shape.block_size)?,
            num_kv_heads: u32_arg("kv.num_kv_heads", shape.num_kv_heads)?,
            head_dim: u32_arg("kv.head_dim", hd)?,
        };
        let rows = host.rows;
        let states = |slots: usize| rows.max(1) * heads * slots.max(1);
        let pre_slots = host.prefix.map_or(0, |p| p.slots);

        let prefix = match host.prefix {
            None => None,
            Some(p) => {
                let chunks = shape.num_kv_heads * p.max_chunks;
                let f = self.function(Module::CascadeAttention, &cascade_kernel(T::DTYPE, hd))?;
                let smem = cascade_smem_bytes(hd);
                if smem > DEFAULT_SMEM {
                    f.set_attribute(
                        CUfunction_attribute_enum::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                        i32::try_from(smem).map_err(|_| CudaError::TooLarge {
                            arg: "shared memory",
                            value: smem,
                            max: i32::MAX as usize,
                        })?,
                    )?;
                }
                Some(PrefixLaunch {
                    cfg: LaunchConfig {
                        grid_dim: (
                            u32_arg("groups", host.groups())?,
                            grid_yz("kv heads x pair chunks", chunks)?,
                            grid_yz("prefix splits", p.slots)?,
                        ),
                        block_dim: (THREADS, 1, 1),
                        shared_mem_bytes: u32_arg("shared memory", smem)?,
                    },
                    args: CascadeArgs {
                        g: geom,
                        num_heads: u32_arg("params.num_heads", heads)?,
                        split_tokens: u32_arg("prefix split", p.split)?,
                        slots: u32_arg("prefix splits", p.slots)?,
                        scale: shape.scale,
                        max_chunks: u32_arg("pair chunks", p.max_chunks)?,
                    },
                    f,
                    group_table: upload(self, &host.group_table)?,
                    group_len: upload(self, &host.group_len)?,
                    group_rows: upload(self, &host.group_rows)?,
                    member_rows: upload(self, &host.member_rows)?,
                })
            }
        };

        let dpl = hd.div_ceil(32).next_power_of_two();
        let vec = dpl > 1 && hd % dpl == 0;
        let head_chunks = shape.num_kv_heads * shape.group.div_ceil(HEADS_PER_CTA);
        let partial_cfg = LaunchConfig {
            grid_dim: (
                u32_arg("rows", rows.max(1))?,
                grid_yz("kv heads x head chunks", head_chunks)?,
                grid_yz("splits", host.slots)?,
            ),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let layout = PlanLayout {
            rows,
            groups: host.groups(),
            prefix_split: host.prefix.map_or(0, |p| p.split),
            prefix_ctas: prefix.as_ref().map_or(0, |p| {
                let (x, y, z) = p.cfg.grid_dim;
                (x * y * z) as usize
            }),
            suffix_split: host.split,
            suffix_ctas: rows * head_chunks * host.slots,
            launches: 1 + usize::from(prefix.is_some()),
        };
        Ok(AttentionPlan {
            dims,
            q_len,
            rows,
            stats: host.stats,
            layout,
            tables: upload(self, &host.tables)?,
            meta: upload(self, &host.meta)?,
            prefix,
            partial: self.function(Module::PagedAttention, &partial_kernel(T::DTYPE, dpl, vec))?,
            partial_cfg,
            partial_args: AttnArgs {
                g: geom,
                num_heads: u32_arg("params.num_heads", heads)?,
                split_tokens: u32_arg("split", host.split)?,
                slots: u32_arg("splits", host.slots)?,
                scale: shape.scale,
                pre_slots: u32_arg("prefix splits", pre_slots)?,
            },
            pre_m: stream.alloc_zeros::<f32>(states(pre_slots))?,
            pre_l: stream.alloc_zeros::<f32>(states(pre_slots))?,
            pre_acc: stream.alloc_zeros::<f32>(states(pre_slots) * hd)?,
            part_m: stream.alloc_zeros::<f32>(states(host.slots))?,
            part_l: stream.alloc_zeros::<f32>(states(host.slots))?,
            part_acc: stream.alloc_zeros::<f32>(states(host.slots) * hd)?,
            counters: stream.alloc_zeros::<u32>(rows.max(1) * head_chunks)?,
            dtype: PhantomData,
        })
    }
}

/// `paged_partial_<dtype>_d<dpl>[_v]`: the partial kernel for `dpl` head dims per lane (1, 2,
/// 4 or 8: `head_dim <= 32 * dpl`), with vector loads (`_v`, `head_dim % dpl == 0`, dpl > 1).
pub(crate) fn partial_kernel(dtype: KvDtype, dpl: usize, vec: bool) -> String {
    let suffix = if vec { "_v" } else { "" };
    format!("paged_partial_{}_d{dpl}{suffix}", dtype.name())
}

/// `cascade_prefix_<dtype>_d<64, 128 or 256>`: the prefix kernel for head dims up to that.
pub(crate) fn cascade_kernel(dtype: KvDtype, head_dim: usize) -> String {
    format!("cascade_prefix_{}_d{}", dtype.name(), cascade_hv(head_dim))
}

/// The prefix kernel's `HV`: head_dim rounded up to 64, 128 or 256.
fn cascade_hv(head_dim: usize) -> usize {
    64 * head_dim.div_ceil(64).next_power_of_two()
}

/// Dynamic shared memory of `cascade_prefix_*` (layout in cascade_attention.cu).
pub(crate) fn cascade_smem_bytes(head_dim: usize) -> usize {
    let hd4 = head_dim.next_multiple_of(4);
    let hs = if hd4.is_multiple_of(8) { hd4 + 4 } else { hd4 };
    let floats = PAIRS_PER_CTA * hs
        + PREFIX_TILE * hs
        + PREFIX_TILE * cascade_hv(head_dim)
        + PREFIX_TILE * (PAIRS_PER_CTA + 4)
        + 3 * PAIRS_PER_CTA;
    floats * 4
}

fn kv_dims<T>(kv: &CudaPagedKv<'_, T>) -> KvDims {
    KvDims {
        k_len: kv.k.len(),
        v_len: kv.v.len(),
        block_size: kv.block_size,
        num_kv_heads: kv.num_kv_heads,
        head_dim: kv.head_dim,
    }
}

/// The one-shot calls' checks of `out` and `q` (a plan derives their length from `seqs`):
/// the CPU's shape checks, in its order, then `q`'s length.
fn check_out<T>(
    kv: &CudaPagedKv<'_, T>,
    q: &CudaSlice<f32>,
    seqs: &[SeqSpan<'_>],
    params: &AttentionParams,
    out: &CudaSlice<f32>,
) -> Result<(), CudaError> {
    validate_dims_of(kv_dims(kv), seqs, params, out.len())?;
    if q.len() != out.len() {
        return Err(CudaError::DeviceLen {
            arg: "q",
            got: q.len(),
            expected: out.len(),
        });
    }
    Ok(())
}

/// Copies `data` to the device (one zero element for an empty slice: no zero-size buffers).
pub(crate) fn upload(k: &CudaKernels, data: &[u32]) -> Result<CudaSlice<u32>, CudaError> {
    let data = if data.is_empty() { &[0u32][..] } else { data };
    Ok(k.stream().clone_htod(data)?)
}
