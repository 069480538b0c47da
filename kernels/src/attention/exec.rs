//! The executor of a plan: splits each unit's work into (unit, key/value heads, members,
//! segment) items, runs them on the calling thread and rayon helpers (`share.rs`), then merges
//! each row's segment states in order and writes the normalised rows into `out` (the batch's
//! rows in two halves, one on a helper, when there are a few).
//!
//! A row's blocks are cut into fixed segments of `segment_blocks` blocks by position (segment
//! `j` is blocks `j*S..(j+1)*S`, `S = max(1, 128 / block_size)`): flash-decoding's split-K, so a
//! long shared prefix spreads over cores instead of sitting on `num_kv_heads` of them. An item
//! owns the query rows of its members for the `group` query heads that read each of its
//! key/value heads (GQA), and loads each of its blocks' slice for a head once, sweeping it
//! with all of those rows while it sits in L1: the unit's shared blocks by the rows of every
//! member, each member's own blocks by that member's rows. That is the matrix-matrix form of
//! decoding: (rows x block keys) per load instead of (1 x block keys). Rows reach the block
//! kernel in tiles of up to `MAX_TILE` consecutive states that see the same number of the
//! block's tokens (a shared block's tile spans members), and while one block is swept the
//! next one in visiting order is prefetched, a slice of it before each kernel call. Rows that
//! see a block in full (every row of a shared block; a prefill chunk's rows past one of its own
//! blocks) go to the wide kernel instead, in whole groups of 16 of a head's consecutive states
//! (`wide`: rows across a vector's lanes, queries transposed once per item and member, up to
//! 48 rows a call, the prefetch sliced over its score passes); the other rows take tiles.
//!
//! How a unit is cut: a segment that holds shared blocks gives one item per key/value head
//! with every member (the shared blocks are compute: dozens of rows per load). A segment past
//! the shared blocks of a unit with at least `num_kv_heads` members ("streamed") gives one item
//! per chunk of members with every head instead: each own block is read by one member's few
//! rows, so those items are bound by memory, and a block's heads are interleaved in its token
//! slots (`slot * kv_stride + head * head_dim`). Reading every head of a block in one pass
//! streams whole cache lines in order; one head per item touched a third of each slot's lines
//! (with three heads) and wasted what the hardware prefetcher brought along (measured on the
//! dev VM, two threads: 10 GB/s of useful bytes reading one 256-byte head slice per 768-byte
//! slot, 17 GB/s reading whole slots). Either cut makes `num_kv_heads` items per segment.
//!
//! Invariants: within a segment a row folds its visible blocks in ascending order, the
//! segment's first block with `first = true`, with `n = min(block_size, pos + 1 - b * bs)`
//! visible tokens; segment states are merged in ascending order. Segments are fixed by the
//! row's position and the block size alone, so with `block`'s contract the row's bits do not
//! depend on the unit, batch, item cut, chunking or thread count. Each block of a unit is
//! loaded by exactly one segment item per head, so the load count is the same for any thread
//! count.

use std::ops::Range;

use super::block::{merge, BlockView, RowState, Scratch, TileStates, MAX_TILE};
use super::plan::Unit;
use super::scores::LANES;
use super::shape::{SeqShape, Shape};
use super::wide::{transpose_queries, MAX_GROUPS, MAX_ROWS, TOKENS_PER_PASS};
use super::{AttentionStats, PagedKv, SeqQueries};
use crate::share;

/// Tokens per segment (rounded down to whole blocks, at least one block).
const SEGMENT_TOKENS: usize = 128;

/// Batch rows from which the merge is split in two halves, one on a helper: in a 16-row decode
/// step of the default model the merge was 0.75-0.89 ms of serial work (30 layers) while the
/// helper waited; split, 0.57-0.70 ms (in-process A/B on the dev VM).
const FINISH_SPLIT_ROWS: usize = 4;

/// Everything an item reads.
struct Ctx<'a> {
    kv: &'a PagedKv<'a>,
    seqs: &'a [SeqQueries<'a>],
    shape: &'a Shape,
    shapes: &'a [SeqShape],
    /// Blocks per segment.
    seg_blocks: usize,
}

/// One work item: segment `seg` of the key/value heads `heads` for every row of the unit's
/// members `members` (indices into `unit.members`).
struct Item<'a> {
    unit: &'a Unit,
    heads: Range<usize>,
    members: Range<usize>,
    seg: usize,
}

/// An item's result: the segment states of its rows and the head-blocks it loaded. States run
/// head by head (`per_head` each), then member, query row and head in group: member `k`'s
/// (counted from the item's first member) start at `first[k]` within each head's run, so one
/// head's rows of consecutive members are consecutive states and a tile can span members.
/// Rows that do not reach the segment hold garbage.
struct Partial {
    m: Vec<f32>,
    l: Vec<f32>,
    acc: Vec<f32>,
    first: Vec<usize>,
    per_head: usize,
    loads: usize,
}

impl Partial {
    /// The state of member `k`'s row `i`, head in group `j`, for the item's `heads_before`-th
    /// head.
    fn row(&self, heads_before: usize, k: usize, i: usize, j: usize, group: usize) -> usize {
        heads_before * self.per_head + self.first[k] + i * group + j
    }
}

/// Where a unit's items sit in the item list: for each `idx in 0..num_kv_heads` and each
/// segment, one item in `base + idx * segs..`; it takes head `idx` with every member, or, in a
/// streamed segment (`seg >= streamed_from`), every head with member chunk `idx` (members
/// `idx * chunk..`). Within each `idx` the streamed items come first, then the shared ones:
/// the threads, claiming in list order, still interleave the memory-bound streamed items with
/// the compute-bound shared ones, and a call ends on shared items (uniform, ~10 us each in a
/// 16-branch decode step) instead of a streamed one (its members' own blocks, which grow with
/// every generated token). Ending on a streamed item left one thread idle for most of it: in
/// the default `nsample`'s batched run the threads' waits at the ends of attention calls
/// summed to 95-134 ms, against 32-50 ms in this order (in-process alternation on the dev VM).
struct UnitItems {
    base: usize,
    segs: usize,
    streamed_from: usize,
    chunk: usize,
    heads: usize,
    members: usize,
}

impl UnitItems {
    /// What item `(idx, seg)` takes: its key/value heads and its members.
    fn cut(&self, idx: usize, seg: usize) -> (Range<usize>, Range<usize>) {
        if seg >= self.streamed_from {
            let from = (idx * self.chunk).min(self.members);
            (0..self.heads, from..(from + self.chunk).min(self.members))
        } else {
            (idx..idx + 1, 0..self.members)
        }
    }

    /// Where item `(idx, seg)` sits in the list: `idx`'s streamed segments first, then its
    /// shared ones (see the type's doc).
    fn index(&self, idx: usize, seg: usize) -> usize {
        let rank = if seg >= self.streamed_from {
            seg - self.streamed_from
        } else {
            seg + self.segs.saturating_sub(self.streamed_from)
        };
        self.base + idx * self.segs + rank
    }

    /// The segments in the order each `idx`'s items are listed.
    fn segments(&self) -> impl Iterator<Item = usize> {
        let streamed = self.streamed_from.min(self.segs);
        (streamed..self.segs).chain(0..streamed)
    }

    /// Where member `k`'s rows for `kv_head` in segment `seg` are (`cut` read backwards): the
    /// item, the member's index among the item's members, and how many of the item's heads
    /// come before `kv_head`.
    fn locate(&self, seg: usize, kv_head: usize, k: usize) -> (usize, usize, usize) {
        if seg >= self.streamed_from {
            let idx = k / self.chunk;
            (self.index(idx, seg), k - idx * self.chunk, kv_head)
        } else {
            (self.index(kv_head, seg), k, 0)
        }
    }
}

/// Rows waiting for one `Scratch::attend_rows` call: consecutive states `r0..r0 + count`
/// that see the same number `n` of the block's tokens; and the next block's prefetch, which
/// each call advances by a slice.
struct Pending<'q> {
    qs: [&'q [f32]; MAX_TILE],
    count: usize,
    r0: usize,
    n: usize,
    /// States the wide kernel folded for the current block: `gather` skips them.
    skip: Range<usize>,
    ahead: Ahead<'q>,
}

impl Default for Pending<'_> {
    fn default() -> Self {
        Pending {
            qs: [&[]; MAX_TILE],
            count: 0,
            r0: 0,
            n: 0,
            skip: 0..0,
            ahead: Ahead::default(),
        }
    }
}

/// The next block's prefetch, asked for a slice of its slots before each kernel call on the
/// current block instead of all at once: a whole block's lines in one burst wait for the
/// core's few fill buffers, and the item loop stalled there (a decode profile put ~80 % of
/// the loop's samples right after its prefetch instructions). Spread, the loop's share of
/// that profile went from 12.1 % to 10.5 %; the rest is the branches' own blocks streaming
/// from memory.
#[derive(Default)]
struct Ahead<'a> {
    view: Option<BlockView<'a>>,
    /// Floats per slot to ask for (the item's heads).
    width: usize,
    /// Slots of the block, and the first one not yet asked for.
    slots: usize,
    next: usize,
    /// Slots per kernel call.
    per_call: usize,
}

impl Ahead<'_> {
    /// Asks for the next slice (before a kernel call on the current block).
    fn issue_slice(&mut self) {
        self.issue(self.per_call);
    }

    /// Asks for whatever is left (once the current block is done).
    fn issue_rest(&mut self) {
        self.issue(usize::MAX);
    }

    /// Asks for up to `slots` more slots.
    fn issue(&mut self, slots: usize) {
        #[cfg(target_arch = "x86_64")]
        if let Some(view) = self.view {
            let end = self.slots.min(self.next.saturating_add(slots));
            super::x86::prefetch(view, self.next..end, self.width);
            self.next = end;
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = slots;
    }
}

impl<'q> Pending<'q> {
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

/// Runs the plan, writes every row of `out`, and counts block loads.
pub(crate) fn execute(
    kv: &PagedKv<'_>,
    seqs: &[SeqQueries<'_>],
    shape: &Shape,
    shapes: &[SeqShape],
    units: &[Unit],
    out: &mut [f32],
) -> AttentionStats {
    let seg_blocks = (SEGMENT_TOKENS / shape.block_size).max(1);
    let ctx = Ctx {
        kv,
        seqs,
        shape,
        shapes,
        seg_blocks,
    };
    let nkv = shape.num_kv_heads;
    let mut items: Vec<Item<'_>> = Vec::new();
    let mut layouts = Vec::with_capacity(units.len());
    for unit in units {
        let members = unit.members.len();
        let segs = unit
            .members
            .iter()
            .map(|&s| shapes[s].blocks.div_ceil(seg_blocks))
            .max()
            .unwrap_or(0);
        let streamed_from = if members >= nkv && nkv > 1 {
            unit.shared.div_ceil(seg_blocks)
        } else {
            segs
        };
        let layout = UnitItems {
            base: items.len(),
            segs,
            streamed_from,
            chunk: members.div_ceil(nkv),
            heads: nkv,
            members,
        };
        for idx in 0..nkv {
            for seg in layout.segments() {
                debug_assert_eq!(layout.index(idx, seg), items.len());
                let (heads, members) = layout.cut(idx, seg);
                items.push(Item {
                    unit,
                    heads,
                    members,
                    seg,
                });
            }
        }
        layouts.push(layout);
    }
    let new_scratch = || Scratch::new(shape.block_size, shape.head_dim);
    let run = |scratch: &mut Scratch, i: usize| ctx.run_item(&items[i], scratch);
    let results = share::map(
        items.len(),
        rayon::current_num_threads().saturating_sub(1),
        &new_scratch,
        &run,
    );
    let loads: usize = results.iter().map(|p| p.loads).sum();
    let finish = |rows: Range<usize>, out: &mut [f32]| {
        for (unit, layout) in units.iter().zip(&layouts) {
            ctx.finish(&results, unit, layout, rows.clone(), out);
        }
    };
    let rows = out.len() / shape.row_len.max(1);
    if rows < FINISH_SPLIT_ROWS {
        finish(0..rows, out);
    } else {
        // Rows are merged independently: which thread merges a row changes no bit.
        let half = rows.div_ceil(2);
        let (first, second) = out.split_at_mut(half * shape.row_len);
        share::share_pair([(0..half, first), (half..rows, second)], &|(rows, out)| {
            finish(rows.clone(), out);
        });
    }
    // Every head of a unit visits the same blocks, so per-head loads divide evenly.
    let kv_blocks_read = loads / nkv;
    let unshared: usize = units
        .iter()
        .flat_map(|u| &u.members)
        .map(|&s| shapes[s].blocks)
        .sum();
    AttentionStats {
        kv_blocks_read,
        shared_block_reads_saved: unshared.saturating_sub(kv_blocks_read),
    }
}

impl Ctx<'_> {
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

    fn run_item(&self, item: &Item<'_>, scratch: &mut Scratch) -> Partial {
        let (unit, hd, g) = (item.unit, self.shape.head_dim, self.shape.group);
        let members = &unit.members[item.members.clone()];
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
        let mut tile = Pending::default();
        let (lo, hi) = (item.seg * self.seg_blocks, (item.seg + 1) * self.seg_blocks);
        // Block `b` of member `k` in visiting order: the shared blocks, then each member's own.
        let own = |k: usize| lo.max(unit.shared)..hi.min(self.shapes[members[k]].blocks);
        // The first own block after block `after` of member `k` (`None`: from its first).
        let next_own = |k: usize, after: Option<usize>| {
            (k..members.len()).find_map(|k2| {
                let b2 = own(k2).find(|&b2| k2 > k || after.is_none_or(|a| b2 > a))?;
                Some(self.seqs[members[k2]].block_table[b2])
            })
        };
        if let Some(&lead) = members.first() {
            let shared = lo..hi.min(unit.shared);
            // Every row sees a shared block in full: whole groups of 16 of a head's rows take
            // the wide kernel, from their queries transposed once here for all the blocks.
            let wide_rows = if shared.is_empty() || !scratch.has_wide() {
                0
            } else {
                per_head / LANES * LANES
            };
            let qts = self.transposed_queries(members, item.heads.clone(), wide_rows);
            // Prefetch slices: one per pass of each wide call's score loop, one per tile.
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
                tile.ahead = self.ahead(next, item.heads.clone(), calls);
                for h in item.heads.clone() {
                    let blk = self.view(id, h);
                    p.loads += 1;
                    let head_row0 = row0(&p, 0, h);
                    let qt = qts.get(h - item.heads.start).map_or(&[][..], Vec::as_slice);
                    let wide =
                        self.attend_wide(qt, head_row0, (b, lo, blk), &mut tile, &mut p, scratch);
                    // The other rows: the members' rows of one head are consecutive states,
                    // so tiles run across members.
                    tile.skip = head_row0..head_row0 + wide;
                    for (k, &s) in members.iter().enumerate() {
                        let r0 = row0(&p, k, h);
                        self.gather(h, s, r0, (b, lo, blk), &mut tile, &mut p, scratch);
                    }
                    self.flush(&mut tile, (b, lo, blk), &mut p, scratch);
                    tile.skip = 0..0;
                }
                tile.ahead.issue_rest();
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
                tile.ahead = self.ahead(next, item.heads.clone(), calls);
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
                        self.attend_wide(qt, r0 + first_group, at, &mut tile, &mut p, scratch);
                    tile.skip = r0 + first_group..r0 + first_group + wide;
                    self.gather(h, s, r0, (b, lo, blk), &mut tile, &mut p, scratch);
                    self.flush(&mut tile, (b, lo, blk), &mut p, scratch);
                    tile.skip = 0..0;
                }
                tile.ahead.issue_rest();
            }
        }
        p
    }

    /// The prefetch of the slices of `heads` of `block` (a hint; x86-64 only), spread over
    /// about `calls_per_head` kernel calls for each of the heads. The heads of a token slot
    /// are adjacent, so several heads are one contiguous run per slot.
    fn ahead(&self, block: Option<u32>, heads: Range<usize>, calls_per_head: usize) -> Ahead<'_> {
        let (bs, hd) = (self.shape.block_size, self.shape.head_dim);
        let calls = (calls_per_head * heads.len()).max(1);
        Ahead {
            view: block.map(|block| self.view(block, heads.start)),
            width: heads.len() * hd,
            slots: bs,
            next: 0,
            per_call: bs.div_ceil(calls),
        }
    }

    /// Adds every row of member `s` for `kv_head` that sees any token of block `b` (already
    /// loaded as `blk`; its segment starts at block `lo`) to `tile`, flushing it into `p`
    /// whenever the next row cannot join (tile full, another visible count, or not the next
    /// state); the member's states for this head start at `row0`.
    #[allow(clippy::too_many_arguments)]
    fn gather<'q>(
        &'q self,
        kv_head: usize,
        s: usize,
        row0: usize,
        (b, lo, blk): (usize, usize, BlockView<'_>),
        tile: &mut Pending<'q>,
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
                if tile.skip.contains(&r) {
                    continue;
                }
                if !tile.takes(r, n) {
                    self.flush(tile, (b, lo, blk), p, scratch);
                }
                tile.push(r, n, q);
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
        tile: &mut Pending<'_>,
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
            let between = &mut || tile.ahead.issue_slice();
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

    /// Folds block `b` into the states of the rows in `tile` and empties it.
    fn flush(
        &self,
        tile: &mut Pending<'_>,
        (b, lo, blk): (usize, usize, BlockView<'_>),
        p: &mut Partial,
        scratch: &mut Scratch,
    ) {
        let (count, r0, hd) = (tile.count, tile.r0, self.shape.head_dim);
        if count == 0 {
            return;
        }
        tile.ahead.issue_slice();
        let states = TileStates {
            m: &mut p.m[r0..r0 + count],
            l: &mut p.l[r0..r0 + count],
            acc: &mut p.acc[r0 * hd..(r0 + count) * hd],
        };
        scratch.attend_rows(
            &tile.qs[..count],
            blk,
            tile.n,
            self.shape.scale,
            b == lo,
            states,
        );
        tile.count = 0;
    }

    /// Merges the segment states (the items of `layout` in `parts`) of each of `unit`'s rows
    /// that falls in the batch rows `rows`, in order, normalises, and writes the rows into
    /// `out` (`[row, head, dim]`, holding exactly the batch rows `rows`).
    fn finish(
        &self,
        parts: &[Partial],
        unit: &Unit,
        layout: &UnitItems,
        rows: Range<usize>,
        out: &mut [f32],
    ) {
        let (shape, hd, g) = (self.shape, self.shape.head_dim, self.shape.group);
        let seg_tokens = self.seg_blocks * shape.block_size;
        let mut acc = vec![0f32; hd];
        for (k, &s) in unit.members.iter().enumerate() {
            let sh = &self.shapes[s];
            // The member's rows `i` whose batch row `row_offset + i` is in `rows`.
            let mine = rows.start.saturating_sub(sh.row_offset)
                ..sh.len.min(rows.end.saturating_sub(sh.row_offset));
            for h in 0..shape.num_kv_heads {
                // Member `k`'s state for head `h`, row `i`, head in group `j`, segment `seg`.
                let state = |seg: usize, i: usize, j: usize| {
                    let (item, kk, heads_before) = layout.locate(seg, h, k);
                    let part = &parts[item];
                    (part, part.row(heads_before, kk, i, j, g))
                };
                for i in mine.clone() {
                    let row = sh.row_offset + i - rows.start;
                    let row_out = &mut out[row * shape.row_len + h * g * hd..];
                    for (j, o) in row_out[..g * hd].chunks_exact_mut(hd).enumerate() {
                        let (first, r) = state(0, i, j);
                        let (mut m, mut l) = (first.m[r], first.l[r]);
                        acc.copy_from_slice(&first.acc[r * hd..][..hd]);
                        for seg in 1..=sh.pos(i) / seg_tokens {
                            let (part, r) = state(seg, i, j);
                            let row = RowState {
                                m: &mut m,
                                l: &mut l,
                                acc: &mut acc,
                            };
                            merge(row, part.m[r], part.l[r], &part.acc[r * hd..][..hd]);
                        }
                        for (o, &a) in o.iter_mut().zip(&acc) {
                            *o = a / l;
                        }
                    }
                }
            }
        }
    }
}
