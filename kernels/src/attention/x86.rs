//! The AVX-512 twin of `block`'s portable loops: a tile of query rows against one KV block,
//! 16 tokens to a `__m512`.
//!
//! Scores: the block's keys are transposed once per block (`transpose_keys`: one vector per
//! head dimension holding 16 tokens' elements; `block::Scratch` keeps the last block's, so
//! every tile of rows that sweeps the block reuses it). Per 16-token chunk, each row then
//! runs the contract's two half-dot chains (`scores`) for all 16 tokens at once: one
//! multiply-add per dimension and chain, the query element broadcast from memory, two key
//! vectors loaded per step for the whole tile. A tile of `R` rows keeps `2 R` independent
//! chains in flight and the chunk's scores come out in one vector, token `t` in lane `t`, with
//! no horizontal step (the earlier layout, one token per vector and a transposing reduction
//! tree per 16 tokens, spent ~40 % of the score phase on that tree). Max, `exp` and the sums
//! then run 16 lanes wide. The rows of a tile go through each phase together, so the long
//! dependency chains of one row (max tree, `exp`, sum tree, merge) overlap with the others'
//! (a tile takes up to 8 rows), and `P V` loads each value vector once per group of rows
//! whose output accumulators fit in registers (4 rows of 64 floats or 2 of 128, 16 vectors),
//! folding each group's rows into their states right after (`NC`, the head's 16-float
//! chunks, `R`, the tile's rows, and `G`, the group's, are const parameters).
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
use super::scores::{max, transpose_fits, LANES};

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
    /// The block's keys transposed by [`transpose_keys`], at least `n` tokens of them.
    pub(crate) kt: &'a [f32],
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
        && tile.kt.len() >= tile.n.div_ceil(LANES) * LANES * hd
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

/// Writes the keys of `blk`'s first `tokens` slots transposed into `kt`, 16 tokens to a chunk:
/// dimension `d` of token `16 c + i` at `kt[(c * head_dim + d) * 16 + i]`; the lanes of a last,
/// partial chunk past `tokens` hold zeros. `head_dim` is a multiple of 16 (see [`fits`]),
/// every slot's key lies inside `blk.k`, and `kt` holds `tokens.div_ceil(16) * 16 * head_dim`
/// floats; a call that breaks these writes nothing and returns `false`.
pub(crate) fn transpose_keys(
    _: Avx512,
    blk: BlockView<'_>,
    tokens: usize,
    head_dim: usize,
    kt: &mut [f32],
) -> bool {
    let ok = head_dim.is_multiple_of(LANES) && transpose_fits(blk, tokens, head_dim, kt.len());
    if ok {
        // SAFETY: the token proves AVX-512F is available.
        unsafe { transpose_chunks(blk, tokens, head_dim, kt) };
    }
    ok
}

#[target_feature(enable = "avx512f")]
fn transpose_chunks(blk: BlockView<'_>, tokens: usize, hd: usize, kt: &mut [f32]) {
    for ch in 0..tokens.div_ceil(LANES) {
        for dc in 0..hd / LANES {
            let rows: [__m512; LANES] = std::array::from_fn(|i| {
                let t = ch * LANES + i;
                if t < tokens {
                    load(&blk.k[t * blk.stride + dc * LANES..])
                } else {
                    _mm512_setzero_ps()
                }
            });
            let cols = transpose16(rows);
            for (i, col) in cols.into_iter().enumerate() {
                store(&mut kt[(ch * hd + dc * LANES + i) * LANES..], col);
            }
        }
    }
}

/// The 16 x 16 transpose of `r` (vector `i`, lane `j` becomes vector `j`, lane `i`): pairs
/// interleaved as floats, then as doubles, then 128-bit quarters regrouped twice.
#[inline]
#[target_feature(enable = "avx512f")]
pub(crate) fn transpose16(r: [__m512; LANES]) -> [__m512; LANES] {
    let (pd, ps) = (_mm512_castps_pd, _mm512_castpd_ps);
    let t: [__m512; LANES] = std::array::from_fn(|i| {
        let (a, b) = (r[i & !1], r[i | 1]);
        if i % 2 == 0 {
            _mm512_unpacklo_ps(a, b)
        } else {
            _mm512_unpackhi_ps(a, b)
        }
    });
    // u[4j + m]: m = 0, 1 from t[4j], t[4j + 2]; m = 2, 3 from t[4j + 1], t[4j + 3].
    let u: [__m512; LANES] = std::array::from_fn(|i| {
        let (j, m) = (i / 4, i % 4);
        let (a, b) = (pd(t[4 * j + m / 2]), pd(t[4 * j + m / 2 + 2]));
        if m % 2 == 0 {
            ps(_mm512_unpacklo_pd(a, b))
        } else {
            ps(_mm512_unpackhi_pd(a, b))
        }
    });
    // v[8h + k]: k < 4 takes the even quarters of u[8h + k] and u[8h + k + 4], k >= 4 the odd.
    let v: [__m512; LANES] = std::array::from_fn(|i| {
        let (h, k) = (i / 8, i % 8);
        let (a, b) = (u[8 * h + k % 4], u[8 * h + k % 4 + 4]);
        if k < 4 {
            _mm512_shuffle_f32x4::<0x88>(a, b)
        } else {
            _mm512_shuffle_f32x4::<0xDD>(a, b)
        }
    });
    // w[i]: i < 8 the even quarters of v[i] and v[i + 8], i >= 8 the odd ones.
    std::array::from_fn(|i| {
        let (a, b) = (v[i % 8], v[i % 8 + 8]);
        if i < 8 {
            _mm512_shuffle_f32x4::<0x88>(a, b)
        } else {
            _mm512_shuffle_f32x4::<0xDD>(a, b)
        }
    })
}

#[inline]
#[target_feature(enable = "avx512f")]
pub(crate) fn load(x: &[f32]) -> __m512 {
    let x = &x[..LANES];
    // SAFETY: `x` is 16 floats.
    unsafe { _mm512_loadu_ps(x.as_ptr()) }
}

#[inline]
#[target_feature(enable = "avx512f")]
pub(crate) fn store(x: &mut [f32], v: __m512) {
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
    let (hd, n, pr) = (NC * LANES, t.n, t.probs_row);
    let chunks = n.div_ceil(LANES);
    // Scores, chunk by chunk: every row's two half-dot chains per token, 16 tokens to a
    // vector (the block's keys transposed: one vector per dimension, token `t` in lane `t`),
    // each query element broadcast from memory into its multiply-add; then each row's lane
    // maxima.
    let half = hd / 2;
    let qs: [&[f32]; R] = std::array::from_fn(|r| &t.qs[r][..hd]);
    let mut lane_max = [_mm512_set1_ps(f32::NEG_INFINITY); R];
    for ch in 0..chunks {
        let (t0, cnt) = (ch * LANES, (n - ch * LANES).min(LANES));
        let kt = &t.kt[ch * hd * LANES..][..hd * LANES];
        let mut lo = [_mm512_setzero_ps(); R];
        let mut hi = [_mm512_setzero_ps(); R];
        for d in 0..half {
            let (k_lo, k_hi) = (load(&kt[d * LANES..]), load(&kt[(half + d) * LANES..]));
            for r in 0..R {
                lo[r] = _mm512_fmadd_ps(_mm512_set1_ps(qs[r][d]), k_lo, lo[r]);
                hi[r] = _mm512_fmadd_ps(_mm512_set1_ps(qs[r][half + d]), k_hi, hi[r]);
            }
        }
        for (r, lane_max) in lane_max.iter_mut().enumerate() {
            let s = _mm512_mul_ps(_mm512_set1_ps(t.scale), _mm512_add_ps(lo[r], hi[r]));
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
    let (wa, wb) = weights.split_at(8);
    let probs = Probs {
        p: t.probs,
        row: pr,
        tok: 1,
    };
    let fold = Fold {
        blk: t.blk,
        n: t.n,
        first: t.first,
        probs,
        m_b: &m_b,
        l_b: &l_b,
        wa,
        wb,
    };
    fold_rows::<NC, R>(&fold, &mut st);
}

/// A block's probabilities as [`pv_fold`] reads them: row `r`, token `t` at
/// `p[r * row + t * tok]`.
#[derive(Clone, Copy)]
pub(crate) struct Probs<'a> {
    pub(crate) p: &'a [f32],
    pub(crate) row: usize,
    pub(crate) tok: usize,
}

/// What folding a block into a tile's rows reads: the block, its visible tokens, whether the
/// partial becomes the state, the probabilities, and per row the block maximum and sum and the
/// merge weights `e^(M - M')` (`wa`) and `e^(m_b - M')` (`wb`, both unused when `first`).
pub(crate) struct Fold<'a> {
    pub(crate) blk: BlockView<'a>,
    pub(crate) n: usize,
    pub(crate) first: bool,
    pub(crate) probs: Probs<'a>,
    pub(crate) m_b: &'a [f32],
    pub(crate) l_b: &'a [f32],
    pub(crate) wa: &'a [f32],
    pub(crate) wb: &'a [f32],
}

/// `P V` and the fold for the `R` rows of `st`, in groups whose output accumulators fit the
/// registers (16 vectors: 4 rows of 64 floats or 2 of 128). `R` is a constant so that the
/// groups unroll as they did when this loop lived in `rows_kernel` (a run-time row count made
/// the tile kernel's attention ~15 % slower).
#[inline]
#[target_feature(enable = "avx512f,fma")]
pub(crate) fn fold_rows<const NC: usize, const R: usize>(f: &Fold<'_>, st: &mut TileStates<'_>) {
    let group = LANES / NC;
    let mut r0 = 0;
    while r0 < R {
        match group.min(R - r0) {
            1 => pv_fold::<NC, 1>(f, r0, st),
            2 => pv_fold::<NC, 2>(f, r0, st),
            3 => pv_fold::<NC, 3>(f, r0, st),
            _ => pv_fold::<NC, 4>(f, r0, st),
        }
        r0 += group.min(R - r0);
    }
}

/// `P V` for the `G` rows from `r0` on (their accumulators in registers, each value vector
/// loaded once for all of them), then each row's fold into its state.
#[inline]
#[target_feature(enable = "avx512f,fma")]
fn pv_fold<const NC: usize, const G: usize>(f: &Fold<'_>, r0: usize, st: &mut TileStates<'_>) {
    let (hd, stride, probs) = (NC * LANES, f.blk.stride, f.probs);
    let mut acc = [[_mm512_setzero_ps(); NC]; G];
    for tok in 0..f.n {
        let v = &f.blk.v[tok * stride..][..hd];
        let vv: [__m512; NC] = std::array::from_fn(|c| load(&v[c * LANES..]));
        for (r, acc) in acc.iter_mut().enumerate() {
            let p = _mm512_set1_ps(probs.p[(r0 + r) * probs.row + tok * probs.tok]);
            for (acc, &v) in acc.iter_mut().zip(&vv) {
                *acc = _mm512_fmadd_ps(p, v, *acc);
            }
        }
    }
    for (i, acc) in acc.iter().enumerate() {
        let r = r0 + i;
        let out = &mut st.acc[r * hd..][..hd];
        if f.first {
            (st.m[r], st.l[r]) = (f.m_b[r], f.l_b[r]);
            for (c, &a) in acc.iter().enumerate() {
                store(&mut out[c * LANES..], a);
            }
            continue;
        }
        let (wa, wb) = (f.wa[r], f.wb[r]);
        st.m[r] = max(f.m_b[r], st.m[r]);
        st.l[r] = st.l[r] * wa + f.l_b[r] * wb;
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
pub(crate) fn exp16(x: __m512) -> __m512 {
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
    fn transpose_keys_puts_token_t_dimension_d_where_the_kernel_reads_it() {
        let Some(token) = Avx512::detect() else {
            return;
        };
        for (hd, stride, tokens) in [
            (64usize, 192usize, 16usize),
            (128, 128, 16),
            (64, 64, 5),
            (64, 80, 33),
        ] {
            let k: Vec<f32> = (0..(tokens - 1) * stride + hd).map(|i| i as f32).collect();
            let blk = BlockView {
                k: &k,
                v: &k,
                stride,
            };
            let chunks = tokens.div_ceil(LANES);
            let mut kt = vec![f32::NAN; chunks * LANES * hd];
            assert!(transpose_keys(token, blk, tokens, hd, &mut kt));
            for c in 0..chunks {
                for d in 0..hd {
                    for i in 0..LANES {
                        let t = c * LANES + i;
                        let want = if t < tokens { k[t * stride + d] } else { 0.0 };
                        assert_eq!(
                            kt[(c * hd + d) * LANES + i],
                            want,
                            "hd {hd} token {t} dim {d}"
                        );
                    }
                }
            }
            // A view too short for the slots asked for is refused.
            assert!(!transpose_keys(
                token,
                BlockView {
                    k: &k[..hd],
                    v: &k,
                    stride
                },
                2,
                hd,
                &mut kt
            ));
        }
    }

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
