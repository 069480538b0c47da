//! Planning an attention call's work: the item list. Each shared prefix's rows are cut into
//! (key/value heads, members, segment) items, listed so that the threads claiming them in order
//! interleave memory-bound and compute-bound work and a call ends on small uniform items.
//!
//! A segment that holds shared blocks gives one item per key/value head with every member (the
//! shared blocks are compute: dozens of rows per load). A segment past the shared blocks of a
//! prefix with at least `num_kv_heads` members ("streamed") gives one item per chunk of members
//! with every head instead: each own block is read by one member's few rows, so those items are
//! bound by memory, and a block's heads are interleaved in its token slots, so reading every
//! head of a block in one pass streams whole cache lines in order (one head per item touched a
//! third of each slot's lines and wasted what the hardware prefetcher brought along). Either
//! cut makes `num_kv_heads` items per segment.

use std::ops::Range;

use super::super::plan::SharedPrefix;

/// One work item: segment `seg` of the key/value heads `heads` for every row of the shared
/// prefix's members `members` (indices into `prefix.members`).
pub(super) struct AttentionItem<'a> {
    pub(super) prefix: &'a SharedPrefix,
    pub(super) heads: Range<usize>,
    pub(super) members: Range<usize>,
    pub(super) seg: usize,
}

/// Where a shared prefix's items sit in the item list: for each `idx in 0..num_kv_heads` and each
/// segment, one item in `base + idx * segs..`; it takes head `idx` with every member, or, in a
/// streamed segment (`seg >= streamed_from`), every head with member chunk `idx` (members
/// `idx * chunk..`). Within each `idx` the streamed items come first, then the shared ones:
/// the threads, claiming in list order, still interleave the memory-bound streamed items with
/// the compute-bound shared ones, and a call ends on shared items (small and uniform) instead
/// of a streamed one (its members' own blocks, which grow with every generated token), which
/// would leave one thread idle for most of it.
pub(super) struct ItemLayout {
    pub(super) base: usize,
    pub(super) segs: usize,
    pub(super) streamed_from: usize,
    pub(super) chunk: usize,
    pub(super) heads: usize,
    pub(super) members: usize,
}

impl ItemLayout {
    /// What item `(idx, seg)` takes: its key/value heads and its members.
    pub(super) fn cut(&self, idx: usize, seg: usize) -> (Range<usize>, Range<usize>) {
        if seg >= self.streamed_from {
            let from = (idx * self.chunk).min(self.members);
            (0..self.heads, from..(from + self.chunk).min(self.members))
        } else {
            (idx..idx + 1, 0..self.members)
        }
    }

    /// Where item `(idx, seg)` sits in the list: `idx`'s streamed segments first, then its
    /// shared ones (see the type's doc).
    pub(super) fn index(&self, idx: usize, seg: usize) -> usize {
        let rank = if seg >= self.streamed_from {
            seg - self.streamed_from
        } else {
            seg + self.segs.saturating_sub(self.streamed_from)
        };
        self.base + idx * self.segs + rank
    }

    /// The segments in the order each `idx`'s items are listed.
    pub(super) fn segments(&self) -> impl Iterator<Item = usize> {
        let streamed = self.streamed_from.min(self.segs);
        (streamed..self.segs).chain(0..streamed)
    }

    /// Where member `k`'s rows for `kv_head` in segment `seg` are (`cut` read backwards): the
    /// item, the member's index among the item's members, and how many of the item's heads
    /// come before `kv_head`.
    pub(super) fn locate(&self, seg: usize, kv_head: usize, k: usize) -> (usize, usize, usize) {
        if seg >= self.streamed_from {
            let idx = k / self.chunk;
            (self.index(idx, seg), k - idx * self.chunk, kv_head)
        } else {
            (self.index(kv_head, seg), k, 0)
        }
    }
}
