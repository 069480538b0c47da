//! Running one attention item: sweeping each of its blocks with the item's query rows while
//! the block sits in L1, then the next block (prefetched meanwhile). Rows reach the block kernel
//! in batches of up to `MAX_TILE` consecutive states that see the same number of the block's
//! tokens (a shared block's batch spans members); rows that see a block in full (every row of a
//! shared block; a prefill chunk's rows past one of its own blocks) go to the wide kernel
//! instead, in whole groups of 16 of a head's consecutive states (`wide`: rows across a vector's
//! lanes, queries transposed once per item and member). This is the matrix-matrix form of
//! decoding: (rows x block keys) per load instead of (1 x block keys).
//!
//! Invariant: within its segment a row folds its visible blocks in ascending order, the
//! segment's first block with `first = true`, with `n = min(block_size, pos + 1 - b * bs)`
//! visible tokens. Which kernel and which batch a row takes never changes its bits.

use std::ops::Range;

use super::super::block::{BlockView, Scratch, TileStates, MAX_TILE};
use super::super::scores::LANES;
use super::super::shape::{SeqShape, Shape};
use super::super::wide::{transpose_queries, MAX_GROUPS, MAX_ROWS, TOKENS_PER_PASS};
use super::super::{PagedKv, SeqQueries};
use super::items::AttentionItem;
use super::prefetch::Prefetch;

/// Everything an item reads.
pub(super) struct ItemInputs<'a> {
    pub(super) kv: &'a PagedKv<'a>,
    pub(super) seqs: &'a [SeqQueries<'a>],
    pub(super) shape: &'a Shape,
    pub(super) shapes: &'a [SeqShape],
    /// Blocks per segment.
    pub(super) seg_blocks: usize,
}

/// An item's result: the segment states of its rows and the head-blocks it loaded. States run
/// head by head (`per_head` each), then member, query row and head in group: member `k`'s
/// (counted from the item's first member) start at `first[k]` within each head's run, so one
/// head's rows of consecutive members are consecutive states and a batch can span members.
/// Rows that do not reach the segment hold garbage.
pub(super) struct Partial {
    pub(super) m: Vec<f32>,
    pub(super) l: Vec<f32>,
    pub(super) acc: Vec<f32>,
    pub(super) first: Vec<usize>,
    pub(super) per_head: usize,
    pub(super) loads: usize,
}

impl Partial {
    /// The state of member `k`'s row `i`, head in group `j`, for the item's `heads_before`-th
    /// head.
    pub(super) fn row(
        &self,
        heads_before: usize,
        k: usize,
        i: usize,
        j: usize,
        group: usize,
    ) -> usize {
        heads_before * self.per_head + self.first[k] + i * group + j
    }
}

/// Rows waiting for one `Scratch::attend_rows` call: consecutive states `r0..r0 + count`
/// that see the same number `n` of the block's tokens; and the next block's prefetch, which
/// each call advances by a slice.
struct RowBatch<'q> {
    qs: [&'q [f32]; MAX_TILE],
    count: usize,
    r0: usize,
    n: usize,
    /// States the wide kernel folded for the current block: `gather` skips them.
    skip: Range<usize>,
    prefetch: Prefetch<'q>,
}

impl Default for RowBatch<'_> {
    fn default() -> Self {
        RowBatch {
            qs: [&[]; MAX_TILE],
            count: 0,
            r0: 0,
            n: 0,
            skip: 0..0,
            prefetch: Prefetch::default(),
        }
    }
}

impl<'q> RowBatch<'q> {
    /// Whether row `r`, seeing `n` tokens, can join without a flush.
    fn takes(&self, r: usize, n: usize) -> bool {
        self.count == 0 || (self.count < MAX_TILE && self.n == n && self.r0 + self.count == r)
    }

    /// Adds row `r` (query `q`, `n` visible tokens); the caller checked `takes` or flushed.
    fn push(&mut self, r: usize, n: usize, q: &'q [f32]) {
        if self.count == 0 {
            (self.r0, self.n) = (r, n);
        }
        self.qs[self.count] = q;
        self.count += 1;
    }
}

impl ItemInputs<'_> {
    /// Index of each member's first state within one head's run of an item's states, plus the
    /// run's length.
    fn first_rows(&self, members: &[usize]) -> Vec<usize> {
        let mut first = Vec::with_capacity(members.len() + 1);
        first.push(0);
        for &s in members {
            first.push(first[first.len() - 1] + self.shapes[s].len * self.shape.group);
        }
        first
    }

    /// One key/value head's slice of block `block`.
    fn view(&self, block: u32, kv_head: usize) -> BlockView<'_> {
        let base = block as usize * self.shape.block_len;
        let (head, end) = (
            base + kv_head * self.shape.head_dim,
            base + self.shape.block_len,
        );
        BlockView {
            k: &self.kv.k[head..end],
            v: &self.kv.v[head..end],
            stride: self.shape.kv_stride,
        }
    }

    pub(super) fn run_item(&self, item: &AttentionItem<'_>, scratch: &mut Scratch) -> Partial {
        let (prefix, hd, g) = (item.prefix, self.shape.head_dim, self.shape.group);
        let members = &prefix.members[item.members.clone()];
        let first = self.first_rows(members);
        let per_head = first[members.len()];
        let rows = per_head * item.heads.len();
        let mut p = Partial {
            m: vec![0.0; rows],
            l: vec![0.0; rows],
            acc: vec![0.0; rows * hd],
            first,
            per_head,
            loads: 0,
        };
        // Member `k`'s first state for head `h`.
        let row0 = |p: &Partial, k: usize, h: usize| p.row(h - item.heads.start, k, 0, 0, g);
        let mut batch = RowBatch::default();
        let (lo, hi) = (item.seg * self.seg_blocks, (item.seg + 1) * self.seg_blocks);
        // Block `b` of member `k` in visiting order: the shared blocks, then each member's own.
        let own = |k: usize| lo.max(prefix.shared)..hi.min(self.shapes[members[k]].blocks);
        // The first own block after block `after` of member `k` (`None`: from its first).
        let next_own = |k: usize, after: Option<usize>| {
            (k..members.len()).find_map(|k2| {
                let b2 = own(k2).find(|&b2| k2 > k || after.is_none_or(|a| b2 > a))?;
                Some(self.seqs[members[k2]].block_table[b2])
            })
        };
        if let Some(&lead) = members.first() {
            let shared = lo..hi.min(prefix.shared);
            // Every row sees a shared block in full: whole groups of 16 of a head's rows take
            // the wide kernel, from their queries transposed once here for all the blocks.
            let wide_rows = if shared.is_empty() || !scratch.has_wide() {
                0
            } else {
                per_head / LANES * LANES
            };
            let qts = self.transposed_queries(members, item.heads.clone(), wide_rows);
            // Prefetch slices: one per pass of each wide call's score loop, one per batch.
            let passes = self.shape.block_size.div_ceil(TOKENS_PER_PASS);
            let calls =
                wide_rows.div_ceil(MAX_ROWS) * passes + (per_head - wide_rows).div_ceil(MAX_TILE);
            for b in shared.clone() {
                let id = self.seqs[lead].block_table[b];
                let next = if b + 1 < shared.end {
                    Some(self.seqs[lead].block_table[b + 1])
                } else {
                    next_own(0, None)
                };
                batch.prefetch = self.prefetch_of(next, item.heads.clone(), calls);
                for h in item.heads.clone() {
                    let blk = self.view(id, h);
                    p.loads += 1;
                    let head_row0 = row0(&p, 0, h);
                    let qt = qts.get(h - item.heads.start).map_or(&[][..], Vec::as_slice);
                    let wide =
                        self.attend_wide(qt, head_row0, (b, lo, blk), &mut batch, &mut p, scratch);
                    // The other rows: the members' rows of one head are consecutive states,
                    // so a batch runs across members.
                    batch.skip = head_row0..head_row0 + wide;
                    for (k, &s) in members.iter().enumerate() {
                        let r0 = row0(&p, k, h);
                        self.gather(h, s, r0, (b, lo, blk), &mut batch, &mut p, scratch);
                    }
                    self.flush(&mut batch, (b, lo, blk), &mut p, scratch);
                    batch.skip = 0..0;
                }
                batch.prefetch.issue_rest();
            }
        }
        let bs = self.shape.block_size;
        for (k, &s) in members.iter().enumerate() {
            let (start, len) = (self.shapes[s].start, self.shapes[s].len);
            // A member with many rows (a prefill chunk) sees most of its own blocks in full
            // from some row on: whole groups of 16 of those rows take the wide kernel too.
            let wide_rows = if scratch.has_wide() {
                len * g / LANES * LANES
            } else {
                0
            };
            let qts = self.transposed_queries(&members[k..=k], item.heads.clone(), wide_rows);
            for b in own(k) {
                let (id, next) = (self.seqs[s].block_table[b], next_own(k, Some(b)));
                let calls = (len * g).div_ceil(MAX_TILE);
                batch.prefetch = self.prefetch_of(next, item.heads.clone(), calls);
                // The member's rows from `full` on see all of block `b`; the wide kernel takes
                // the whole groups of them.
                let full = ((b + 1) * bs - 1).saturating_sub(start).min(len) * g;
                let first_group = full.div_ceil(LANES) * LANES;
                for h in item.heads.clone() {
                    let blk = self.view(id, h);
                    p.loads += 1;
                    let r0 = row0(&p, k, h);
                    let qt = qts.get(h - item.heads.start).map_or(&[][..], Vec::as_slice);
                    let qt = qt.get(first_group * hd..).unwrap_or(&[]);
                    let at = (b, lo, blk);
                    let wide =
                        self.attend_wide(qt, r0 + first_group, at, &mut batch, &mut p, scratch);
                    batch.skip = r0 + first_group..r0 + first_group + wide;
                    self.gather(h, s, r0, (b, lo, blk), &mut batch, &mut p, scratch);
                    self.flush(&mut batch, (b, lo, blk), &mut p, scratch);
                    batch.skip = 0..0;
                }
                batch.prefetch.issue_rest();
            }
        }
        p
    }

    /// The prefetch of the slices of `heads` of `block` (a hint; x86-64 only), spread over
    /// about `calls_per_head` kernel calls for each of the heads. The heads of a token slot
    /// are adjacent, so several heads are one contiguous run per slot.
    fn prefetch_of(
        &self,
        block: Option<u32>,
        heads: Range<usize>,
        calls_per_head: usize,
    ) -> Prefetch<'_> {
        let (bs, hd) = (self.shape.block_size, self.shape.head_dim);
        let calls = (calls_per_head * heads.len()).max(1);
        Prefetch {
            view: block.map(|block| self.view(block, heads.start)),
            width: heads.len() * hd,
            slots: bs,
            next: 0,
            per_call: bs.div_ceil(calls),
        }
    }

    /// Adds every row of member `s` for `kv_head` that sees any token of block `b` (already
    /// loaded as `blk`; its segment starts at block `lo`) to `batch`, flushing it into `p`
    /// whenever the next row cannot join (batch full, another visible count, or not the next
    /// state); the member's states for this head start at `row0`.
    #[allow(clippy::too_many_arguments)]
    fn gather<'q>(
        &'q self,
        kv_head: usize,
        s: usize,
        row0: usize,
        (b, lo, blk): (usize, usize, BlockView<'_>),
        batch: &mut RowBatch<'q>,
        p: &mut Partial,
        scratch: &mut Scratch,
    ) {
        let (shape, seq, sh) = (self.shape, &self.seqs[s], &self.shapes[s]);
        let (g, hd, bs) = (shape.group, shape.head_dim, shape.block_size);
        let block_start = b * bs;
        // Rows are in position order; those before `block_start` see nothing of this block.
        for i in block_start.saturating_sub(sh.start)..sh.len {
            let n = (sh.pos(i) + 1 - block_start).min(bs);
            let q_row = &seq.q[i * shape.row_len + kv_head * g * hd..][..g * hd];
            for (j, q) in q_row.chunks_exact(hd).enumerate() {
                let r = row0 + i * g + j;
                if batch.skip.contains(&r) {
                    continue;
                }
                if !batch.takes(r, n) {
                    self.flush(batch, (b, lo, blk), p, scratch);
                }
                batch.push(r, n, q);
            }
        }
    }

    /// For each key/value head of `heads`, the queries of its first `rows` states (its rows of
    /// `members`, member by member, query row by query row, head in group by head in group),
    /// transposed in groups of 16 for the wide kernel (`rows` is a multiple of 16). Nothing,
    /// not even the per-head list, for `rows == 0` (a decode step's own blocks).
    fn transposed_queries(
        &self,
        members: &[usize],
        heads: Range<usize>,
        rows: usize,
    ) -> Vec<Vec<f32>> {
        if rows == 0 {
            return Vec::new();
        }
        let (shape, g, hd) = (self.shape, self.shape.group, self.shape.head_dim);
        heads
            .map(|kv_head| {
                let queries: Vec<&[f32]> = members
                    .iter()
                    .flat_map(|&s| {
                        let q = self.seqs[s].q;
                        (0..self.shapes[s].len).flat_map(move |i| {
                            q[i * shape.row_len + kv_head * g * hd..][..g * hd].chunks_exact(hd)
                        })
                    })
                    .take(rows)
                    .collect();
                let mut qt = Vec::new();
                transpose_queries(&queries, hd, &mut qt);
                qt
            })
            .collect()
    }

    /// Folds block `b` (every token visible to every row) into the first states of a head's
    /// rows from `head_row0` on, as many whole groups of 16 as `qt` holds, with the wide
    /// kernel; returns how many rows it folded (0 where the kernel does not apply, and those
    /// rows then go through `gather`).
    fn attend_wide(
        &self,
        qt: &[f32],
        head_row0: usize,
        (b, lo, blk): (usize, usize, BlockView<'_>),
        batch: &mut RowBatch<'_>,
        p: &mut Partial,
        scratch: &mut Scratch,
    ) -> usize {
        let (hd, bs) = (self.shape.head_dim, self.shape.block_size);
        let rows = qt.len() / hd;
        let mut done = 0;
        while done < rows {
            let groups = ((rows - done) / LANES).min(MAX_GROUPS);
            let (r0, r1) = (head_row0 + done, head_row0 + done + groups * LANES);
            let states = TileStates {
                m: &mut p.m[r0..r1],
                l: &mut p.l[r0..r1],
                acc: &mut p.acc[r0 * hd..r1 * hd],
            };
            let (qt, scale) = (&qt[done * hd..], self.shape.scale);
            let between = &mut || batch.prefetch.issue_slice();
            if scratch
                .attend_wide(qt, groups, blk, bs, scale, b == lo, states, between)
                .is_err()
            {
                break;
            }
            done += groups * LANES;
        }
        done
    }

    /// Folds block `b` into the states of the rows in `batch` and empties it.
    fn flush(
        &self,
        batch: &mut RowBatch<'_>,
        (b, lo, blk): (usize, usize, BlockView<'_>),
        p: &mut Partial,
        scratch: &mut Scratch,
    ) {
        let (count, r0, hd) = (batch.count, batch.r0, self.shape.head_dim);
        if count == 0 {
            return;
        }
        batch.prefetch.issue_slice();
        let states = TileStates {
            m: &mut p.m[r0..r0 + count],
            l: &mut p.l[r0..r0 + count],
            acc: &mut p.acc[r0 * hd..(r0 + count) * hd],
        };
        scratch.attend_rows(
            &batch.qs[..count],
            blk,
            batch.n,
            self.shape.scale,
            b == lo,
            states,
        );
        batch.count = 0;
    }
}
