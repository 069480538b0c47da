//! The AVX-512 twin of `block`'s portable loops: a tile of query rows against one KV block,
//! the numerics contract's 16 lanes held in one `__m512` each.
//!
//! Per 16-token chunk of the block, each token's dot product accumulates in one vector (lane
//! `i` takes `q[d] * k[d]` for `d = i, i + 16, ...`: one FMA per 16 elements, no horizontal
//! step; a whole chunk is 16 independent FMA chains), and the 16 tokens' vectors are reduced
//! together by one transposing tree (15 adds, 15 blends, 16 shuffles) that performs exactly
//! `math::tree`'s additions and leaves the chunk's 16 scores in one vector, token `t` in lane
//! `t`. Max, `exp` and the sums then run 16 lanes wide. The rows of a tile go through each
//! phase together, so the long dependency chains of one row (max tree, `exp`, sum tree, merge)
//! overlap with the others' (a tile takes up to 8 rows: the chains' latency between phases is
//! paid once per tile, so bigger tiles waste less of it), and `P V` loads each value vector
//! once per group of rows whose output accumulators fit in registers (4 rows of 64 floats or
//! 2 of 128, 16 vectors), folding each group's rows into their states right after (`NC`, the
//! head's 16-float chunks, `R`, the tile's rows, and `G`, the group's, are const parameters).
//!
//! Invariant: bitwise equal to the portable loops in `block` on FMA builds (tested there):
//! same operations, same operand order, same rounding (`fmadd` where the portable code has
//! `mul_add`, separate multiply and add where it has `a * b + c`); lanes past the visible
//! tokens take no part (`-inf` for the max, `+0.0` for the sums, which leaves a sum of
//! non-negative terms unchanged), and rows never mix. Unsafe code is confined to unaligned
//! loads and stores of 16 floats from slices cut to 16 floats first, and to calling the
//! `#[target_feature]` functions behind a detection token.
#![allow(unsafe_code)]

use core::arch::x86_64::*;

use super::block::BlockView;
use super::block::{TileStates, MAX_TILE};
use super::scores::{max, LANES};

/// Proof that the CPU supports AVX-512F and FMA (only [`Avx512::detect`] makes one).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Avx512(());

impl Avx512 {
    /// `Some` when AVX-512F and FMA are available at run time.
    pub(crate) fn detect() -> Option<Self> {
        (is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("fma")).then_some(Self(()))
    }
}

/// Whether the kernel handles heads of `head_dim` floats (the sizes of nearly every model;
/// others take the portable loops).
pub(crate) fn fits(head_dim: usize) -> bool {
    head_dim == 64 || head_dim == 128
}

/// One tile's inputs: rows `qs` (each `head_dim` long) against the first `n` keys of `blk`.
pub(crate) struct Tile<'a, 'p> {
    /// Query rows.
    pub(crate) qs: &'a [&'a [f32]],
    /// The block.
    pub(crate) blk: BlockView<'a>,
    /// Visible tokens, `1..=block_size`.
    pub(crate) n: usize,
    /// Score scale.
    pub(crate) scale: f32,
    /// Whether the block partial becomes the state (else it is merged in).
    pub(crate) first: bool,
    /// Scratch: row `r`'s scores at `probs[r * probs_row..]`.
    pub(crate) probs: &'p mut [f32],
    /// Floats per row of `probs`, at least `n` rounded up to 16.
    pub(crate) probs_row: usize,
}

/// `block::Scratch::attend_rows` on AVX-512. Gives `states` back untouched when the sizes
/// are not ones it handles (the caller then runs the portable loops).
pub(crate) fn attend_rows<'s>(
    _: Avx512,
    mut tile: Tile<'_, '_>,
    states: TileStates<'s>,
) -> Result<(), TileStates<'s>> {
    const _: () = assert!(MAX_TILE <= 8, "the merge weights take lanes r and 8 + r");
    let (rows, hd) = (tile.qs.len(), tile.qs.first().map_or(0, |q| q.len()));
    let sizes_ok = fits(hd)
        && (1..=MAX_TILE).contains(&rows)
        && tile.qs.iter().all(|q| q.len() == hd)
        && states.m.len() == rows
        && states.l.len() == rows
        && states.acc.len() == rows * hd
        && tile.n >= 1
        && tile.probs_row >= tile.n.div_ceil(LANES) * LANES
        && tile.probs.len() >= MAX_TILE * tile.probs_row;
    if !sizes_ok {
        return Err(states);
    }
    // SAFETY (each arm): the token proves AVX-512F and FMA are available.
    unsafe {
        match (hd, rows) {
            (64, 1) => rows_kernel::<4, 1>(&mut tile, states),
            (64, 2) => rows_kernel::<4, 2>(&mut tile, states),
            (64, 3) => rows_kernel::<4, 3>(&mut tile, states),
            (64, 4) => rows_kernel::<4, 4>(&mut tile, states),
            (64, 5) => rows_kernel::<4, 5>(&mut tile, states),
            (64, 6) => rows_kernel::<4, 6>(&mut tile, states),
            (64, 7) => rows_kernel::<4, 7>(&mut tile, states),
            (64, _) => rows_kernel::<4, 8>(&mut tile, states),
            (_, 1) => rows_kernel::<8, 1>(&mut tile, states),
            (_, 2) => rows_kernel::<8, 2>(&mut tile, states),
            (_, 3) => rows_kernel::<8, 3>(&mut tile, states),
            (_, 4) => rows_kernel::<8, 4>(&mut tile, states),
            (_, 5) => rows_kernel::<8, 5>(&mut tile, states),
            (_, 6) => rows_kernel::<8, 6>(&mut tile, states),
            (_, 7) => rows_kernel::<8, 7>(&mut tile, states),
            _ => rows_kernel::<8, 8>(&mut tile, states),
        }
    }
    Ok(())
}

/// Asks the caches for the keys and values of `blk`'s tokens `slots` (`width` floats from the
/// start of each slot's view: one head's or several adjacent heads'), so a block's loads
/// overlap the work on the block before it. A hint only: it changes no result.
pub(crate) fn prefetch(blk: BlockView<'_>, slots: std::ops::Range<usize>, width: usize) {
    for t in slots {
        let (Some(k), Some(v)) = (blk.k.get(t * blk.stride..), blk.v.get(t * blk.stride..)) else {
            return;
        };
        for line in (0..width.min(k.len()).min(v.len())).step_by(LANES) {
            // SAFETY: the addresses are inside `k` and `v`; a prefetch reads nothing.
            unsafe {
                _mm_prefetch::<_MM_HINT_T0>(k[line..].as_ptr().cast());
                _mm_prefetch::<_MM_HINT_T0>(v[line..].as_ptr().cast());
            }
        }
    }
}

#[inline]
#[target_feature(enable = "avx512f")]
fn load(x: &[f32]) -> __m512 {
    let x = &x[..LANES];
    // SAFETY: `x` is 16 floats.
    unsafe { _mm512_loadu_ps(x.as_ptr()) }
}

#[inline]
#[target_feature(enable = "avx512f")]
fn store(x: &mut [f32], v: __m512) {
    let x = &mut x[..LANES];
    // SAFETY: `x` is 16 floats.
    unsafe { _mm512_storeu_ps(x.as_mut_ptr(), v) }
}

/// Lanes `0..cnt` set (`cnt <= 16`).
fn visible(cnt: usize) -> __mmask16 {
    if cnt >= LANES {
        0xFFFF
    } else {
        (1u16 << cnt) - 1
    }
}

/// The kernel for `R` rows (exactly `st.m.len()`, at most [`MAX_TILE`]) of heads of `NC * 16`
/// floats.
#[target_feature(enable = "avx512f,fma")]
fn rows_kernel<const NC: usize, const R: usize>(t: &mut Tile<'_, '_>, mut st: TileStates<'_>) {
    let (hd, stride, n, pr) = (NC * LANES, t.blk.stride, t.n, t.probs_row);
    let chunks = n.div_ceil(LANES);
    // Scores, row by row and chunk by chunk, and each row's lane maxima.
    let mut lane_max = [_mm512_set1_ps(f32::NEG_INFINITY); R];
    for (r, lane_max) in lane_max.iter_mut().enumerate() {
        let q = t.qs[r];
        let qv: [__m512; NC] = std::array::from_fn(|c| load(&q[c * LANES..]));
        for ch in 0..chunks {
            let (t0, cnt) = (ch * LANES, (n - ch * LANES).min(LANES));
            let dot = |tok: usize| {
                let k = &t.blk.k[(t0 + tok) * stride..][..hd];
                let mut acc = _mm512_setzero_ps();
                for (c, &qc) in qv.iter().enumerate() {
                    acc = _mm512_fmadd_ps(qc, load(&k[c * LANES..]), acc);
                }
                acc
            };
            // A whole chunk unrolls into 16 independent FMA chains held in registers.
            let dots: [__m512; LANES] = if cnt == LANES {
                std::array::from_fn(dot)
            } else {
                std::array::from_fn(|tok| {
                    if tok < cnt {
                        dot(tok)
                    } else {
                        _mm512_setzero_ps()
                    }
                })
            };
            let s = _mm512_mul_ps(_mm512_set1_ps(t.scale), reduce_tokens(&dots));
            let s_vis = _mm512_mask_blend_ps(visible(cnt), _mm512_set1_ps(f32::NEG_INFINITY), s);
            *lane_max = _mm512_max_ps(s_vis, *lane_max);
            store(&mut t.probs[r * pr + t0..], s);
        }
    }
    let m_b: [f32; R] = std::array::from_fn(|r| tree_max(lane_max[r]));
    // Probabilities and each row's lane sums.
    let mut lane_sum = [_mm512_setzero_ps(); R];
    for ch in 0..chunks {
        let (t0, cnt) = (ch * LANES, (n - ch * LANES).min(LANES));
        for (r, lane_sum) in lane_sum.iter_mut().enumerate() {
            let s = load(&t.probs[r * pr + t0..]);
            let p = _mm512_maskz_mov_ps(
                visible(cnt),
                exp16(_mm512_sub_ps(s, _mm512_set1_ps(m_b[r]))),
            );
            *lane_sum = _mm512_add_ps(*lane_sum, p);
            store(&mut t.probs[r * pr + t0..], p);
        }
    }
    let l_b: [f32; R] = std::array::from_fn(|r| tree_add(lane_sum[r]));
    // Fold each row's partial into its state: `block::merge`, in its order. The merge weights
    // `e^(M - M')` and `e^(m_b - M')` of every row come from one `exp16` (lanes `r` and
    // `8 + r`; `exp16` is `math::exp` lane for lane).
    let mut weights = [0f32; LANES];
    if !t.first {
        for (r, &m) in st.m.iter().enumerate().take(R) {
            let m_new = max(m_b[r], m);
            (weights[r], weights[8 + r]) = (m - m_new, m_b[r] - m_new);
        }
        let w = exp16(load(&weights));
        store(&mut weights, w);
    }
    // P V in groups of rows whose output accumulators fit the registers (16 vectors): each
    // value vector is loaded once per group, and each group's rows are folded right after.
    let group = (LANES / NC).min(R);
    let mut r0 = 0;
    while r0 < R {
        let rows = group.min(R - r0);
        let g = Group {
            r0,
            m_b: &m_b,
            l_b: &l_b,
            weights: &weights,
        };
        match rows {
            1 => pv_fold::<NC, 1>(t, &mut st, g),
            2 => pv_fold::<NC, 2>(t, &mut st, g),
            3 => pv_fold::<NC, 3>(t, &mut st, g),
            _ => pv_fold::<NC, 4>(t, &mut st, g),
        }
        r0 += rows;
    }
}

/// Rows `r0..` of a tile, their block maxima and sums, and the merge weights (`weights[r]`,
/// `weights[8 + r]`).
#[derive(Clone, Copy)]
struct Group<'a> {
    r0: usize,
    m_b: &'a [f32],
    l_b: &'a [f32],
    weights: &'a [f32; LANES],
}

/// `P V` for the `G` rows from `g.r0` on (their accumulators in registers, each value vector
/// loaded once for all of them), then each row's fold into its state.
#[inline]
#[target_feature(enable = "avx512f,fma")]
fn pv_fold<const NC: usize, const G: usize>(
    t: &Tile<'_, '_>,
    st: &mut TileStates<'_>,
    g: Group<'_>,
) {
    let (hd, stride, pr) = (NC * LANES, t.blk.stride, t.probs_row);
    let mut acc = [[_mm512_setzero_ps(); NC]; G];
    for tok in 0..t.n {
        let v = &t.blk.v[tok * stride..][..hd];
        let vv: [__m512; NC] = std::array::from_fn(|c| load(&v[c * LANES..]));
        for (r, acc) in acc.iter_mut().enumerate() {
            let p = _mm512_set1_ps(t.probs[(g.r0 + r) * pr + tok]);
            for (acc, &v) in acc.iter_mut().zip(&vv) {
                *acc = _mm512_fmadd_ps(p, v, *acc);
            }
        }
    }
    for (i, acc) in acc.iter().enumerate() {
        let r = g.r0 + i;
        let out = &mut st.acc[r * hd..][..hd];
        if t.first {
            (st.m[r], st.l[r]) = (g.m_b[r], g.l_b[r]);
            for (c, &a) in acc.iter().enumerate() {
                store(&mut out[c * LANES..], a);
            }
            continue;
        }
        let (wa, wb) = (g.weights[r], g.weights[8 + r]);
        st.m[r] = max(g.m_b[r], st.m[r]);
        st.l[r] = st.l[r] * wa + g.l_b[r] * wb;
        let (wa, wb) = (_mm512_set1_ps(wa), _mm512_set1_ps(wb));
        for (c, &a) in acc.iter().enumerate() {
            let old = load(&out[c * LANES..]);
            store(
                &mut out[c * LANES..],
                _mm512_add_ps(_mm512_mul_ps(old, wa), _mm512_mul_ps(a, wb)),
            );
        }
    }
}

/// Reduces 16 tokens' lane vectors to their 16 sums, token `t` in lane `t`, adding exactly as
/// `math::tree` does: lane `i` with `i + 8`, then `+ 4`, `+ 2`, `+ 1`. Each level pairs two
/// vectors `x`, `y` and halves the lanes per token (2 tokens x 8 partials per vector, then
/// 4 x 4, 8 x 2, 16 x 1) as `blend(x, y) + shuffle(x, y)`: the blend keeps one partner of
/// every pair in place, one shuffle brings the other, so each add costs one shuffle-port
/// instruction. The tokens end in bit-reversed lane order, undone by one permute.
#[inline]
#[target_feature(enable = "avx512f")]
fn reduce_tokens(a: &[__m512; LANES]) -> __m512 {
    // (x0..7 | y8..15) + (x8..15 | y0..7): lanes 0..8 token 2j, lanes 8..16 token 2j + 1.
    let l1: [__m512; 8] = std::array::from_fn(|j| {
        let (x, y) = (a[2 * j], a[2 * j + 1]);
        _mm512_add_ps(
            _mm512_mask_blend_ps(0xFF00, x, y),
            _mm512_shuffle_f32x4::<0b01_00_11_10>(x, y),
        )
    });
    // Quarters (x0 y1 x2 y3) + (x1 y0 x3 y2): partials i and i + 4, one token per quarter.
    let pair_quarters =
        _mm512_setr_epi32(4, 5, 6, 7, 16, 17, 18, 19, 12, 13, 14, 15, 24, 25, 26, 27);
    let l2: [__m512; 4] = std::array::from_fn(|j| {
        let (x, y) = (l1[2 * j], l1[2 * j + 1]);
        _mm512_add_ps(
            _mm512_mask_blend_ps(0xF0F0, x, y),
            _mm512_permutex2var_ps(x, pair_quarters, y),
        )
    });
    // Within quarters, (x0 x1 y2 y3) + (x2 x3 y0 y1): partials i and i + 2.
    let l3: [__m512; 2] = std::array::from_fn(|j| {
        let (x, y) = (l2[2 * j], l2[2 * j + 1]);
        _mm512_add_ps(
            _mm512_mask_blend_ps(0xCCCC, x, y),
            _mm512_shuffle_ps::<0b01_00_11_10>(x, y),
        )
    });
    // Within quarters, (x0 y1 x2 y3) + (x1 y0 x3 y2): partials 0 and 1.
    let pair_elems = _mm512_setr_epi32(1, 16, 3, 18, 5, 20, 7, 22, 9, 24, 11, 26, 13, 28, 15, 30);
    let (x, y) = (l3[0], l3[1]);
    let f = _mm512_add_ps(
        _mm512_mask_blend_ps(0xAAAA, x, y),
        _mm512_permutex2var_ps(x, pair_elems, y),
    );
    // Lane `l` now holds token `bitreverse4(l)`.
    let order = _mm512_setr_epi32(0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15);
    _mm512_permutexvar_ps(order, f)
}

/// `math::tree(v, max)`: `_mm512_max_ps(a, b)` is `a > b ? a : b`, the contract's `max`.
#[inline]
#[target_feature(enable = "avx512f")]
fn tree_max(v: __m512) -> f32 {
    let h = _mm512_max_ps(v, _mm512_shuffle_f32x4::<0b11_10_11_10>(v, v));
    let g = _mm512_max_ps(h, _mm512_shuffle_f32x4::<0b01_01_01_01>(h, h));
    let e = _mm512_max_ps(g, _mm512_shuffle_ps::<0b11_10_11_10>(g, g));
    _mm512_cvtss_f32(_mm512_max_ps(e, _mm512_shuffle_ps::<0b01_01_01_01>(e, e)))
}

/// `math::tree(v, +)`.
#[inline]
#[target_feature(enable = "avx512f")]
fn tree_add(v: __m512) -> f32 {
    let h = _mm512_add_ps(v, _mm512_shuffle_f32x4::<0b11_10_11_10>(v, v));
    let g = _mm512_add_ps(h, _mm512_shuffle_f32x4::<0b01_01_01_01>(h, h));
    let e = _mm512_add_ps(g, _mm512_shuffle_ps::<0b11_10_11_10>(g, g));
    _mm512_cvtss_f32(_mm512_add_ps(e, _mm512_shuffle_ps::<0b01_01_01_01>(e, e)))
}

/// `math::exp` on 16 lanes, operation for operation (its multiply-adds fused, as on the FMA
/// builds this kernel runs in; `round` to nearest even is `vrndscaleps`, the product with `2^n`
/// one `vscalefps`, exact like the scalar product since `2^n` is a normal float).
#[inline]
#[target_feature(enable = "avx512f")]
fn exp16(x: __m512) -> __m512 {
    use crate::math::{EXP_LN2_HI, EXP_LN2_LO, EXP_LOG2E, EXP_POLY};
    let c = _mm512_set1_ps;
    // `if x < -87 { -87 } else { x }` is `max(-87, x)`: a NaN x comes back as it is.
    let x = _mm512_max_ps(c(-87.0), x);
    let x = _mm512_min_ps(c(88.0), x);
    let n = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(
        _mm512_mul_ps(x, c(EXP_LOG2E)),
    );
    let r = _mm512_fmadd_ps(n, c(-EXP_LN2_HI), x);
    let r = _mm512_fmadd_ps(n, c(-EXP_LN2_LO), r);
    let mut p = c(EXP_POLY[0]);
    for &k in &EXP_POLY[1..] {
        p = _mm512_fmadd_ps(p, r, c(k));
    }
    let y = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), c(1.0));
    _mm512_scalef_ps(y, n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::exp;

    #[test]
    fn exp16_is_math_exp_bitwise() {
        // `math::exp` fuses its multiply-adds only on FMA builds (the kernel always does).
        let (Some(_), true) = (Avx512::detect(), cfg!(target_feature = "fma")) else {
            return;
        };
        let mut xs: Vec<f32> = (0..4000).map(|i| -95.0 + i as f32 * 0.047_3).collect();
        xs.extend([
            0.0,
            -0.0,
            f32::NEG_INFINITY,
            f32::INFINITY,
            f32::NAN,
            88.0,
            -87.0,
            1e-30,
        ]);
        for chunk in xs.chunks(LANES) {
            let mut buf = [0f32; LANES];
            buf[..chunk.len()].copy_from_slice(chunk);
            let mut got = [0f32; LANES];
            // SAFETY: AVX-512F was detected above.
            unsafe { store(&mut got, exp16(load(&buf))) };
            for (x, g) in buf.iter().zip(got) {
                assert_eq!(g.to_bits(), exp(*x).to_bits(), "exp({x})");
            }
        }
    }
}
