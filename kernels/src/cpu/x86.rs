//! x86-64 SIMD tile kernels (AVX2 and AVX-512 VNNI) over the column-tiled layout of
//! `layout.rs`: one f32 lane per output column, so a tile's 16 columns need no horizontal sums.
//!
//! Per tile block, the quants of part `g` (4 consecutive k-values of all 16 columns) sit in one
//! 64-byte row; the matching 4 activation bytes are broadcast to every lane and one `vpdpbusd`
//! (u8 x i8, groups of 4, into i32) accumulates them for all 16 columns, as in candle's
//! `repack_x86.rs` and llama.cpp's repacked kernels. AVX2 does the same per 8-column half with
//! `vpmaddubsw` into i16 (bounded: 16 products of |15 x 128| <= 30720 per lane, no saturation)
//! and one `vpmaddwd` by ones per block. Q8_0 weights are stored as `q + 128` (u8), so the
//! kernels subtract `128 * sum(activation quants)`; AVX2 splits those bytes into nibbles
//! (`u = 16 * hi + lo`) to stay inside `vpmaddubsw`'s i16 range. The file also holds the AVX2
//! activation quantizer (`block_amax`, `block_quants`), bitwise equal to the scalar one.
//!
//! Invariants: integer sums are exact, and the f32 tail of every lane is `scalar.rs`'s exact
//! operation sequence (convert, multiply, multiply, multiply, add, add; never FMA), so each
//! kernel is bitwise equal to the scalar reference for every row, column, row blocking and m.
//! `vpdpbusd` accumulates in i32 without saturation; all bounds are noted where they matter.
//! Unsafe code is confined to unaligned loads/stores whose bounds are given by the fixed-size
//! chunks they read, and to calling `#[target_feature]` functions behind a detection token.
#![allow(unsafe_code)]

use core::arch::x86_64::*;
use std::ops::Range;

use super::layout::{Q4_1_M, Q4_1_QS, Q8_0_QS, TB_Q4_1, TB_Q8_0, TILE};
use super::quant::{QuantizedRows, QK};
use super::QuantFormat;

/// Proof that the CPU supports AVX2 and F16C (only [`Avx2::detect`] makes one).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Avx2(());

impl Avx2 {
    /// `Some` when AVX2 and F16C are available at run time.
    pub(crate) fn detect() -> Option<Self> {
        (is_x86_feature_detected!("avx2") && is_x86_feature_detected!("f16c")).then_some(Self(()))
    }
}

/// Proof that the CPU supports AVX-512 F/BW and AVX-512 VNNI (and AVX2 and F16C).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Avx512Vnni(Avx2);

impl Avx512Vnni {
    /// `Some` when AVX-512 F, BW, VNNI, AVX2 and F16C are available at run time.
    pub(crate) fn detect() -> Option<Self> {
        let avx2 = Avx2::detect()?;
        (is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512vnni"))
        .then_some(Self(avx2))
    }

    /// The AVX2 token this one implies.
    pub(crate) fn avx2(self) -> Avx2 {
        self.0
    }
}

/// `max(|x|)` over one block, NaNs ignored: exactly the scalar fold
/// `amax = amax.max(x.abs())` from 0 (`f32::max` returns the non-NaN operand; every lane
/// value is >= +0, so the maximum does not depend on the order).
pub(crate) fn block_amax(_: Avx2, xs: &[f32; QK]) -> f32 {
    // SAFETY: the token proves AVX2 is available.
    unsafe { block_amax_avx2(xs) }
}

/// `qs[j] = f32::round(xs[j] * id) as i8` for one block, returning `sum(qs)`; bitwise the
/// scalar code, including Rust's saturating cast (NaN to 0, beyond the range to -128 / 127).
pub(crate) fn block_quants(_: Avx2, xs: &[f32; QK], id: f32, qs: &mut [i8; QK]) -> i32 {
    // SAFETY: the token proves AVX2 is available.
    unsafe { block_quants_avx2(xs, id, qs) }
}

#[target_feature(enable = "avx2")]
fn block_amax_avx2(xs: &[f32; QK]) -> f32 {
    let sign = _mm256_set1_ps(-0.0);
    let mut acc = _mm256_setzero_ps();
    for c in 0..4 {
        // SAFETY: `xs` is 32 f32s; this reads [8c, 8c + 8) with c < 4.
        let v = unsafe { _mm256_loadu_ps(xs.as_ptr().add(8 * c)) };
        // `max_ps` returns its second operand when either is NaN, so a NaN leaves `acc` as is.
        acc = _mm256_max_ps(_mm256_andnot_ps(sign, v), acc);
    }
    let m = _mm_max_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps::<1>(acc));
    let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)))
}

#[target_feature(enable = "avx2")]
fn block_quants_avx2(xs: &[f32; QK], id: f32, qs: &mut [i8; QK]) -> i32 {
    let (idv, sign, half, one) = (
        _mm256_set1_ps(id),
        _mm256_set1_ps(-0.0),
        _mm256_set1_ps(0.5),
        _mm256_set1_ps(1.0),
    );
    let (lo, hi) = (_mm256_set1_ps(-128.0), _mm256_set1_ps(127.0));
    let q = [0, 1, 2, 3].map(|c| {
        // SAFETY: `xs` is 32 f32s; this reads [8c, 8c + 8) with c < 4.
        let v = _mm256_mul_ps(unsafe { _mm256_loadu_ps(xs.as_ptr().add(8 * c)) }, idv);
        // Round half away from zero (`f32::round`): truncate, then step away from zero when the
        // (exact) fraction is at least one half. NaN and infinities fall through unchanged.
        let t = _mm256_round_ps::<{ _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC }>(v);
        let frac = _mm256_andnot_ps(sign, _mm256_sub_ps(v, t));
        let away = _mm256_or_ps(one, _mm256_and_ps(v, sign));
        let r = _mm256_add_ps(
            t,
            _mm256_and_ps(_mm256_cmp_ps::<_CMP_GE_OQ>(frac, half), away),
        );
        // `as i8`: NaN becomes 0, everything else saturates to [-128, 127].
        let r = _mm256_and_ps(r, _mm256_cmp_ps::<_CMP_ORD_Q>(r, r));
        _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(r, lo), hi))
    });
    let sum = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
    let sum = _mm_add_epi32(
        _mm256_castsi256_si128(sum),
        _mm256_extracti128_si256::<1>(sum),
    );
    let sum = _mm_add_epi32(sum, _mm_shuffle_epi32::<0b01_00_11_10>(sum));
    let sum = _mm_add_epi32(sum, _mm_shuffle_epi32::<0b10_11_00_01>(sum));
    // Saturating packs keep in-range values; the permute undoes their per-lane interleave.
    let bytes = _mm256_packs_epi16(
        _mm256_packs_epi32(q[0], q[1]),
        _mm256_packs_epi32(q[2], q[3]),
    );
    let bytes = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    // SAFETY: `qs` is 32 bytes: exactly one unaligned 256-bit store.
    unsafe { _mm256_storeu_si256(qs.as_mut_ptr().cast(), bytes) };
    _mm_cvtsi128_si32(sum)
}

/// Rows handled together by the AVX-512 kernels: each tile block is loaded and unpacked once
/// per `ROW_BLOCK` activation rows. Row blocking never changes a lane's arithmetic.
const ROW_BLOCK: usize = 4;

/// The 4 activation quants at `a[4g..4g + 4]` as one little-endian i32, to broadcast.
#[inline(always)]
fn word(a: &[i8; QK], g: usize) -> i32 {
    i32::from_le_bytes([
        a[4 * g] as u8,
        a[4 * g + 1] as u8,
        a[4 * g + 2] as u8,
        a[4 * g + 3] as u8,
    ])
}

/// Asks the caches for every 64-byte line of `bytes`; a hint only, it reads nothing.
pub(crate) fn prefetch(bytes: &[u8]) {
    for line in bytes.chunks(64) {
        // SAFETY: the address is inside `bytes`; a prefetch does not access memory.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(line.as_ptr().cast()) };
    }
}

/// [`prefetch`] for block `b` (of `size` bytes) of the tile `ahead`, if it has one.
#[inline(always)]
pub(crate) fn prefetch_block(ahead: &[u8], b: usize, size: usize) {
    if let Some(next) = ahead.get(b * size..) {
        prefetch(&next[..size.min(next.len())]);
    }
}

/// One tile of `format` against activation rows `rows` only (AVX-512 VNNI; output as in
/// `scalar::q4_1_tile`, rows outside `rows` left as they are). The first pass over the tile's
/// blocks also asks for the next tile, block by block.
pub(crate) fn rows_avx512(
    _: Avx512Vnni,
    format: QuantFormat,
    tile: &[u8],
    next: &[u8],
    act: &QuantizedRows,
    rows: Range<usize>,
    out: &mut [f32],
) {
    let mut ahead = next;
    let mut r0 = rows.start;
    while r0 < rows.end {
        let ahead = std::mem::take(&mut ahead);
        let block = rows.end - r0 >= ROW_BLOCK;
        // SAFETY: the token proves AVX-512 F/BW/VNNI are available.
        unsafe {
            match (format, block) {
                (QuantFormat::Q4_1, true) => q4_1_rows_512::<ROW_BLOCK>(tile, ahead, act, r0, out),
                (QuantFormat::Q8_0, true) => q8_0_rows_512::<ROW_BLOCK>(tile, ahead, act, r0, out),
                (QuantFormat::Q4_1, false) => q4_1_rows_512::<1>(tile, ahead, act, r0, out),
                (QuantFormat::Q8_0, false) => q8_0_rows_512::<1>(tile, ahead, act, r0, out),
            }
        }
        r0 += if block { ROW_BLOCK } else { 1 };
    }
}

/// Q4_1 tile against all `m` rows (AVX2, one 8-column half at a time).
pub(crate) fn q4_1_tile_avx2(_: Avx2, tile: &[u8], act: &QuantizedRows, m: usize, out: &mut [f32]) {
    for r in 0..m {
        for half in 0..2 {
            // SAFETY: the token proves AVX2 and F16C are available.
            unsafe { q4_1_row_avx2(tile, act, r, half, out) };
        }
    }
}

/// Q8_0 tile against all `m` rows (AVX2).
pub(crate) fn q8_0_tile_avx2(_: Avx2, tile: &[u8], act: &QuantizedRows, m: usize, out: &mut [f32]) {
    for r in 0..m {
        for half in 0..2 {
            // SAFETY: the token proves AVX2 and F16C are available.
            unsafe { q8_0_row_avx2(tile, act, r, half, out) };
        }
    }
}

/// Stores `acc` (16 lanes) at `out[r * TILE..][..TILE]`.
#[target_feature(enable = "avx512f")]
fn store_512(out: &mut [f32], r: usize, acc: __m512) {
    let dst = &mut out[r * TILE..(r + 1) * TILE];
    // SAFETY: `dst` is exactly 16 f32s (the range index checked it): one unaligned 512-bit store.
    unsafe { _mm512_storeu_ps(dst.as_mut_ptr(), acc) };
}

#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
fn q4_1_rows_512<const RB: usize>(
    tile: &[u8],
    ahead: &[u8],
    act: &QuantizedRows,
    r0: usize,
    out: &mut [f32],
) {
    let mask_lo = _mm512_set1_epi8(0x0F);
    let mut acc = [_mm512_setzero_ps(); RB];
    for (b, blk) in tile.chunks_exact(TB_Q4_1).enumerate() {
        prefetch_block(ahead, b, TB_Q4_1);
        let p = blk.as_ptr();
        // SAFETY: `blk` is TB_Q4_1 = 320 bytes: d at [0, 32), m at [32, 64) and the four
        // 64-byte quant rows at [64, 320) are all inside it.
        let (dx, mx, v) = unsafe {
            (
                _mm512_cvtph_ps(_mm256_loadu_si256(p.cast())),
                _mm512_cvtph_ps(_mm256_loadu_si256(p.add(Q4_1_M).cast())),
                [0, 1, 2, 3].map(|g| _mm512_loadu_si512(p.add(Q4_1_QS + 64 * g).cast())),
            )
        };
        // The high nibbles are shifted down here, once per block for all `RB` rows, which
        // keeps the shift off each row's dependency chain (shifting each row's sum after its
        // dot products instead measured ~3.5 % slower: 16 x 3072 x 576, one thread).
        let lo = v.map(|v| _mm512_and_si512(v, mask_lo));
        let hi = v.map(|v| _mm512_and_si512(_mm512_srli_epi16::<4>(v), mask_lo));
        for (rr, acc) in acc.iter_mut().enumerate() {
            let r = r0 + rr;
            let a = act.block(r, b);
            let (mut s0, mut s1) = (_mm512_setzero_si512(), _mm512_setzero_si512());
            for g in 0..4 {
                s0 = _mm512_dpbusd_epi32(s0, lo[g], _mm512_set1_epi32(word(&a.qs, g)));
                s1 = _mm512_dpbusd_epi32(s1, hi[g], _mm512_set1_epi32(word(&a.qs, 4 + g)));
            }
            let sumi = _mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1));
            let scaled = _mm512_mul_ps(_mm512_mul_ps(sumi, dx), _mm512_set1_ps(a.d));
            let t = _mm512_add_ps(scaled, _mm512_mul_ps(mx, _mm512_set1_ps(a.s)));
            *acc = _mm512_add_ps(*acc, t);
        }
    }
    for (rr, &acc) in acc.iter().enumerate() {
        store_512(out, r0 + rr, acc);
    }
}

#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
fn q8_0_rows_512<const RB: usize>(
    tile: &[u8],
    ahead: &[u8],
    act: &QuantizedRows,
    r0: usize,
    out: &mut [f32],
) {
    let mut acc = [_mm512_setzero_ps(); RB];
    for (b, blk) in tile.chunks_exact(TB_Q8_0).enumerate() {
        prefetch_block(ahead, b, TB_Q8_0);
        let p = blk.as_ptr();
        // SAFETY: `blk` is TB_Q8_0 = 544 bytes: d at [0, 32) and the eight 64-byte quant rows
        // at [32, 544) are inside it.
        let (dx, w) = unsafe {
            (
                _mm512_cvtph_ps(_mm256_loadu_si256(p.cast())),
                [0, 1, 2, 3, 4, 5, 6, 7]
                    .map(|g| _mm512_loadu_si512(p.add(Q8_0_QS + 64 * g).cast())),
            )
        };
        for (rr, acc) in acc.iter_mut().enumerate() {
            let r = r0 + rr;
            let a = act.block(r, b);
            let (mut s0, mut s1) = (_mm512_setzero_si512(), _mm512_setzero_si512());
            for g in 0..4 {
                s0 = _mm512_dpbusd_epi32(s0, w[g], _mm512_set1_epi32(word(&a.qs, g)));
                s1 = _mm512_dpbusd_epi32(s1, w[4 + g], _mm512_set1_epi32(word(&a.qs, 4 + g)));
            }
            // sum((q + 128) * a) - 128 * sum(a) = sum(q * a), exactly (|.| < 2^21).
            let exact = _mm512_sub_epi32(_mm512_add_epi32(s0, s1), _mm512_set1_epi32(a.qsum << 7));
            let sumi = _mm512_cvtepi32_ps(exact);
            let t = _mm512_mul_ps(_mm512_mul_ps(sumi, dx), _mm512_set1_ps(a.d));
            *acc = _mm512_add_ps(*acc, t);
        }
    }
    for (rr, &acc) in acc.iter().enumerate() {
        store_512(out, r0 + rr, acc);
    }
}

/// Stores `acc` (8 lanes) at `out[r * TILE + 8 * half..][..8]`.
#[target_feature(enable = "avx2")]
fn store_256(out: &mut [f32], r: usize, half: usize, acc: __m256) {
    let at = r * TILE + 8 * half;
    let dst = &mut out[at..at + 8];
    // SAFETY: `dst` is exactly 8 f32s (the range index checked it): one unaligned 256-bit store.
    unsafe { _mm256_storeu_ps(dst.as_mut_ptr(), acc) };
}

#[target_feature(enable = "avx2,f16c")]
fn q4_1_row_avx2(tile: &[u8], act: &QuantizedRows, r: usize, half: usize, out: &mut [f32]) {
    let mask = _mm256_set1_epi8(0x0F);
    let ones = _mm256_set1_epi16(1);
    let mut acc = _mm256_setzero_ps();
    let half = half & 1;
    for (b, blk) in tile.chunks_exact(TB_Q4_1).enumerate() {
        let p = blk.as_ptr();
        // SAFETY: `blk` is 320 bytes and `half` is 0 or 1: d/m halves at [16h, 16h + 16) and
        // [32 + 16h, 48 + 16h), quant half-rows at [64 + 64g + 32h, +32) for g < 4.
        let (dx, mx, v) = unsafe {
            (
                _mm256_cvtph_ps(_mm_loadu_si128(p.add(16 * half).cast())),
                _mm256_cvtph_ps(_mm_loadu_si128(p.add(Q4_1_M + 16 * half).cast())),
                [0, 1, 2, 3]
                    .map(|g| _mm256_loadu_si256(p.add(Q4_1_QS + 64 * g + 32 * half).cast())),
            )
        };
        let a = act.block(r, b);
        let mut s16 = _mm256_setzero_si256();
        for (g, v) in v.into_iter().enumerate() {
            let lo = _mm256_and_si256(v, mask);
            let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(v), mask);
            s16 = _mm256_add_epi16(
                s16,
                _mm256_maddubs_epi16(lo, _mm256_set1_epi32(word(&a.qs, g))),
            );
            s16 = _mm256_add_epi16(
                s16,
                _mm256_maddubs_epi16(hi, _mm256_set1_epi32(word(&a.qs, 4 + g))),
            );
        }
        let sumi = _mm256_cvtepi32_ps(_mm256_madd_epi16(s16, ones));
        let scaled = _mm256_mul_ps(_mm256_mul_ps(sumi, dx), _mm256_set1_ps(a.d));
        let t = _mm256_add_ps(scaled, _mm256_mul_ps(mx, _mm256_set1_ps(a.s)));
        acc = _mm256_add_ps(acc, t);
    }
    store_256(out, r, half, acc);
}

#[target_feature(enable = "avx2,f16c")]
fn q8_0_row_avx2(tile: &[u8], act: &QuantizedRows, r: usize, half: usize, out: &mut [f32]) {
    let mask = _mm256_set1_epi8(0x0F);
    let ones = _mm256_set1_epi16(1);
    let mut acc = _mm256_setzero_ps();
    let half = half & 1;
    for (b, blk) in tile.chunks_exact(TB_Q8_0).enumerate() {
        let p = blk.as_ptr();
        // SAFETY: `blk` is 544 bytes and `half` is 0 or 1: d half at [16h, 16h + 16), quant
        // half-rows at [32 + 64g + 32h, +32) for g < 8.
        let (dx, v) = unsafe {
            (
                _mm256_cvtph_ps(_mm_loadu_si128(p.add(16 * half).cast())),
                [0, 1, 2, 3, 4, 5, 6, 7]
                    .map(|g| _mm256_loadu_si256(p.add(Q8_0_QS + 64 * g + 32 * half).cast())),
            )
        };
        let a = act.block(r, b);
        let (mut s_lo, mut s_hi) = (_mm256_setzero_si256(), _mm256_setzero_si256());
        for (g, v) in v.into_iter().enumerate() {
            let aw = _mm256_set1_epi32(word(&a.qs, g));
            let lo = _mm256_and_si256(v, mask);
            let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(v), mask);
            s_lo = _mm256_add_epi16(s_lo, _mm256_maddubs_epi16(lo, aw));
            s_hi = _mm256_add_epi16(s_hi, _mm256_maddubs_epi16(hi, aw));
        }
        // sum((16 hi + lo) * a) - 128 * sum(a) = sum(q * a), exactly.
        let biased = _mm256_add_epi32(
            _mm256_madd_epi16(s_lo, ones),
            _mm256_slli_epi32::<4>(_mm256_madd_epi16(s_hi, ones)),
        );
        let exact = _mm256_sub_epi32(biased, _mm256_set1_epi32(a.qsum << 7));
        let t = _mm256_mul_ps(
            _mm256_mul_ps(_mm256_cvtepi32_ps(exact), dx),
            _mm256_set1_ps(a.d),
        );
        acc = _mm256_add_ps(acc, t);
    }
    store_256(out, r, half, acc);
}
