//! The executor of a plan: one attention call's work, in four parts.
//!
//! - [`items`] (planning): each shared prefix's rows are cut into (key/value heads, members,
//!   segment) items and listed in the order the threads claim them.
//! - [`dispatch`]: an item sweeps each of its blocks with its query rows while the block sits in
//!   L1 — rows batched into the block kernel, or the wide kernel for rows that see a block in
//!   full — and produces each row's segment state.
//! - [`prefetch`]: the next block is asked for in slices while the current one is swept.
//! - [`merge`]: each row's segment states are merged in order, normalised and written to `out`.
//!
//! The items run on the calling thread and rayon helpers (`work_sharing`); the merge runs the
//! batch's rows in two halves, one on a helper, when there are a few.
//!
//! Segments: a row's blocks are cut into fixed segments by position (segment `j` is blocks
//! `j*S..(j+1)*S`, `S = max(1, 128 / block_size)`): flash-decoding's split-K, so a long shared
//! prefix spreads over cores instead of sitting on `num_kv_heads` of them.
//!
//! Invariants: within a segment a row folds its visible blocks in ascending order; segment
//! states are merged in ascending order. Segments are fixed by the row's position and the block
//! size alone, so with `block`'s contract the row's bits do not depend on the shared prefix,
//! batch, item cut, chunking or thread count. Each block of a shared prefix is loaded by exactly
//! one segment item per head, so the load count is the same for any thread count.

mod dispatch;
mod items;
mod merge;
mod prefetch;

use std::ops::Range;

use super::block::Scratch;
use super::plan::SharedPrefix;
use super::shape::{SeqShape, Shape};
use super::{AttentionStats, PagedKv, SeqQueries};
use crate::work_sharing;
use dispatch::ItemInputs;
use items::{AttentionItem, ItemLayout};

/// Tokens per segment (rounded down to whole blocks, at least one block).
const SEGMENT_TOKENS: usize = 128;

/// Batch rows from which the merge is split in two halves, one on a helper (below it the merge
/// is too short to pay for the hand-off; above it, it is serial work the helper would wait out).
const FINISH_SPLIT_ROWS: usize = 4;

/// Runs the plan, writes every row of `out`, and counts block loads.
pub(crate) fn execute(
    kv: &PagedKv<'_>,
    seqs: &[SeqQueries<'_>],
    shape: &Shape,
    shapes: &[SeqShape],
    prefixes: &[SharedPrefix],
    out: &mut [f32],
) -> AttentionStats {
    let seg_blocks = (SEGMENT_TOKENS / shape.block_size).max(1);
    let ctx = ItemInputs {
        kv,
        seqs,
        shape,
        shapes,
        seg_blocks,
    };
    let nkv = shape.num_kv_heads;
    let mut items: Vec<AttentionItem<'_>> = Vec::new();
    let mut layouts = Vec::with_capacity(prefixes.len());
    for prefix in prefixes {
        let members = prefix.members.len();
        let segs = prefix
            .members
            .iter()
            .map(|&s| shapes[s].blocks.div_ceil(seg_blocks))
            .max()
            .unwrap_or(0);
        let streamed_from = if members >= nkv && nkv > 1 {
            prefix.shared.div_ceil(seg_blocks)
        } else {
            segs
        };
        let layout = ItemLayout {
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
                items.push(AttentionItem {
                    prefix,
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
    let results = work_sharing::map_tasks_with(
        items.len(),
        rayon::current_num_threads().saturating_sub(1),
        &new_scratch,
        &run,
    );
    let loads: usize = results.iter().map(|p| p.loads).sum();
    let finish = |rows: Range<usize>, out: &mut [f32]| {
        for (prefix, layout) in prefixes.iter().zip(&layouts) {
            ctx.finish(&results, prefix, layout, rows.clone(), out);
        }
    };
    let rows = out.len() / shape.row_len.max(1);
    if rows < FINISH_SPLIT_ROWS {
        finish(0..rows, out);
    } else {
        // Rows are merged independently: which thread merges a row changes no bit.
        let half = rows.div_ceil(2);
        let (first, second) = out.split_at_mut(half * shape.row_len);
        work_sharing::run_pair([(0..half, first), (half..rows, second)], &|(rows, out)| {
            finish(rows.clone(), out);
        });
    }
    // Every head of a prefix visits the same blocks, so per-head loads divide evenly.
    let kv_blocks_read = loads / nkv;
    let unshared: usize = prefixes
        .iter()
        .flat_map(|u| &u.members)
        .map(|&s| shapes[s].blocks)
        .sum();
    AttentionStats {
        kv_blocks_read,
        shared_block_reads_saved: unshared.saturating_sub(kv_blocks_read),
    }
}
