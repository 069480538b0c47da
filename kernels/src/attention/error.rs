//! The attention kernels' error type: every variant names the argument at fault (`kv.k`,
//! `seqs[3].block_table`, `out`, ...) and the size it was expected to have.
//!
//! Invariant: `paged_attention`, `cascade_attention` and `attention_reference` validate every
//! length, block id and prefix group up front and return one of these before touching `out`;
//! no user-supplied shape can make them panic or index out of bounds.

/// Errors from validating the arguments of an attention call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AttentionError {
    /// A dimension that must be positive is zero.
    #[error("`{arg}` must be positive")]
    ZeroDim {
        /// The argument, e.g. `kv.block_size`.
        arg: &'static str,
    },
    /// Query heads do not split evenly over key/value heads (GQA needs `num_heads % num_kv_heads == 0`).
    #[error(
        "`params.num_heads` = {num_heads} is not a multiple of `kv.num_kv_heads` = {num_kv_heads}"
    )]
    HeadsNotMultiple {
        /// Query heads.
        num_heads: usize,
        /// Key/value heads.
        num_kv_heads: usize,
    },
    /// `kv.k` or `kv.v` is not a whole number of blocks.
    #[error("`{arg}` has {got} elements, not a multiple of one block (block_size x num_kv_heads x head_dim = {block_len})")]
    KvLen {
        /// `kv.k` or `kv.v`.
        arg: &'static str,
        /// The length supplied.
        got: usize,
        /// Elements in one block.
        block_len: usize,
    },
    /// `kv.k` and `kv.v` hold different numbers of blocks.
    #[error("`kv.v` has {v} elements but `kv.k` has {k}; they must hold the same blocks")]
    KvMismatch {
        /// Length of `kv.k`.
        k: usize,
        /// Length of `kv.v`.
        v: usize,
    },
    /// A sequence's `q` is not a whole number of query rows.
    #[error(
        "`seqs[{seq}].q` has {got} elements, not a multiple of num_heads x head_dim = {row_len}"
    )]
    QueryLen {
        /// Index of the sequence in `seqs`.
        seq: usize,
        /// The length supplied.
        got: usize,
        /// Elements in one query row.
        row_len: usize,
    },
    /// A sequence's block table does not cover the positions its queries attend to.
    #[error("`seqs[{seq}].block_table` has {got} blocks; positions 0..{end} need {needed}")]
    BlockTableTooShort {
        /// Index of the sequence in `seqs`.
        seq: usize,
        /// Blocks in the table.
        got: usize,
        /// Blocks needed.
        needed: usize,
        /// `start_pos + len`: one past the last position attended to.
        end: usize,
    },
    /// A block table entry points past the end of the KV slices.
    #[error("`seqs[{seq}].block_table[{index}]` = {block}, but `kv` holds {num_blocks} blocks")]
    BlockOutOfRange {
        /// Index of the sequence in `seqs`.
        seq: usize,
        /// Index into the block table.
        index: usize,
        /// The block id found there.
        block: u32,
        /// Blocks in `kv.k` / `kv.v`.
        num_blocks: usize,
    },
    /// `out` does not have room for exactly every query row.
    #[error("`out` has {got} elements; {rows} query rows x num_heads x head_dim need {expected}")]
    OutputLen {
        /// Query rows over all sequences.
        rows: usize,
        /// Elements required.
        expected: usize,
        /// The length supplied.
        got: usize,
    },
    /// A size derived from the arguments does not fit in `usize`.
    #[error("`{arg}` describes a size too large to address")]
    Overflow {
        /// The argument whose size overflowed.
        arg: &'static str,
    },
    /// A prefix group has no members.
    #[error("`groups[{group}].members` is empty")]
    EmptyGroup {
        /// Index of the group in `groups`.
        group: usize,
    },
    /// A prefix group names a sequence that is not in `seqs`.
    #[error("`groups[{group}].members` names sequence {member}, but there are {seqs} sequences")]
    GroupMemberOutOfRange {
        /// Index of the group in `groups`.
        group: usize,
        /// The sequence index found.
        member: usize,
        /// Sequences in the call.
        seqs: usize,
    },
    /// A sequence appears twice among the groups' members (in one group or in two).
    #[error("`groups[{group}].members` names sequence {seq}, which is already in a group")]
    DuplicateMember {
        /// Index of the group in `groups`.
        group: usize,
        /// The repeated sequence index.
        seq: usize,
    },
    /// A prefix group's `prefix_len` is zero.
    #[error("`groups[{group}].prefix_len` must be positive")]
    EmptyPrefix {
        /// Index of the group in `groups`.
        group: usize,
    },
    /// A member's first query row does not see the whole prefix (`prefix_len > start_pos + 1`).
    #[error("`groups[{group}].prefix_len` = {prefix_len}, but `seqs[{seq}].start_pos` = {start_pos} sees only {start_pos} + 1 positions")]
    PrefixNotVisible {
        /// Index of the group in `groups`.
        group: usize,
        /// The member sequence.
        seq: usize,
        /// The group's prefix length.
        prefix_len: usize,
        /// The member's first query position.
        start_pos: usize,
    },
    /// A member's block table does not start with the group's prefix blocks.
    #[error("`seqs[{seq}].block_table[{index}]` differs from the other members of `groups[{group}]` inside the shared prefix")]
    PrefixMismatch {
        /// Index of the group in `groups`.
        group: usize,
        /// The member sequence whose table differs.
        seq: usize,
        /// The first differing table index.
        index: usize,
    },
    /// Two softmax states (or a state and a value / output row) of different head dims.
    #[error("softmax state has head_dim {expected}, but the argument has {got} elements")]
    StateHeadDim {
        /// The state's head dim.
        expected: usize,
        /// The argument's length.
        got: usize,
    },
}
