//! The executor of a plan: splits each unit's work into (unit, key/value head, segment) items,
//! runs them on the calling thread and rayon helpers (`share.rs`), then merges each row's
//! segment states in order and writes the normalised rows into `out`.
//!
//! A row's blocks are cut into fixed segments of `segment_blocks` blocks by position (segment
//! `j` is blocks `j*S..(j+1)*S`, `S = max(1, 128 / block_size)`): flash-decoding's split-K, so a
//! long shared prefix spreads over cores instead of sitting on `num_kv_heads` of them. An item
//! owns the query rows of all its unit's members for the `group` query heads that read one
//! key/value head (GQA), and loads each of its blocks' slice for that head once, sweeping it
//! with all of those rows while it sits in L1: the unit's shared blocks by the rows of every
//! member, each member's own blocks by that member's rows. That is the matrix-matrix form of
//! decoding: (rows x block keys) per load instead of (1 x block keys). Rows reach the block
//! kernel in tiles of up to `MAX_TILE` consecutive states that see the same number of the
//! block's tokens (a shared block's tile spans members), and while one block is swept the
//! next one in visiting order is prefetched.
//!
//! Invariants: within a segment a row folds its visible blocks in ascending order, the
//! segment's first block with `first = true`, with `n = min(block_size, pos + 1 - b * bs)`
//! visible tokens; segment states are merged in ascending order. Segments are fixed by the
//! row's position and the block size alone, so with `block`'s contract the row's bits do not
//! depend on the unit, batch, chunking or thread count. Each block of a unit is loaded by
//! exactly one segment item per head, so the load count is the same for any thread count.

use super::block::{merge, BlockView, RowState, Scratch, TileStates, MAX_TILE};
use super::plan::Unit;
use super::shape::{SeqShape, Shape};
use super::{AttentionStats, PagedKv, SeqQueries};
use crate::share;

/// Tokens per segment (rounded down to whole blocks, at least one block).
const SEGMENT_TOKENS: usize = 128;

/// Everything an item reads.
struct Ctx<'a> {
    kv: &'a PagedKv<'a>,
    seqs: &'a [SeqQueries<'a>],
    shape: &'a Shape,
    shapes: &'a [SeqShape],
    /// Blocks per segment.
    seg_blocks: usize,
}

/// One work item: segment `seg` of key/value head `kv_head` for every row of `unit`.
struct Item<'a> {
    unit: &'a Unit,
    kv_head: usize,
    seg: usize,
}

/// An item's result: the segment states of its rows (member-major, then query row, then head
/// in group; rows that do not reach the segment hold garbage) and the blocks it loaded.
struct Partial {
    m: Vec<f32>,
    l: Vec<f32>,
    acc: Vec<f32>,
    loads: usize,
}

/// Rows waiting for one `Scratch::attend_rows` call: consecutive states `r0..r0 + count`
/// that see the same number `n` of the block's tokens.
struct Pending<'q> {
    qs: [&'q [f32]; MAX_TILE],
    count: usize,
    r0: usize,
    n: usize,
}

impl Default for Pending<'_> {
    fn default() -> Self {
        Pending {
            qs: [&[]; MAX_TILE],
            count: 0,
            r0: 0,
            n: 0,
        }
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
    let segments = |u: &Unit| {
        u.members
            .iter()
            .map(|&s| shapes[s].blocks.div_ceil(seg_blocks))
            .max()
            .unwrap_or(0)
    };
    let items: Vec<Item<'_>> = units
        .iter()
        .flat_map(|unit| {
            let segs = segments(unit);
            (0..shape.num_kv_heads)
                .flat_map(move |kv_head| (0..segs).map(move |seg| Item { unit, kv_head, seg }))
        })
        .collect();
    let new_scratch = || Scratch::new(shape.block_size, shape.head_dim);
    let run = |scratch: &mut Scratch, i: usize| ctx.run_item(&items[i], scratch);
    let mut results = share::map(
        items.len(),
        rayon::current_num_threads().saturating_sub(1),
        &new_scratch,
        &run,
    );
    let loads: usize = results.iter().map(|p| p.loads).sum();
    // Items are ordered unit, head, segment: each run of `segs` results is one (unit, head).
    let mut rest = &mut results[..];
    for unit in units {
        let segs = segments(unit);
        for kv_head in 0..shape.num_kv_heads {
            let (parts, tail) = rest.split_at_mut(segs);
            rest = tail;
            ctx.finish(parts, unit, kv_head, out);
        }
    }
    // Every head of a unit visits the same blocks, so per-head loads divide evenly.
    let kv_blocks_read = loads / shape.num_kv_heads;
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
    /// Index of each member's first row in an item's states, plus the total.
    fn first_rows(&self, unit: &Unit) -> Vec<usize> {
        let mut first = Vec::with_capacity(unit.members.len() + 1);
        first.push(0);
        for &s in &unit.members {
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
        let (unit, hd) = (item.unit, self.shape.head_dim);
        let first_row = self.first_rows(unit);
        let rows = first_row[unit.members.len()];
        let mut p = Partial {
            m: vec![0.0; rows],
            l: vec![0.0; rows],
            acc: vec![0.0; rows * hd],
            loads: 0,
        };
        let mut tile = Pending::default();
        let (lo, hi) = (item.seg * self.seg_blocks, (item.seg + 1) * self.seg_blocks);
        // Block `b` of member `k` in visiting order: the shared blocks, then each member's own.
        let own = |k: usize| lo.max(unit.shared)..hi.min(self.shapes[unit.members[k]].blocks);
        // The first own block after block `after` of member `k` (`None`: from its first).
        let next_own = |k: usize, after: Option<usize>| {
            (k..unit.members.len()).find_map(|k2| {
                let b2 = own(k2).find(|&b2| k2 > k || after.is_none_or(|a| b2 > a))?;
                Some(self.seqs[unit.members[k2]].block_table[b2])
            })
        };
        if let Some(&lead) = unit.members.first() {
            for b in lo..hi.min(unit.shared) {
                let blk = self.view(self.seqs[lead].block_table[b], item.kv_head);
                let next = if b + 1 < hi.min(unit.shared) {
                    Some(self.seqs[lead].block_table[b + 1])
                } else {
                    next_own(0, None)
                };
                self.prefetch(next, item.kv_head);
                p.loads += 1;
                // The members' rows are consecutive states, so tiles run across members.
                for (k, &s) in unit.members.iter().enumerate() {
                    self.gather(
                        item,
                        s,
                        first_row[k],
                        (b, lo, blk),
                        &mut tile,
                        &mut p,
                        scratch,
                    );
                }
                self.flush(&mut tile, (b, lo, blk), &mut p, scratch);
            }
        }
        for (k, &s) in unit.members.iter().enumerate() {
            for b in own(k) {
                let blk = self.view(self.seqs[s].block_table[b], item.kv_head);
                self.prefetch(next_own(k, Some(b)), item.kv_head);
                p.loads += 1;
                self.gather(
                    item,
                    s,
                    first_row[k],
                    (b, lo, blk),
                    &mut tile,
                    &mut p,
                    scratch,
                );
                self.flush(&mut tile, (b, lo, blk), &mut p, scratch);
            }
        }
        p
    }

    /// Asks the caches for one key/value head's slice of `block` (a hint; x86-64 only).
    fn prefetch(&self, block: Option<u32>, kv_head: usize) {
        #[cfg(target_arch = "x86_64")]
        if let Some(block) = block {
            let (bs, hd) = (self.shape.block_size, self.shape.head_dim);
            super::x86::prefetch(self.view(block, kv_head), bs, hd);
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (block, kv_head);
    }

    /// Adds every row of member `s` that sees any token of block `b` (already loaded as
    /// `blk`; its segment starts at block `lo`) to `tile`, flushing it into `p` whenever the
    /// next row cannot join (tile full, another visible count, or not the next state); the
    /// member's states start at `row0`.
    #[allow(clippy::too_many_arguments)]
    fn gather<'q>(
        &'q self,
        item: &Item<'_>,
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
            let q_row = &seq.q[i * shape.row_len + item.kv_head * g * hd..][..g * hd];
            for (j, q) in q_row.chunks_exact(hd).enumerate() {
                let r = row0 + i * g + j;
                if !tile.takes(r, n) {
                    self.flush(tile, (b, lo, blk), p, scratch);
                }
                tile.push(r, n, q);
            }
        }
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

    /// Merges each row's segment states in order into `parts[0]`, normalises, and writes the
    /// rows' `group` heads of `kv_head` (contiguous in `out`'s `[row, head, dim]`).
    fn finish(&self, parts: &mut [Partial], unit: &Unit, kv_head: usize, out: &mut [f32]) {
        let (shape, hd) = (self.shape, self.shape.head_dim);
        let Some((first, later)) = parts.split_first_mut() else {
            return;
        };
        let seg_tokens = self.seg_blocks * shape.block_size;
        let mut r = 0;
        for &s in &unit.members {
            let sh = &self.shapes[s];
            for i in 0..sh.len {
                let row_out =
                    &mut out[(sh.row_offset + i) * shape.row_len + kv_head * shape.group * hd..];
                for o in row_out[..shape.group * hd].chunks_exact_mut(hd) {
                    let acc = &mut first.acc[r * hd..][..hd];
                    for part in &later[..sh.pos(i) / seg_tokens] {
                        let state = RowState {
                            m: &mut first.m[r],
                            l: &mut first.l[r],
                            acc: &mut *acc,
                        };
                        merge(state, part.m[r], part.l[r], &part.acc[r * hd..][..hd]);
                    }
                    let l = first.l[r];
                    for (o, &a) in o.iter_mut().zip(acc.iter()) {
                        *o = a / l;
                    }
                    r += 1;
                }
            }
        }
    }
}
