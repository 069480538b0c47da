//! The KV write kernels' error type: every variant names the argument at fault (`k_cache`,
//! `slots[3]`, `pairs[1].dst`, ...) and the size or range it had to fit.
//!
//! Invariant: `append` and `copy_blocks` (and their CUDA launchers) validate everything up
//! front and return one of these before writing any element.

/// Errors from validating a KV append or block copy.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KvError {
    /// A dimension that must be positive is zero.
    #[error("`{arg}` must be positive")]
    ZeroDim {
        /// The argument, e.g. `layout.head_dim`.
        arg: &'static str,
    },
    /// A cache is not a whole number of blocks.
    #[error("`{arg}` has {got} elements, not a multiple of one block ({block_len})")]
    CacheLen {
        /// `k_cache` or `v_cache`.
        arg: &'static str,
        /// The length supplied.
        got: usize,
        /// Elements in one block (`block_size * num_kv_heads * head_dim`).
        block_len: usize,
    },
    /// The key and value caches hold different numbers of elements.
    #[error("`v_cache` has {v} elements but `k_cache` has {k}")]
    CacheMismatch {
        /// Length of the key cache.
        k: usize,
        /// Length of the value cache.
        v: usize,
    },
    /// New keys or values are not `slots.len()` rows of `num_kv_heads * head_dim`.
    #[error(
        "`{arg}` has {got} elements; {tokens} tokens x num_kv_heads x head_dim need {expected}"
    )]
    NewLen {
        /// `k_new` or `v_new`.
        arg: &'static str,
        /// The length supplied.
        got: usize,
        /// Tokens (`slots.len()`).
        tokens: usize,
        /// Elements required.
        expected: usize,
    },
    /// A slot is past the end of the cache.
    #[error("`slots[{index}]` = {slot}, but the cache holds {num_slots} slots")]
    SlotOutOfRange {
        /// Index into `slots`.
        index: usize,
        /// The slot found.
        slot: u32,
        /// `num_blocks * block_size`.
        num_slots: usize,
    },
    /// Two tokens name the same slot (the result would depend on write order).
    #[error("`slots[{index}]` = {slot} repeats an earlier slot")]
    DuplicateSlot {
        /// Index of the second occurrence.
        index: usize,
        /// The repeated slot.
        slot: u32,
    },
    /// A block id in a copy pair is past the end of the cache.
    #[error("`pairs[{index}].{side}` = {block}, but the cache holds {num_blocks} blocks")]
    BlockOutOfRange {
        /// Index into `pairs`.
        index: usize,
        /// `src` or `dst`.
        side: &'static str,
        /// The block id found.
        block: u32,
        /// Blocks in the cache.
        num_blocks: usize,
    },
    /// Two copies write the same destination block.
    #[error("`pairs[{index}].dst` = {block} is the destination of an earlier pair")]
    DuplicateDestination {
        /// Index of the second occurrence.
        index: usize,
        /// The block written twice.
        block: u32,
    },
    /// A destination block is also a source (the result would depend on copy order).
    #[error("`pairs[{index}].dst` = {block} is also the source of a pair")]
    DestinationIsSource {
        /// Index of the pair writing it.
        index: usize,
        /// The block.
        block: u32,
    },
    /// A size derived from the arguments does not fit in `usize`.
    #[error("`{arg}` describes a size too large to address")]
    Overflow {
        /// The argument whose size overflowed.
        arg: &'static str,
    },
}
