//! The AVX-512 activation quantizer: `quant::quantize_block` for 16 blocks at a time, in one
//! `#[target_feature]` function (no call and no dispatch per block).
//!
//! Per block, the 32 floats are two vectors: `amax` and the quants (`x * id`, rounded half
//! away from zero, NaN to 0, saturated to `[-128, 127]`, as `f32::round(..) as i8` does) take
//! a few instructions each. The per-block scalars (`d = amax / 127`, `id = 1 / d`, their f16
//! roundings, Q8_1's `s = f16(f16(sum) * d)`) run 16 blocks wide: IEEE division and
//! `vcvtps2ph` with round-to-nearest-even are exactly the scalar division and `half`'s
//! `f16::from_f32`, so every block is bitwise `quantize_block`'s (tested against the scalar
//! reference on edge cases and random rows).
//!
//! Must not: read or write outside the given blocks. Unsafe code is confined to loads and
//! stores of whole, bounds-checked arrays and to calling the `#[target_feature]` function
//! behind the detection token.
#![allow(unsafe_code)]

use core::arch::x86_64::*;

use super::quant::{ActBlock, ActFormat, QK};
use super::x86::Avx512Vnni;

/// Blocks whose scalars are computed together.
const BATCH: usize = 16;

/// Quantizes `xs[i]` into `out[i]` for every `i` (the shorter length decides).
pub(crate) fn quantize_blocks(
    t: Avx512Vnni,
    format: ActFormat,
    xs: &[[f32; QK]],
    out: &mut [ActBlock],
) {
    let _ = t;
    for (xs, out) in xs.chunks(BATCH).zip(out.chunks_mut(BATCH)) {
        // SAFETY: the token proves AVX-512 F/BW and F16C are available.
        unsafe { batch(format, xs, out) };
    }
}

/// Up to [`BATCH`] blocks.
#[target_feature(enable = "avx512f,avx512bw,f16c")]
fn batch(format: ActFormat, xs: &[[f32; QK]], out: &mut [ActBlock]) {
    let n = xs.len().min(out.len()).min(BATCH);
    // Each block's max |x|: NaN lanes leave the running maximum as it is (`max_ps` returns
    // its second operand when either is NaN), and all values are >= +0, so the order of the
    // final reduction does not matter.
    let mut amax = [0f32; BATCH];
    for (a, x) in amax.iter_mut().zip(&xs[..n]) {
        let (lo, hi) = halves(x);
        let m = _mm512_max_ps(_mm512_abs_ps(lo), _mm512_setzero_ps());
        let m = _mm512_max_ps(_mm512_abs_ps(hi), m);
        *a = _mm512_reduce_max_ps(m);
    }
    let amax = load16(&amax);
    // `d = amax / 127`, `id = if d != 0 { 1 / d } else { 0 }`, `d16 = f16(d)`.
    let d = _mm512_div_ps(amax, _mm512_set1_ps(127.0));
    let nonzero = _mm512_cmp_ps_mask::<_CMP_NEQ_OQ>(d, _mm512_setzero_ps());
    let id = _mm512_maskz_div_ps(nonzero, _mm512_set1_ps(1.0), d);
    let d16 = f16_round(d);
    let mut ids = [0f32; BATCH];
    store16(&mut ids, id);
    // Quants and their sums.
    let mut sums = [0i32; BATCH];
    for ((x, o), (sum, &id)) in xs[..n]
        .iter()
        .zip(out.iter_mut())
        .zip(sums.iter_mut().zip(&ids))
    {
        let (lo, hi) = halves(x);
        let idv = _mm512_set1_ps(id);
        let (qlo, qhi) = (
            quants(_mm512_mul_ps(lo, idv)),
            quants(_mm512_mul_ps(hi, idv)),
        );
        *sum = _mm512_reduce_add_epi32(_mm512_add_epi32(qlo, qhi));
        // The values are in [-128, 127], so the saturating narrowing keeps them as they are.
        let bytes = _mm256_set_m128i(_mm512_cvtsepi32_epi8(qhi), _mm512_cvtsepi32_epi8(qlo));
        // SAFETY: `o.qs` is exactly 32 bytes.
        unsafe { _mm256_storeu_si256(o.qs.as_mut_ptr().cast(), bytes) };
    }
    // Q8_1's `s`: `half` multiplies two f16 in f32 and rounds the product back to f16. `sum`
    // (|sum| <= 4096) converts to f32 exactly.
    let s = match format {
        ActFormat::Q8_1 => f16_round(_mm512_mul_ps(
            f16_round(_mm512_cvtepi32_ps(load16i(&sums))),
            d16,
        )),
        ActFormat::Q8_0 => _mm512_setzero_ps(),
    };
    let (mut d_out, mut s_out) = ([0f32; BATCH], [0f32; BATCH]);
    store16(&mut d_out, d16);
    store16(&mut s_out, s);
    for (i, o) in out[..n].iter_mut().enumerate() {
        (o.d, o.s, o.qsum) = (d_out[i], s_out[i], sums[i]);
    }
}

/// `f32::round(v) as i8` per lane, widened to i32: truncate, step away from zero when the
/// (exact) fraction is at least one half; NaN becomes 0, everything else saturates.
#[inline]
#[target_feature(enable = "avx512f")]
fn quants(v: __m512) -> __m512i {
    let t = _mm512_roundscale_ps::<{ _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC }>(v);
    let frac = _mm512_abs_ps(_mm512_sub_ps(v, t));
    let negative = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(v, _mm512_setzero_ps());
    let away = _mm512_mask_blend_ps(negative, _mm512_set1_ps(1.0), _mm512_set1_ps(-1.0));
    let up = _mm512_cmp_ps_mask::<_CMP_GE_OQ>(frac, _mm512_set1_ps(0.5));
    let r = _mm512_mask_add_ps(t, up, t, away);
    let r = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask::<_CMP_ORD_Q>(r, r), r);
    let r = _mm512_min_ps(
        _mm512_max_ps(r, _mm512_set1_ps(-128.0)),
        _mm512_set1_ps(127.0),
    );
    _mm512_cvtps_epi32(r)
}

/// `f16::from_f32(x).to_f32()` per lane (round to nearest even, as `half` does).
#[inline]
#[target_feature(enable = "avx512f")]
fn f16_round(x: __m512) -> __m512 {
    _mm512_cvtph_ps(_mm512_cvtps_ph::<
        { _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC },
    >(x))
}

#[inline]
#[target_feature(enable = "avx512f")]
fn halves(x: &[f32; QK]) -> (__m512, __m512) {
    // SAFETY: `x` is 32 floats: two loads of 16.
    unsafe {
        (
            _mm512_loadu_ps(x.as_ptr()),
            _mm512_loadu_ps(x.as_ptr().add(16)),
        )
    }
}

#[inline]
#[target_feature(enable = "avx512f")]
fn load16(x: &[f32; BATCH]) -> __m512 {
    // SAFETY: 16 floats.
    unsafe { _mm512_loadu_ps(x.as_ptr()) }
}

#[inline]
#[target_feature(enable = "avx512f")]
fn load16i(x: &[i32; BATCH]) -> __m512i {
    // SAFETY: 16 integers.
    unsafe { _mm512_loadu_si512(x.as_ptr().cast()) }
}

#[inline]
#[target_feature(enable = "avx512f")]
fn store16(x: &mut [f32; BATCH], v: __m512) {
    // SAFETY: 16 floats.
    unsafe { _mm512_storeu_ps(x.as_mut_ptr(), v) }
}
