//! Host planning of a CUDA attention step (the "plan" half of FlashInfer's plan/run split):
//! which prefix groups to use, how to split keys so the grid fills the GPU, and the flat
//! metadata the kernels read. Pure bookkeeping, no device types, so it is unit-tested without
//! a GPU; `attention.rs` uploads a [`HostPlan`] once per decode step and launches it per layer.
//!
//! Invariants of a [`HostPlan`] (tested below): for every query row, the prefix splits
//! `[j * pre_split, ..)` for `j < meta.pre` and the suffix segments `begin / split + s` for
//! `s < slots`, clipped to `[begin, end)`, partition `[0, pos + 1)` exactly once; a row's
//! `pre` is non-zero exactly when it is a member of a group; every group's member rows are
//! listed once, in call order.
//!
//! Split sizes are chosen per plan (not per row) so that a step fills the GPU: a row's output
//! bits are a function of its inputs and the plan, deterministic run to run, but may differ in
//! the last bits between batches planned differently (as they do between grouped and ungrouped).

use crate::attention::cascade::{validate_groups, ValidGroup};
use crate::attention::plan::{plan_shared_prefixes, Sharing};
use crate::attention::shape::{SeqArgs, SeqShape, Shape};
use crate::attention::{AttentionError, AttentionStats, PrefixGroup};

use super::error::{u32_arg, CudaError};

/// Query rows × head pairs one `cascade_prefix` CTA sweeps a tile with (the kernel's `CP`).
pub(crate) const PAIRS_PER_CTA: usize = 32;
/// Keys per `cascade_prefix` tile (the kernel's `CT`); prefix splits are multiples of it.
pub(crate) const PREFIX_TILE: usize = 32;
/// Smallest prefix split: two tiles, so a split's state write is amortised over some keys.
const MIN_PREFIX_SPLIT: usize = 2 * PREFIX_TILE;
/// Suffix split sizes tried, largest first: the first whose grid fills the GPU is used.
const SUFFIX_SPLITS: [usize; 3] = [256, 128, 64];
/// CTAs per SM the prefix split aims for (several resident CTAs per SM hide load latency).
const PREFIX_CTAS_PER_SM: usize = 4;
/// CTAs per SM below which the suffix split shrinks (smaller splits cost more partial states).
const SUFFIX_CTAS_PER_SM: usize = 2;
/// Query heads one `paged_partial` CTA handles (the kernel's `G_MAX`).
pub(crate) const HEADS_PER_CTA: usize = 8;
/// [`Grouping::Auto`] groups only at least this many member rows...
pub(crate) const MIN_GROUP_ROWS: usize = 4;
/// ...sharing a prefix of at least this many tokens: below either, the extra launch and the
/// partial states cost more than the shared loads save. Measured on an H200 (bf16 KV, one
/// decode step, `gpu_bench_shared_prefix_decode`): 16 branches over 512 tokens (SmolLM2
/// geometry) run 0.71x as fast grouped as ungrouped, 16 over 4096 (Llama-3-8B) 3.2x, 64 over
/// 4096 4.0x. 1024 sits between the measured points; the rows threshold is unmeasured.
pub(crate) const MIN_GROUP_PREFIX: usize = 1024;

/// How a CUDA attention plan groups sequences that share leading blocks.
#[derive(Debug, Clone, Copy)]
pub enum Grouping<'a> {
    /// Group shared leading blocks (as the CPU's `paged_attention`) when it pays: at least 4
    /// member rows sharing at least 1024 tokens; smaller groups stay ungrouped.
    Auto,
    /// Group every run of shared, fully visible leading blocks, exactly as the CPU's
    /// `paged_attention` does (same [`AttentionStats`]).
    Always,
    /// No grouping: every row attends to all of its keys.
    Off,
    /// These groups, as the CPU's `cascade_attention` takes them (same checks and errors).
    Explicit(&'a [PrefixGroup<'a>]),
}

/// Launch geometry of the cascade prefix kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PrefixGeom {
    /// Tokens per prefix split (a multiple of [`PREFIX_TILE`]).
    pub(crate) split: usize,
    /// Prefix splits of the longest prefix: grid z and the slot stride of the prefix states.
    pub(crate) slots: usize,
    /// Pair chunks of the largest group: grid y is `num_kv_heads * max_chunks`.
    pub(crate) max_chunks: usize,
}

/// A planned attention step, on the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HostPlan {
    /// Query rows.
    pub(crate) rows: usize,
    /// The (validated part of the) block tables, concatenated.
    pub(crate) tables: Vec<u32>,
    /// `[rows][4]`: table offset, begin, end, prefix slots (the kernels' `RowMeta`).
    pub(crate) meta: Vec<u32>,
    /// Per group: offset of its prefix table in `tables`.
    pub(crate) group_table: Vec<u32>,
    /// Per group: prefix length.
    pub(crate) group_len: Vec<u32>,
    /// `groups + 1` offsets into `member_rows`.
    pub(crate) group_rows: Vec<u32>,
    /// Member rows of every group, group after group.
    pub(crate) member_rows: Vec<u32>,
    /// The prefix kernel's geometry; `None` without groups.
    pub(crate) prefix: Option<PrefixGeom>,
    /// Tokens per suffix split.
    pub(crate) split: usize,
    /// Suffix splits per row (grid z of `paged_partial`).
    pub(crate) slots: usize,
    /// Block loads of this plan, as the CPU's `paged_attention` counts them.
    pub(crate) stats: AttentionStats,
}

impl HostPlan {
    /// Number of prefix groups.
    pub(crate) fn groups(&self) -> usize {
        self.group_len.len()
    }
}

/// The groups `grouping` asks for, validated as the CPU validates them; for each sequence
/// where its own keys begin.
pub(crate) fn choose_groups(
    seqs: &[impl SeqArgs],
    shapes: &[SeqShape],
    block_size: usize,
    grouping: Grouping<'_>,
) -> Result<(Vec<ValidGroup>, Vec<usize>), AttentionError> {
    let from_units = |pays: &dyn Fn(usize, usize) -> bool| {
        let units = plan_shared_prefixes(seqs, shapes, block_size, Sharing::Auto);
        let members: Vec<Vec<usize>> = units.iter().map(|u| u.members.clone()).collect();
        let groups: Vec<PrefixGroup<'_>> = units
            .iter()
            .zip(&members)
            .filter(|(u, m)| {
                let rows = m.iter().map(|&s| shapes[s].len).sum();
                u.shared > 0 && pays(rows, u.shared * block_size)
            })
            .map(|(u, m)| PrefixGroup {
                members: m,
                prefix_len: u.shared * block_size,
            })
            .collect();
        validate_groups(seqs, shapes, &groups, block_size)
    };
    match grouping {
        Grouping::Auto => {
            from_units(&|rows, prefix| rows >= MIN_GROUP_ROWS && prefix >= MIN_GROUP_PREFIX)
        }
        Grouping::Always => from_units(&|_, _| true),
        Grouping::Off => validate_groups(seqs, shapes, &[], block_size),
        Grouping::Explicit(groups) => validate_groups(seqs, shapes, groups, block_size),
    }
}

/// Flattens validated sequences and groups into a [`HostPlan`] for a GPU of `sm_count` SMs.
pub(crate) fn host_plan(
    seqs: &[impl SeqArgs],
    shape: &Shape,
    shapes: &[SeqShape],
    groups: &[ValidGroup],
    begin: &[usize],
    sm_count: usize,
) -> Result<HostPlan, CudaError> {
    let rows: usize = shapes.iter().map(|s| s.len).sum();
    let sm_count = sm_count.max(1);
    let bs = shape.block_size;

    // Prefix groups: member rows, and a split that gives the grid PREFIX_CTAS_PER_SM CTAs per SM.
    let mut tables = Vec::new();
    let mut table_at = Vec::with_capacity(shapes.len());
    for (s, sh) in shapes.iter().enumerate() {
        table_at.push(u32_arg("block tables", tables.len())?);
        tables.extend_from_slice(&seqs[s].block_table()[..sh.blocks]);
    }
    let (mut group_table, mut group_len) = (vec![], vec![]);
    let (mut group_rows, mut member_rows) = (vec![0u32], vec![]);
    for g in groups {
        group_table.push(table_at[g.members[0]]);
        group_len.push(u32_arg("groups[].prefix_len", g.prefix_len)?);
        for &s in &g.members {
            let sh = &shapes[s];
            for i in 0..sh.len {
                member_rows.push(u32_arg("rows", sh.row_offset + i)?);
            }
        }
        group_rows.push(u32_arg("rows", member_rows.len())?);
    }
    let prefix = (!groups.is_empty()).then(|| {
        let max_pairs = group_rows
            .windows(2)
            .map(|w| (w[1] - w[0]) as usize * shape.group)
            .max()
            .unwrap_or(0);
        let max_chunks = max_pairs.div_ceil(PAIRS_PER_CTA).max(1);
        let max_prefix = groups.iter().map(|g| g.prefix_len).max().unwrap_or(1);
        let base = groups.len() * shape.num_kv_heads * max_chunks;
        let want = (sm_count * PREFIX_CTAS_PER_SM).div_ceil(base).max(1);
        let split = max_prefix
            .div_ceil(want)
            .next_multiple_of(PREFIX_TILE)
            .max(MIN_PREFIX_SPLIT);
        PrefixGeom {
            split,
            slots: max_prefix.div_ceil(split),
            max_chunks,
        }
    });

    // Suffix: every row's own keys, in the largest split that still fills the GPU.
    let ranges: Vec<(usize, usize)> = shapes
        .iter()
        .enumerate()
        .flat_map(|(s, sh)| (0..sh.len).map(move |i| (begin[s], sh.pos(i) + 1)))
        .collect();
    let slots_for = |split: usize| {
        ranges
            .iter()
            .map(|&(b, e)| e.div_ceil(split) - b / split)
            .max()
            .unwrap_or(1)
            .max(1)
    };
    let base = rows * shape.num_kv_heads * shape.group.div_ceil(HEADS_PER_CTA);
    let split = SUFFIX_SPLITS
        .into_iter()
        .find(|&split| base * slots_for(split) >= sm_count * SUFFIX_CTAS_PER_SM)
        .unwrap_or(SUFFIX_SPLITS[SUFFIX_SPLITS.len() - 1]);
    let slots = slots_for(split);

    let mut meta = Vec::with_capacity(rows * 4);
    for (s, sh) in shapes.iter().enumerate() {
        for i in 0..sh.len {
            let pre = match prefix {
                Some(p) if begin[s] > 0 => begin[s].div_ceil(p.split),
                _ => 0,
            };
            meta.extend([
                table_at[s],
                u32_arg("seqs[].start_pos", begin[s])?,
                u32_arg("seqs[].start_pos", sh.pos(i) + 1)?,
                u32_arg("prefix splits", pre)?,
            ]);
        }
    }

    let unshared: usize = shapes.iter().filter(|s| s.len > 0).map(|s| s.blocks).sum();
    let saved: usize = groups
        .iter()
        .map(|g| (g.prefix_len / bs) * (g.members.len() - 1))
        .sum();
    Ok(HostPlan {
        rows,
        tables,
        meta,
        group_table,
        group_len,
        group_rows,
        member_rows,
        prefix,
        split,
        slots,
        stats: AttentionStats {
            kv_blocks_read: unshared - saved,
            shared_block_reads_saved: saved,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::shape::validate;
    use crate::attention::{paged_attention, AttentionParams, PagedKv, SeqQueries};

    /// `n` branches of a `prefix`-token prompt (block size 16), branch b at position
    /// `prefix + 16 + b`, plus one unrelated sequence; returns (tables, starts).
    fn branches(n: usize, prefix: usize) -> (Vec<Vec<u32>>, Vec<usize>) {
        let pre: Vec<u32> = (0..(prefix / 16) as u32).collect();
        let mut next = pre.len() as u32;
        let (mut tables, mut starts) = (vec![], vec![]);
        for b in 0..n {
            let start = prefix + 16 + b;
            let mut t = pre.clone();
            while t.len() * 16 < start + 1 {
                t.push(next);
                next += 1;
            }
            tables.push(t);
            starts.push(start);
        }
        tables.push((next..next + 4).collect());
        starts.push(40);
        (tables, starts)
    }

    fn plan(
        n: usize,
        prefix: usize,
        geom: (usize, usize, usize),
        grouping: Grouping<'_>,
    ) -> HostPlan {
        let (tables, starts) = branches(n, prefix);
        let (heads, kv_heads, hd) = (geom.0, geom.1, geom.2);
        let blocks = tables.iter().flatten().max().map_or(1, |&b| b as usize + 1);
        let kv_len = blocks * 16 * kv_heads * hd;
        let kv_data = vec![0f32; kv_len];
        let q = vec![0f32; heads * hd];
        let kv = PagedKv {
            k: &kv_data,
            v: &kv_data,
            block_size: 16,
            num_kv_heads: kv_heads,
            head_dim: hd,
        };
        let seqs: Vec<SeqQueries<'_>> = tables
            .iter()
            .zip(&starts)
            .map(|(t, &s)| SeqQueries {
                q: &q,
                block_table: t,
                start_pos: s,
            })
            .collect();
        let params = AttentionParams {
            num_heads: heads,
            scale: 1.0,
        };
        let out_len = seqs.len() * heads * hd;
        let (shape, shapes) = validate(&kv, &seqs, &params, out_len).expect("valid");
        let (groups, begin) = choose_groups(&seqs, &shapes, 16, grouping).expect("groups");
        let p = host_plan(&seqs, &shape, &shapes, &groups, &begin, 132).expect("plan");
        if matches!(grouping, Grouping::Always) {
            let mut out = vec![0f32; out_len];
            let cpu = paged_attention(&kv, &seqs, &params, &mut out).expect("cpu");
            assert_eq!(p.stats, cpu, "stats of Always equal the CPU's");
        }
        p
    }

    /// The module invariant: prefix splits and suffix segments partition `[0, pos + 1)`.
    fn assert_partition(p: &HostPlan) {
        for r in 0..p.rows {
            let m = &p.meta[r * 4..r * 4 + 4];
            let (begin, end, pre) = (m[1] as usize, m[2] as usize, m[3] as usize);
            let mut covered = Vec::new();
            if let Some(g) = p.prefix {
                assert!(pre <= g.slots, "row {r}: {pre} prefix slots > {}", g.slots);
                for j in 0..pre {
                    covered.push((j * g.split, ((j + 1) * g.split).min(begin)));
                }
            } else {
                assert_eq!(pre, 0);
            }
            assert_eq!(pre > 0, begin > 0, "row {r}: prefix slots iff grouped");
            for s in 0..p.slots {
                let seg = begin / p.split + s;
                let (lo, hi) = (begin.max(seg * p.split), end.min((seg + 1) * p.split));
                if lo < hi {
                    covered.push((lo, hi));
                }
            }
            let mut at = 0;
            for (lo, hi) in covered {
                assert_eq!(lo, at, "row {r}: gap or overlap at {at}");
                at = hi;
            }
            assert_eq!(at, end, "row {r}: keys covered up to {at} of {end}");
        }
    }

    #[test]
    fn many_branches_over_a_long_prefix_are_grouped_and_fill_the_gpu() {
        let p = plan(64, 4096, (32, 8, 128), Grouping::Auto);
        assert_partition(&p);
        assert_eq!(p.groups(), 1);
        assert_eq!(p.member_rows, (0..64).collect::<Vec<u32>>());
        let g = p.prefix.expect("grouped");
        // 64 rows x 4 heads = 256 pairs: 8 chunks x 8 KV heads = 64 CTAs per split.
        assert_eq!(g.max_chunks, 8);
        assert!(8 * g.max_chunks * g.slots >= 132 * PREFIX_CTAS_PER_SM);
        assert_eq!(g.split % PREFIX_TILE, 0);
        // Decode suffixes (17..80 tokens) fit one split: one CTA per (row, KV head).
        assert_eq!(p.slots, 1);
        assert!(p.stats.shared_block_reads_saved == 256 * 63);
    }

    #[test]
    fn auto_declines_few_branches_or_a_short_prefix() {
        let p = plan(3, 4096, (32, 8, 128), Grouping::Auto);
        assert_eq!((p.groups(), p.prefix), (0, None));
        assert_eq!(p.stats.shared_block_reads_saved, 0);
        assert_partition(&p);
        let p = plan(16, 512, (9, 3, 64), Grouping::Auto);
        assert_eq!(p.groups(), 0);
        let p = plan(16, 1024, (9, 3, 64), Grouping::Auto);
        assert_eq!(p.groups(), 1);
        let p = plan(16, 256, (9, 3, 64), Grouping::Always);
        assert_eq!(p.groups(), 1);
        assert_partition(&p);
    }

    #[test]
    fn small_ungrouped_batches_use_smaller_splits() {
        // 17 rows x 3 KV heads: 256-token splits would give 17 * 3 * 3 = 153 CTAs.
        let p = plan(16, 512, (9, 3, 64), Grouping::Off);
        assert_eq!(p.split, 64);
        assert_partition(&p);
        let p = plan(16, 4096, (32, 8, 128), Grouping::Off);
        assert_eq!(p.split, 256);
        assert_partition(&p);
    }

    #[test]
    fn every_plan_partitions_every_row_s_keys() {
        for (n, prefix) in [(1, 16), (2, 48), (4, 512), (5, 1040), (16, 512), (33, 2000)] {
            for geom in [(9, 3, 64), (32, 8, 128), (4, 4, 17), (16, 1, 256)] {
                for grouping in [Grouping::Auto, Grouping::Always, Grouping::Off] {
                    let prefix = prefix / 16 * 16;
                    let p = plan(n, prefix, geom, grouping);
                    assert_partition(&p);
                }
            }
        }
    }
}
