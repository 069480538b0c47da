//! Plain data shared between the manager and its callers: ids, slots, copy orders, stats.
//!
//! Nothing here has behaviour; the invariants these values obey (a slot's offset is below the
//! block size, a copy's `tokens` is below the block size) are established by the manager.

/// Index of one physical KV block in the pool, `0..num_blocks`.
pub type BlockId = u32;

/// Caller-chosen id of one sequence (a request, or a branch of a search tree).
pub type SeqId = u64;

/// Where one token's K/V lives: block id and position inside the block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// The physical block.
    pub block: BlockId,
    /// Position inside the block, `0..block_size`.
    pub offset: usize,
}

/// Copy positions `0..tokens` of block `src` into block `dst` (all layers) BEFORE writing the
/// slots returned with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyBlock {
    /// The shared block being copied from (left untouched).
    pub src: BlockId,
    /// The freshly allocated private block.
    pub dst: BlockId,
    /// How many leading positions hold data (`1..block_size`).
    pub tokens: usize,
}

/// What `append` reserved: apply every copy in `copies` first, then write K/V into `slots`
/// (one per appended token, in order).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Appended {
    /// One slot per appended token, in order.
    pub slots: Vec<Slot>,
    /// Copy-on-write orders to apply before writing `slots` (at most one per call).
    pub copies: Vec<CopyBlock>,
}

/// A snapshot of pool occupancy and cache effectiveness.
///
/// `free_blocks + used_blocks + cached_blocks == total_blocks` always.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KvCacheStats {
    /// Blocks in the pool.
    pub total_blocks: usize,
    /// Blocks referenced by at least one live sequence.
    pub used_blocks: usize,
    /// Blocks held only by the prefix index (reusable by a later prompt, or evictable).
    pub cached_blocks: usize,
    /// Blocks on the free list.
    pub free_blocks: usize,
    /// Cached blocks evicted so far, cumulative.
    pub evictions: u64,
    /// Prompt tokens served from the prefix cache by `open`, cumulative.
    pub reused_tokens: u64,
}
