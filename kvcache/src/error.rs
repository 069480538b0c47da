//! The crate's one error type, [`KvCacheError`], and its `Result` alias.
//!
//! Caller errors (out of blocks, unknown or duplicate sequence, bad config, bad truncation) are
//! recoverable and carry structured fields. [`KvCacheError::InvalidBlock`] and
//! [`KvCacheError::CorruptSequence`] are different: they report broken bookkeeping (a refcount
//! underflow, a double free), which is a bug in this crate, never in the caller; they exist so
//! internal code can propagate instead of panicking.

use crate::types::{BlockId, SeqId};

/// Everything that can go wrong in KV-cache bookkeeping.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KvCacheError {
    /// An allocation needed more blocks than are free plus evictable. Nothing was changed.
    #[error("out of KV-cache blocks: need {needed}, only {free} allocatable")]
    OutOfBlocks {
        /// Blocks the operation needed to allocate.
        needed: usize,
        /// Blocks allocatable at the time (free plus evictable cached).
        free: usize,
    },
    /// The sequence id is not open.
    #[error("unknown sequence {0}")]
    UnknownSequence(SeqId),
    /// `open`/`fork` was asked to create a sequence id that is already open.
    #[error("sequence {0} already exists")]
    SequenceExists(SeqId),
    /// The configuration is unusable; the message names the field.
    #[error("invalid KV-cache config: {0}")]
    InvalidConfig(String),
    /// `truncate` was asked to keep more tokens than the sequence holds.
    #[error("cannot truncate sequence {seq} to {len} tokens: it holds only {seq_len}")]
    TruncateBeyondEnd {
        /// The sequence.
        seq: SeqId,
        /// The length asked for.
        len: usize,
        /// The sequence's current length.
        seq_len: usize,
    },
    /// Internal bookkeeping was found inconsistent (a bug in this crate).
    #[error("KV-cache bookkeeping bug on block {block}: {reason}")]
    InvalidBlock {
        /// The block concerned.
        block: BlockId,
        /// What was wrong.
        reason: &'static str,
    },
    /// A sequence's block table was found inconsistent with its length (a bug in this crate).
    #[error("KV-cache bookkeeping bug in sequence {seq}: {reason}")]
    CorruptSequence {
        /// The sequence concerned.
        seq: SeqId,
        /// What was wrong.
        reason: &'static str,
    },
}

/// `Result` with [`KvCacheError`].
pub type Result<T> = std::result::Result<T, KvCacheError>;
