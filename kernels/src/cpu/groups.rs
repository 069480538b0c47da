//! Quantized activation rows in the layout the AMX tile loads want ([`RowGroups`]), and how
//! to fill it straight from the f32 rows.
//!
//! Owns the layout and the fill only: the blocks' values come from the quantizer it is handed
//! (`quant.rs`), so a row's quants and scalars are bitwise what `quant.rs` puts in its plain
//! blocks; the AMX kernels (`amx.rs`) read the layout. Rows past the last real one stay zero
//! (quants and scalars), so their products are zero.
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]

use super::quant::{ActBlock, QK};

/// Activation rows per tile product.
pub(crate) const GROUP: usize = 16;

/// Block `b` of the 16 rows of one group: the rows' quants as one contiguous 512-byte panel
/// (row `r` at bytes `32r..32r + 32`), then their scalars (`d`, `s`, `128 * sum(q)`) as
/// 16-lane arrays, all in one 64-byte-aligned entry the kernel reads together.
#[derive(Debug, Clone, Copy)]
#[repr(C, align(64))]
pub(crate) struct Entry {
    pub(crate) qs: [i8; GROUP * QK],
    pub(crate) d: [f32; GROUP],
    pub(crate) s: [f32; GROUP],
    pub(crate) bias: [i32; GROUP],
}

impl Entry {
    const ZERO: Entry = Entry {
        qs: [0; GROUP * QK],
        d: [0.0; GROUP],
        s: [0.0; GROUP],
        bias: [0; GROUP],
    };
}

/// The first `rows` rows of a matmul call's activations, `nb` blocks each, in groups of
/// [`GROUP`] rows: group `g`, block `b` is entry `g * nb + b`.
#[derive(Debug, Clone)]
pub(crate) struct RowGroups {
    nb: usize,
    rows: usize,
    entries: Vec<Entry>,
}

impl RowGroups {
    /// `rows` rows of `nb` blocks, all zero.
    pub(crate) fn zeroed(rows: usize, nb: usize) -> Self {
        Self {
            nb,
            rows,
            entries: vec![Entry::ZERO; rows.div_ceil(GROUP) * nb],
        }
    }

    /// Blocks per row.
    pub(crate) fn nb(&self) -> usize {
        self.nb
    }

    /// Rows held (the last group may be padded past them).
    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    /// Group `g`'s block `b`.
    #[inline]
    pub(crate) fn entry(&self, g: usize, b: usize) -> &Entry {
        &self.entries[g * self.nb + b]
    }

    /// Every entry, in order, for [`Fill::run`] to fill in parts.
    pub(crate) fn entries_mut(&mut self) -> &mut [Entry] {
        &mut self.entries
    }
}

/// What filling a [`RowGroups`] reads: the rows' floats and how to quantize blocks.
pub(crate) struct Fill<'a, Q> {
    /// The groups' rows, row-major, `nb * QK` floats each.
    pub(crate) x: &'a [f32],
    pub(crate) rows: usize,
    pub(crate) nb: usize,
    /// Quantizes `xs[i]` into `out[i]` for every `i`.
    pub(crate) quantize: Q,
}

impl<Q: Fn(&[[f32; QK]], &mut [ActBlock])> Fill<'_, Q> {
    /// Fills `entries`, which are the layout's entries from index `first` on: each entry's
    /// real rows are gathered, quantized together and scattered into the entry.
    pub(crate) fn run(&self, first: usize, entries: &mut [Entry]) {
        let k = self.nb * QK;
        let mut xs = [[0f32; QK]; GROUP];
        let zero = ActBlock {
            qs: [0; QK],
            d: 0.0,
            s: 0.0,
            qsum: 0,
        };
        let mut blocks = [zero; GROUP];
        for (at, entry) in (first..).zip(entries) {
            let (g, b) = (at / self.nb, at % self.nb);
            let real = GROUP.min(self.rows.saturating_sub(g * GROUP));
            for (rr, xs) in xs.iter_mut().enumerate().take(real) {
                let from = (g * GROUP + rr) * k + b * QK;
                xs.copy_from_slice(&self.x[from..from + QK]);
            }
            (self.quantize)(&xs[..real], &mut blocks[..real]);
            for (rr, blk) in blocks.iter().enumerate().take(real) {
                entry.qs[rr * QK..(rr + 1) * QK].copy_from_slice(&blk.qs);
                entry.d[rr] = blk.d;
                entry.s[rr] = blk.s;
                entry.bias[rr] = blk.qsum << 7;
            }
        }
    }
}
