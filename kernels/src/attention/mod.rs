//! Paged attention on the CPU with the shared-prefix (cascade) optimisation: the attention
//! step for a batch of sequences whose keys and values live in a paged KV cache (vLLM's
//! PagedAttention, Kwon et al. 2023), where branches of one prompt share their leading blocks.
//!
//! Layout: for one layer, `kv.k` and `kv.v` are `[num_blocks, block_size, num_kv_heads,
//! head_dim]`; a sequence's position `p` lives in block `block_table[p / block_size]`, slot
//! `p % block_size`. Query head `h` reads key/value head `h / (num_heads / num_kv_heads)` (GQA).
//!
//! Algorithm: flash-decoding over blocks (`block`): per query row and head, a partial softmax
//! state per block, merged into a running state by an exact log-sum-exp rescale, blocks in
//! order. Sequences whose block tables start with the same, fully visible blocks are grouped
//! (`plan`); a group loads each shared block once and sweeps it with the query rows of every
//! member before each member continues over its own blocks (`exec`: rayon over
//! (group-or-sequence, key/value head, 128-token segment of blocks) items, or, for a segment of
//! a group's own blocks only, (group, chunk of members, segment) items with every head, which
//! read each block's slots whole; segments merged in order).
//!
//! Numerics contract (what the engine relies on, tested bitwise): a query row's output depends
//! only on its `q`, the contents of its blocks and its position; not on the rest of the batch,
//! on whether its prefix was shared, on how many rows its sequence has in the call (a 40-token
//! prefill chunk and 40 single-token steps give the same bits), nor on the thread split.
//! Exactness holds because every row computes the same per-block partials in a fixed order and
//! merges them in block order; grouping only changes which loads are shared, and tiling (`exec`
//! hands the block kernel up to eight rows at a time, or up to 48 that see a block in full to
//! the wide kernel) only which rows share a kernel call. The
//! order is written so that AVX-512 vectors hold it (`scores`: two sequential half-dot chains
//! per token, 16 tokens to a vector; `block`: sums and maxima over 16 token lanes): the
//! vector kernel (`x86`, chosen at run time when the CPU has AVX-512F and the head is 64 or
//! 128 floats) and the portable loops give the same bits. The bits are fixed per build and
//! machine: whether the portable multiply-adds are fused is decided at compile time (FMA with
//! the workspace's `-C target-cpu=native` on x86-64), so two differently built binaries may
//! differ in the last bits, never two calls of one binary on one machine.
//!
//! `attention_reference` is the slow twin (contiguous gather, plain f64 softmax per row) that
//! the fast path is tested against; `bench_report` times the shared-prefix decode case.
//!
//! `cascade_attention` computes the same attention the way the CUDA kernels do (explicit
//! prefix groups attended once, per-row suffixes, flash-decoding splits, [`SoftmaxState`]
//! merges): the CPU reference for `cuda/paged_attention.cu` and `cuda/cascade_attention.cu`.
//! The `cuda` launchers take the same arguments and group sequences with the same plan
//! (`cuda::Grouping::Always`), or only where grouping pays on a GPU (`Grouping::Auto`).

mod bench;
mod block;
pub(crate) mod cascade;
mod error;
mod exec;
mod lse;
pub(crate) mod plan;
mod reference;
mod scores;
pub(crate) mod shape;
#[cfg(test)]
mod tests;
mod wide;
#[cfg(target_arch = "x86_64")]
mod x86;

pub use bench::bench_report;
pub use cascade::{cascade_attention, PrefixGroup, SPLIT_TOKENS};
pub use error::AttentionError;
pub use lse::SoftmaxState;
pub use reference::attention_reference;

use plan::Sharing;

/// One layer's paged KV cache: `k` and `v` are `[num_blocks, block_size, num_kv_heads, head_dim]`.
#[derive(Debug, Clone, Copy)]
pub struct PagedKv<'a> {
    /// Keys.
    pub k: &'a [f32],
    /// Values, same layout as `k`.
    pub v: &'a [f32],
    /// Token slots per block.
    pub block_size: usize,
    /// Key/value heads.
    pub num_kv_heads: usize,
    /// Elements per head vector.
    pub head_dim: usize,
}

/// The new query positions of one sequence: `q` is `[len, num_heads, head_dim]`; query `i`
/// sits at position `start_pos + i` and attends to keys `0..=start_pos + i` (causal). The
/// sequence's keys `0..start_pos + len` are already written in its blocks.
#[derive(Debug, Clone, Copy)]
pub struct SeqQueries<'a> {
    /// Query rows, `[len, num_heads, head_dim]`.
    pub q: &'a [f32],
    /// Block ids holding positions `0, block_size, 2 * block_size, ...`.
    pub block_table: &'a [u32],
    /// Position of the first query row.
    pub start_pos: usize,
}

/// Head count and score scale of an attention call.
#[derive(Debug, Clone, Copy)]
pub struct AttentionParams {
    /// Query heads (a multiple of `PagedKv::num_kv_heads`).
    pub num_heads: usize,
    /// Multiplier applied to `q . k`, usually `1 / sqrt(head_dim)`.
    pub scale: f32,
}

/// What a `paged_attention` call read, in whole blocks (all key/value heads of a block count
/// as one load).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AttentionStats {
    /// Block loads actually performed.
    pub kv_blocks_read: usize,
    /// Loads avoided by sharing: blocks an unshared walk over every sequence would have read,
    /// minus `kv_blocks_read`.
    pub shared_block_reads_saved: usize,
}

/// Paged attention for a batch of sequences; writes `out`, `[sum of len over seqs, num_heads,
/// head_dim]` with sequences in order, and reports the block loads it performed.
///
/// Sequences whose block tables begin with the same fully visible blocks share the loads of
/// those blocks; the output is bitwise the same as if they had not (see the module docs).
pub fn paged_attention(
    kv: &PagedKv<'_>,
    seqs: &[SeqQueries<'_>],
    params: &AttentionParams,
    out: &mut [f32],
) -> Result<AttentionStats, AttentionError> {
    paged_attention_with(kv, seqs, params, out, Sharing::Auto)
}

/// `paged_attention` with prefix sharing on or off (the bench's baseline and the bitwise tests
/// use `Sharing::Off`).
pub(crate) fn paged_attention_with(
    kv: &PagedKv<'_>,
    seqs: &[SeqQueries<'_>],
    params: &AttentionParams,
    out: &mut [f32],
    sharing: Sharing,
) -> Result<AttentionStats, AttentionError> {
    let (shape, shapes) = shape::validate(kv, seqs, params, out.len())?;
    let prefixes = plan::plan_shared_prefixes(seqs, &shapes, shape.block_size, sharing);
    Ok(exec::execute(kv, seqs, &shape, &shapes, &prefixes, out))
}
