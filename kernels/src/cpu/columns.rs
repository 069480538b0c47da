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
//! in. The unsafe code is the raw-pointer write itself and the `Send`/`Sync` impls.
#![allow(unsafe_code)]

use std::marker::PhantomData;
use std::ops::Range;
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
        if outs.len() != widths.len() {
            return None;
        }
        let mut bounds = vec![0];
        let mut parts = Vec::with_capacity(outs.len());
        for (i, (out, &width)) in outs.iter_mut().zip(widths).enumerate() {
            let last = i + 1 == widths.len();
            if out.len() != m.checked_mul(width)? || (!last && width % TILE != 0) {
                return None;
            }
            bounds.push(bounds.last()? + width);
            parts.push(Part {
                ptr: out.as_mut_ptr(),
                len: out.len(),
                width,
            });
        }
        Some(Self {
            parts,
            bounds,
            m,
            claims: Mutex::new(Vec::new()),
            _outs: PhantomData,
        })
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
        Some(Claim { cols, out: self })
    }
}

/// Columns one thread alone may write (see [`Columns::claim`]).
pub(crate) struct Claim<'c, 'o> {
    cols: Range<usize>,
    out: &'c Columns<'o>,
}

impl Claim<'_, '_> {
    /// Writes one tile: `lanes` holds the `m` rows of `TILE` floats a tile kernel produced
    /// (row `r` at `lanes[r * TILE..]`); the first `width` of each row go to columns
    /// `col..col + width` of the product.
    ///
    /// Panics when the columns are not all claimed, run past the output that holds `col`, or
    /// `lanes` is short (a bug in the caller, never a property of the data).
    #[inline]
    pub(crate) fn put_tile(&self, col: usize, width: usize, lanes: &[f32]) {
        let out = self.out;
        assert!(self.cols.start <= col && col + width <= self.cols.end);
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
