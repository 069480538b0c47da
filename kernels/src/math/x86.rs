//! The AVX-512 form of `silu_mul` (see the parent module): glibc's `expf` algorithm on eight
//! doubles per vector, its 32-entry table read with two two-register permutes and a blend
//! instead of a gather (the compiler's gather was most of the portable loop's time), then the
//! gate's f32 divide and multiply on sixteen lanes.
//!
//! Invariant: every lane performs the portable code's operations in its order and with its
//! roundings (`mul_add` as one fused multiply-subtract, everything else unfused), so the bits
//! equal `silu_mul`'s portable loop for every input; chunks holding an input the core does not
//! take (`|g| >= 88`, NaN) and the tail go through the portable code.
#![allow(unsafe_code)]

use core::arch::x86_64::*;

use super::{silu_mul_portable, EXP2F_TAB, EXPF_C0, EXPF_C1, EXPF_C2, EXPF_INV_LN2_N, EXPF_SHIFT};

/// Proof that the CPU supports AVX-512 F (only [`Avx512::detect`] makes one).
#[derive(Debug, Clone, Copy)]
pub(super) struct Avx512(());

impl Avx512 {
    /// `Some` when AVX-512 F is available at run time.
    pub(super) fn detect() -> Option<Self> {
        is_x86_feature_detected!("avx512f").then_some(Self(()))
    }
}

/// `gate[i] = silu(gate[i]) * up[i]` for `i < min(gate.len(), up.len())`.
pub(super) fn silu_mul(_: Avx512, gate: &mut [f32], up: &[f32]) {
    // SAFETY: the token proves AVX-512 F is available.
    unsafe { silu_mul_512(gate, up) }
}

#[target_feature(enable = "avx512f")]
fn silu_mul_512(gate: &mut [f32], up: &[f32]) {
    let n = gate.len().min(up.len());
    let (gate, up) = (&mut gate[..n], &up[..n]);
    // SAFETY (every load below): `tab` is 32 u64s, read as four 8-lane vectors.
    let tab =
        [0, 8, 16, 24].map(|i| unsafe { _mm512_loadu_si512(EXP2F_TAB.as_ptr().add(i).cast()) });
    let (g_chunks, g_rest) = gate.as_chunks_mut::<16>();
    let (u_chunks, u_rest) = up.as_chunks::<16>();
    let (abs_mask, limit) = (_mm512_set1_epi32(0x7fff_ffff), _mm512_set1_ps(88.0));
    let one = _mm512_set1_ps(1.0);
    for (g, u) in g_chunks.iter_mut().zip(u_chunks) {
        // SAFETY: `g` and `u` are 16 f32s each: one unaligned 512-bit load apiece.
        let (gv, uv) = unsafe { (_mm512_loadu_ps(g.as_ptr()), _mm512_loadu_ps(u.as_ptr())) };
        let abs = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(gv), abs_mask));
        // Ordered compare: NaN fails it too.
        if _mm512_cmp_ps_mask::<_CMP_LT_OQ>(abs, limit) != 0xffff {
            silu_mul_portable(g, u);
            continue;
        }
        let neg = _mm512_sub_ps(_mm512_setzero_ps(), gv);
        // `-g` is exact, as the portable code's negation is.
        let lo = expf_core(_mm512_castps512_ps256(neg), &tab);
        let hi = expf_core(
            _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(neg))),
            &tab,
        );
        let e = join_halves(lo, hi);
        let y = _mm512_mul_ps(_mm512_div_ps(gv, _mm512_add_ps(one, e)), uv);
        // SAFETY: `g` is 16 f32s: one unaligned 512-bit store.
        unsafe { _mm512_storeu_ps(g.as_mut_ptr(), y) };
    }
    silu_mul_portable(g_rest, u_rest);
}

/// The two 8-lane halves as one 16-lane vector (`lo` in lanes 0..8).
#[target_feature(enable = "avx512f")]
fn join_halves(lo: __m256, hi: __m256) -> __m512 {
    // AVX-512 F has no `insertf32x8` (that is DQ): insert the upper half as four doubles.
    _mm512_castpd_ps(_mm512_insertf64x4::<1>(
        _mm512_castpd256_pd512(_mm256_castps_pd(lo)),
        _mm256_castps_pd(hi),
    ))
}

/// `glibc_expf_core` on eight lanes (finite `|x| < 88`).
#[target_feature(enable = "avx512f")]
fn expf_core(x: __m256, tab: &[__m512i; 4]) -> __m256 {
    let xd = _mm512_cvtps_pd(x);
    let inv = _mm512_set1_pd(EXPF_INV_LN2_N);
    let shift = _mm512_set1_pd(EXPF_SHIFT);
    let kd = _mm512_add_pd(_mm512_mul_pd(inv, xd), shift);
    let ki = _mm512_castpd_si512(kd);
    let kd = _mm512_sub_pd(kd, shift);
    // `INV_LN2_N.mul_add(xd, -kd)`: one rounding.
    let r = _mm512_fmsub_pd(inv, xd, kd);
    // `EXP2F_TAB[ki % 32]`: entries 0..16 and 16..32 by the low four bits, bit 4 picks one.
    let low = _mm512_permutex2var_epi64(tab[0], ki, tab[1]);
    let high = _mm512_permutex2var_epi64(tab[2], ki, tab[3]);
    let upper = _mm512_test_epi64_mask(ki, _mm512_set1_epi64(16));
    let t = _mm512_mask_blend_epi64(upper, low, high);
    let s = _mm512_castsi512_pd(_mm512_add_epi64(t, _mm512_slli_epi64::<47>(ki)));
    let z = _mm512_add_pd(
        _mm512_mul_pd(_mm512_set1_pd(EXPF_C0), r),
        _mm512_set1_pd(EXPF_C1),
    );
    let y = _mm512_add_pd(
        _mm512_mul_pd(_mm512_set1_pd(EXPF_C2), r),
        _mm512_set1_pd(1.0),
    );
    let y = _mm512_add_pd(_mm512_mul_pd(z, _mm512_mul_pd(r, r)), y);
    _mm512_cvtpd_ps(_mm512_mul_pd(y, s))
}
