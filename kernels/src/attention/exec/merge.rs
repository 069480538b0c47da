//! Merging an attention call's results: each row's segment states, in segment order, by the
//! exact log-sum-exp rescale (`block::merge`), normalised and written to the output. Segment
//! states are merged in ascending order, so a row's bits do not depend on the item cut.

use std::ops::Range;

use super::super::block::{merge, RowState};
use super::super::plan::SharedPrefix;
use super::dispatch::{ItemInputs, Partial};
use super::items::ItemLayout;

impl ItemInputs<'_> {
    /// Merges the segment states (the items of `layout` in `parts`) of each of `prefix`'s rows
    /// that falls in the batch rows `rows`, in order, normalises, and writes the rows into
    /// `out` (`[row, head, dim]`, holding exactly the batch rows `rows`).
    pub(super) fn finish(
        &self,
        parts: &[Partial],
        prefix: &SharedPrefix,
        layout: &ItemLayout,
        rows: Range<usize>,
        out: &mut [f32],
    ) {
        let (shape, hd, g) = (self.shape, self.shape.head_dim, self.shape.group);
        let seg_tokens = self.seg_blocks * shape.block_size;
        let mut acc = vec![0f32; hd];
        for (k, &s) in prefix.members.iter().enumerate() {
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
