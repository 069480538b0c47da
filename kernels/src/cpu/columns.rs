//! Writes from several threads into disjoint columns of the same row-major outputs: a
//! matmul's tasks each own a range of output columns for every row, which no safe split of
//! the outputs' slices expresses (each row interleaves the tasks' columns). [`Columns`] holds
//! the outputs' `&mut` borrows as raw parts for the length of one matmul, and writes one tile's
//! rows at a time, in place, by whichever thread computed them: no per-thread buffer, no copy
//! after the parallel part.
//!
//! Owns only that, and proves it safe without trusting its caller: a thread first claims a
//! range of columns ([`Columns::claim`], refused when it overlaps an earlier claim), and
//! writes only inside its [`Claim`]; every write is bounds-checked against the output it lands
//! in. A claim writes its tiles in column order, so when it ends at its last column it has
//! written every row of every column it holds; [`Columns::all_written`] says whether finished
//! claims cover every column, which is what lets a matmul fill outputs that start
//! uninitialised ([`Columns::new_uninit`]). The unsafe code is the raw-pointer write itself
//! and the `Send`/`Sync` impls.
#![allow(unsafe_code)]

use std::cell::Cell;
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use super::layout::TILE;

/// One output: row-major `m x width`, starting at `ptr`.
struct Part {
    ptr: *mut f32,
    len: usize,
    width: usize,
}

/// The outputs of one matmul, writable a tile at a time from any thread (see the module doc).
/// Output `i` is row-major `m x widths[i]` and takes columns `bounds[i]..bounds[i + 1]` of the
/// product; every bound is a multiple of `TILE`, so a tile's lanes always land in one output.
pub(crate) struct Columns<'o> {
    parts: Vec<Part>,
    /// First column of each output, then the total.
    bounds: Vec<usize>,
    m: usize,
    /// Column ranges claimed so far (pairwise disjoint).
    claims: Mutex<Vec<Range<usize>>>,
    /// Columns of the claims that wrote all their tiles.
    written: AtomicUsize,
    _outs: PhantomData<&'o mut [f32]>,
}

// SAFETY: `Columns` is a set of exclusive borrows (held for `'o` through the marker) that it
// only writes through a `Claim`, and claims never overlap: sending or sharing it between
// threads is then like handing out disjoint `&mut [f32]`s.
unsafe impl Send for Columns<'_> {}
// SAFETY: as for `Send`.
unsafe impl Sync for Columns<'_> {}

impl<'o> Columns<'o> {
    /// `outs` of `m` rows each, output `i` `widths[i]` columns wide. `None` when a length is
    /// not `m` times its width or a width other than the last is not a multiple of `TILE`.
    pub(crate) fn new(outs: &'o mut [&mut [f32]], widths: &[usize], m: usize) -> Option<Self> {
        let parts = outs.iter_mut().map(|o| (o.as_mut_ptr(), o.len()));
        Self::from_parts(parts, widths, m)
    }

    /// [`Self::new`] over outputs that may hold no values yet: once [`Self::all_written`]
    /// says so, every element has been written.
    pub(crate) fn new_uninit(
        outs: &'o mut [&mut [MaybeUninit<f32>]],
        widths: &[usize],
        m: usize,
    ) -> Option<Self> {
        let parts = outs
            .iter_mut()
            .map(|o| (o.as_mut_ptr().cast::<f32>(), o.len()));
        Self::from_parts(parts, widths, m)
    }

    /// The outputs as raw parts (pointer, length), each borrowed for `'o` by the caller.
    fn from_parts(
        outs: impl ExactSizeIterator<Item = (*mut f32, usize)>,
        widths: &[usize],
        m: usize,
    ) -> Option<Self> {
        if outs.len() != widths.len() {
            return None;
        }
        let mut bounds = vec![0];
        let mut parts = Vec::with_capacity(outs.len());
        for (i, ((ptr, len), &width)) in outs.zip(widths).enumerate() {
            let last = i + 1 == widths.len();
            if len != m.checked_mul(width)? || (!last && width % TILE != 0) {
                return None;
            }
            bounds.push(bounds.last()? + width);
            parts.push(Part { ptr, len, width });
        }
        Some(Self {
            parts,
            bounds,
            m,
            claims: Mutex::new(Vec::new()),
            written: AtomicUsize::new(0),
            _outs: PhantomData,
        })
    }

    /// Whether the claims that wrote all their tiles cover every column (claims never
    /// overlap, so their widths add up to the total only then): every element of every
    /// output has been written.
    pub(crate) fn all_written(&self) -> bool {
        self.written.load(Ordering::Acquire) == self.bounds.last().copied().unwrap_or(0)
    }

    /// The exclusive right to write columns `cols`; `None` when they overlap a claim made
    /// before (or run past the last column).
    pub(crate) fn claim(&self, cols: Range<usize>) -> Option<Claim<'_, 'o>> {
        if cols.end > self.bounds.last().copied().unwrap_or(0) || cols.start > cols.end {
            return None;
        }
        let mut claims = self.claims.lock().unwrap_or_else(|p| p.into_inner());
        if claims
            .iter()
            .any(|c| c.start < cols.end && cols.start < c.end)
        {
            return None;
        }
        claims.push(cols.clone());
        Some(Claim {
            next: Cell::new(cols.start),
            cols,
            out: self,
        })
    }
}

/// Columns one thread alone may write (see [`Columns::claim`]), tile after tile in order.
pub(crate) struct Claim<'c, 'o> {
    cols: Range<usize>,
    /// The first column not written yet.
    next: Cell<usize>,
    out: &'c Columns<'o>,
}

impl Drop for Claim<'_, '_> {
    fn drop(&mut self) {
        if self.next.get() == self.cols.end {
            self.out
                .written
                .fetch_add(self.cols.len(), Ordering::Release);
        }
    }
}

impl Claim<'_, '_> {
    /// Writes one tile: `lanes` holds the `m` rows of `TILE` floats a tile kernel produced
    /// (row `r` at `lanes[r * TILE..]`); the first `width` of each row go to columns
    /// `col..col + width` of the product, which must be the claim's first columns not
    /// written yet.
    ///
    /// Panics when `col` is not the next column to write, the columns run past the claim or
    /// the output that holds `col`, or `lanes` is short (a bug in the caller, never a
    /// property of the data).
    #[inline]
    pub(crate) fn put_tile(&self, col: usize, width: usize, lanes: &[f32]) {
        let out = self.out;
        assert!(col == self.next.get() && col + width <= self.cols.end);
        // The output whose columns start at or before `col` (few outputs: a linear scan).
        let i = out.bounds[1..]
            .iter()
            .take_while(|&&end| end <= col)
            .count();
        let part = &out.parts[i];
        let first = col - out.bounds[i];
        assert!(width <= TILE && first + width <= part.width && lanes.len() >= out.m * TILE);
        let dst = |r: usize| r * part.width + first;
        // `r < m`, `first + width <= width_i` and `len == m * width_i`: every row in bounds.
        debug_assert!(out.m == 0 || dst(out.m - 1) + width <= part.len);
        if width == TILE {
            for (r, row) in lanes.chunks_exact(TILE).take(out.m).enumerate() {
                // SAFETY: `dst(r)..dst(r) + TILE` lies inside output `i` (above), which is
                // borrowed for `'o`, and in this claim's columns, which no other claim
                // overlaps. A constant-size copy: one 64-byte move, no `memcpy` call.
                unsafe { std::ptr::copy_nonoverlapping(row.as_ptr(), part.ptr.add(dst(r)), TILE) };
            }
        } else {
            for (r, row) in lanes.chunks_exact(TILE).take(out.m).enumerate() {
                // SAFETY: as above, for `width < TILE` floats.
                unsafe { std::ptr::copy_nonoverlapping(row.as_ptr(), part.ptr.add(dst(r)), width) };
            }
        }
        // Every one of the `m` rows got its `width` floats (the loops above take `m` rows of
        // `lanes`, which holds at least `m * TILE`).
        self.next.set(col + width);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_land_in_their_columns_of_the_right_output() {
        let m = 3;
        let (mut a, mut b) = (vec![f32::NAN; m * 32], vec![f32::NAN; m * 20]);
        let mut outs = [&mut a[..], &mut b[..]];
        let cols = Columns::new(&mut outs, &[32, 20], m).expect("valid outputs");
        let (low, high) = (
            cols.claim(0..32).expect("free"),
            cols.claim(32..52).expect("free"),
        );
        for (col, width) in [(0, 16), (16, 16), (32, 16), (48, 4)] {
            let lanes: Vec<f32> = (0..m * TILE)
                .map(|i| (col + (i / TILE) * 1000 + i % TILE) as f32)
                .collect();
            if col < 32 { &low } else { &high }.put_tile(col, width, &lanes);
        }
        drop((low, high));
        for r in 0..m {
            for c in 0..32 {
                assert_eq!(a[r * 32 + c], (r * 1000 + c) as f32);
            }
            for c in 0..20 {
                assert_eq!(b[r * 20 + c], (r * 1000 + 32 + c) as f32);
            }
        }
    }

    #[test]
    fn mismatched_outputs_are_refused() {
        let (mut a, mut b) = (vec![0f32; 2 * 24], vec![0f32; 2 * 16]);
        assert!(Columns::new(&mut [&mut a[..], &mut b[..]], &[24, 16], 2).is_none());
        assert!(Columns::new(&mut [&mut a[..]], &[16], 2).is_none());
        assert!(Columns::new(&mut [&mut a[..]], &[24, 16], 2).is_none());
        assert!(Columns::new(&mut [&mut a[..]], &[24], 2).is_some());
    }

    #[test]
    fn overlapping_claims_are_refused() {
        let mut a = vec![0f32; 2 * 64];
        let mut outs = [&mut a[..]];
        let cols = Columns::new(&mut outs, &[64], 2).expect("valid outputs");
        let _first = cols.claim(16..48).expect("free");
        assert!(cols.claim(32..64).is_none());
        assert!(cols.claim(0..17).is_none());
        assert!(cols.claim(48..80).is_none(), "past the last column");
        assert!(cols.claim(0..16).is_some() && cols.claim(48..64).is_some());
    }

    #[test]
    fn all_written_only_when_finished_claims_cover_every_column() {
        let m = 2;
        let mut a = vec![MaybeUninit::<f32>::uninit(); m * 40];
        let mut outs = [&mut a[..]];
        let cols = Columns::new_uninit(&mut outs, &[40], m).expect("valid outputs");
        let lanes = [1.0; 2 * TILE];
        {
            let first = cols.claim(0..32).expect("free");
            first.put_tile(0, 16, &lanes);
        } // dropped after one of its two tiles
        assert!(!cols.all_written());
        let last = cols.claim(32..40).expect("free");
        last.put_tile(32, 8, &lanes);
        drop(last);
        assert!(!cols.all_written(), "columns 16..32 were never written");

        let mut b = vec![MaybeUninit::<f32>::uninit(); m * 40];
        let mut outs = [&mut b[..]];
        let cols = Columns::new_uninit(&mut outs, &[40], m).expect("valid outputs");
        for (range, tiles) in [(0..32, &[(0, 16), (16, 16)][..]), (32..40, &[(32, 8)][..])] {
            let claim = cols.claim(range).expect("free");
            for &(col, width) in tiles {
                claim.put_tile(col, width, &lanes);
            }
        }
        assert!(cols.all_written());
        drop(cols);
        // SAFETY: `all_written` proved every element written.
        assert!(b.iter().all(|x| unsafe { x.assume_init() } == 1.0));
    }

    #[test]
    #[should_panic]
    fn tiles_out_of_order_panic() {
        let mut a = vec![0f32; 2 * 32];
        let mut outs = [&mut a[..]];
        let cols = Columns::new(&mut outs, &[32], 2).expect("valid outputs");
        cols.claim(0..32)
            .expect("free")
            .put_tile(16, 16, &[0.0; 2 * TILE]);
    }

    #[test]
    #[should_panic]
    fn a_tile_outside_its_claim_panics() {
        let mut a = vec![0f32; 2 * 32];
        let mut outs = [&mut a[..]];
        let cols = Columns::new(&mut outs, &[32], 2).expect("valid outputs");
        cols.claim(0..16)
            .expect("free")
            .put_tile(16, 16, &[0.0; 2 * TILE]);
    }
}
