//! The AVX-512 kernel for 16 to 48 query rows that all see every token of a block (a shared
//! prefix's rows in a decode step: 16 branches x 3 query heads per key/value head of the
//! default model; a prefill chunk's rows past one of its blocks): the rows across the lanes of
//! a vector, where `x86` puts the tokens there.
//!
//! Why: `x86`'s score loop broadcasts a query element for every multiply-add (one load per
//! FMA, plus the key vectors) and first transposes each block's keys; the loop is bound by
//! those loads (a probe on the dev VM: 4.7-5.7 G FMAs/s at its 18 loads per 16 FMAs against
//! 7.5 at 10 per 16), and the transposes took 14 % of an attention call (one thread; see
//! the seventeenth session in `git show 0a5712f:BENCHMARKS.md`). Here the queries are transposed once per work item
//! (`transpose_queries`: dimension `d` of 16 rows in one vector) and each key element is
//! broadcast straight from the cache, once for `V` vectors of rows: `V` x 4 tokens x 2 half
//! chains accumulate at once, 2 `V` query loads and 8 key broadcasts per `8 V` multiply-adds
//! (14 loads per 24 FMAs at `V = 3`), and no key transposes.
//! The maxima and sums over a block's 16 token lanes become vertical operations across 16
//! vectors (one per token), in `math::tree`'s order, instead of a shuffle tree per row.
//!
//! Invariant: each row's state is bitwise what `x86::attend_rows` and the portable loops in
//! `block` make of it (tested there): the same two half-dot chains per score in the same order
//! (`fmadd(q, k, chain)`: the product is exact before its one rounding, so which operand is
//! broadcast changes nothing), `scale * (lo + hi)`, the lane maxima from `-inf` and lane sums
//! from `+0.0` over the block's chunks in order, the same trees, `exp16`, merge weights and
//! `P V` fold (`x86::fold_rows`). Only blocks whose visible tokens are whole 16-token chunks
//! seen by every row come here (no lane is masked). Unsafe code is confined to calling the
//! `#[target_feature]` function behind the detection token.
//!
//! The kernel is x86-64 only; the query transpose and the sizes are portable, so the executor
//! reads the same on every target (elsewhere `block::Scratch::has_wide` is false).
#![cfg_attr(target_arch = "x86_64", allow(unsafe_code))]

#[cfg(target_arch = "x86_64")]
use core::arch::x86_64::*;

use super::scores::LANES;
#[cfg(target_arch = "x86_64")]
use super::{
    block::{BlockView, TileStates},
    x86::{exp16, fits, fold_rows, load, store, transpose16, Avx512, Fold, Probs},
};

/// Most vectors of 16 rows one call takes.
pub(crate) const MAX_GROUPS: usize = 3;

/// Most rows one call takes.
pub(crate) const MAX_ROWS: usize = MAX_GROUPS * LANES;

/// Tokens whose scores one pass of the score loop accumulates.
pub(crate) const TOKENS_PER_PASS: usize = 4;

/// Writes rows `rows` (each `head_dim` long, `head_dim` a multiple of 16) transposed in
/// groups of 16 into `qt`: dimension `d` of row `16 j + i` at `qt[(j * head_dim + d) * 16 + i]`.
/// Only whole groups are written (`rows.len() / 16` of them); `qt` is resized to hold them.
pub(crate) fn transpose_queries(rows: &[&[f32]], head_dim: usize, qt: &mut Vec<f32>) {
    let groups = rows.len() / LANES;
    qt.clear();
    qt.resize(groups * head_dim * LANES, 0.0);
    let whole = head_dim.is_multiple_of(LANES) && rows.iter().all(|q| q.len() >= head_dim);
    #[cfg(target_arch = "x86_64")]
    if let (Some(token), true) = (Avx512::detect(), whole) {
        transpose_groups(token, &rows[..groups * LANES], head_dim, qt);
        return;
    }
    let _ = whole;
    for (r, q) in rows.iter().take(groups * LANES).enumerate() {
        let (j, i) = (r / LANES, r % LANES);
        for (d, &x) in q.iter().take(head_dim).enumerate() {
            qt[(j * head_dim + d) * LANES + i] = x;
        }
    }
}

/// [`transpose_queries`] 16 x 16 floats at a time (`rows` whole groups, each row at least
/// `head_dim` long, `head_dim` a multiple of 16, `qt` sized).
#[cfg(target_arch = "x86_64")]
fn transpose_groups(_: Avx512, rows: &[&[f32]], head_dim: usize, qt: &mut [f32]) {
    #[target_feature(enable = "avx512f")]
    fn run(rows: &[&[f32]], hd: usize, qt: &mut [f32]) {
        for (j, group) in rows.chunks_exact(LANES).enumerate() {
            for dc in 0..hd / LANES {
                let cols = transpose16(std::array::from_fn(|i| load(&group[i][dc * LANES..])));
                for (i, col) in cols.into_iter().enumerate() {
                    store(&mut qt[(j * hd + dc * LANES + i) * LANES..], col);
                }
            }
        }
    }
    // SAFETY: the token proves AVX-512F is available.
    unsafe { run(rows, head_dim, qt) }
}

#[cfg(target_arch = "x86_64")]
/// One call's inputs: `groups` vectors of 16 rows (transposed as [`transpose_queries`] writes
/// them) against the first `n` keys of `blk`, all visible to every row.
pub(crate) struct WideTile<'a, 'p> {
    /// Transposed queries, at least `groups * head_dim * 16` floats.
    pub(crate) qt: &'a [f32],
    /// Vectors of 16 rows, `1..=MAX_GROUPS`.
    pub(crate) groups: usize,
    /// The block.
    pub(crate) blk: BlockView<'a>,
    /// Visible tokens: a positive multiple of 16.
    pub(crate) n: usize,
    /// Score scale.
    pub(crate) scale: f32,
    /// Whether the block partial becomes the state (else it is merged in).
    pub(crate) first: bool,
    /// Scratch for the scores and probabilities, at least `n * groups * 16` floats.
    pub(crate) probs: &'p mut [f32],
    /// Called after each pass of the score loop (`n / 4` of them): the caller's prefetch of
    /// the next block, spread over the passes.
    pub(crate) between: &'p mut dyn FnMut(),
}

#[cfg(target_arch = "x86_64")]
/// Folds the block into the `groups * 16` states of `states`. Gives `states` back untouched
/// for sizes it does not handle (the caller then runs the rows in ordinary tiles).
pub(crate) fn attend_wide<'s>(
    _: Avx512,
    tile: WideTile<'_, '_>,
    states: TileStates<'s>,
) -> Result<(), TileStates<'s>> {
    let (groups, n, blk) = (tile.groups, tile.n, tile.blk);
    let rows = groups * LANES;
    let hd = match states.acc.len().checked_div(rows) {
        Some(hd) if (1..=MAX_GROUPS).contains(&groups) && fits(hd) => hd,
        _ => return Err(states),
    };
    let view_holds = |x: &[f32]| (n - 1) * blk.stride + hd <= x.len();
    let sizes_ok = n > 0
        && n.is_multiple_of(LANES)
        && blk.stride >= hd
        && view_holds(blk.k)
        && view_holds(blk.v)
        && states.m.len() == rows
        && states.l.len() == rows
        && tile.qt.len() >= rows * hd
        && tile.probs.len() >= n * rows;
    if !sizes_ok {
        return Err(states);
    }
    let mut tile = tile;
    // SAFETY (each arm): the token proves AVX-512F and FMA are available.
    unsafe {
        match (hd, groups) {
            (64, 1) => wide_kernel::<4, 1>(&mut tile, states),
            (64, 2) => wide_kernel::<4, 2>(&mut tile, states),
            (64, _) => wide_kernel::<4, 3>(&mut tile, states),
            (_, 1) => wide_kernel::<8, 1>(&mut tile, states),
            (_, 2) => wide_kernel::<8, 2>(&mut tile, states),
            _ => wide_kernel::<8, 3>(&mut tile, states),
        }
    }
    Ok(())
}

#[cfg(target_arch = "x86_64")]
/// The kernel for `V` vectors of rows of heads of `NC * 16` floats.
#[target_feature(enable = "avx512f,fma")]
fn wide_kernel<const NC: usize, const V: usize>(t: &mut WideTile<'_, '_>, st: TileStates<'_>) {
    let (hd, n, width) = (NC * LANES, t.n, V * LANES);
    let half = hd / 2;
    let qt = &t.qt[..V * hd * LANES];
    let scale = _mm512_set1_ps(t.scale);
    // Scores: token `t`'s scores for the 16 rows of vector `v` at `probs[t * width + 16 v..]`.
    for t0 in (0..n).step_by(TOKENS_PER_PASS) {
        let keys: [&[f32]; TOKENS_PER_PASS] =
            std::array::from_fn(|i| &t.blk.k[(t0 + i) * t.blk.stride..][..hd]);
        let mut lo = [[_mm512_setzero_ps(); TOKENS_PER_PASS]; V];
        let mut hi = [[_mm512_setzero_ps(); TOKENS_PER_PASS]; V];
        for d in 0..half {
            let q_lo: [__m512; V] = std::array::from_fn(|v| load(&qt[(v * hd + d) * LANES..]));
            let q_hi: [__m512; V] =
                std::array::from_fn(|v| load(&qt[(v * hd + half + d) * LANES..]));
            for (i, key) in keys.iter().enumerate() {
                let (k_lo, k_hi) = (_mm512_set1_ps(key[d]), _mm512_set1_ps(key[half + d]));
                for v in 0..V {
                    lo[v][i] = _mm512_fmadd_ps(q_lo[v], k_lo, lo[v][i]);
                    hi[v][i] = _mm512_fmadd_ps(q_hi[v], k_hi, hi[v][i]);
                }
            }
        }
        for (v, (lo, hi)) in lo.iter().zip(&hi).enumerate() {
            for i in 0..TOKENS_PER_PASS {
                let s = _mm512_mul_ps(scale, _mm512_add_ps(lo[i], hi[i]));
                store(&mut t.probs[(t0 + i) * width + v * LANES..], s);
            }
        }
        (t.between)();
    }
    // Per vector of rows: the block maximum (lane `i` of the contract is token `16 c + i`,
    // here vector `i`), the probabilities and the block sum.
    let (mut m_b, mut l_b) = ([0f32; MAX_ROWS], [0f32; MAX_ROWS]);
    let (mut wa, mut wb) = ([0f32; MAX_ROWS], [0f32; MAX_ROWS]);
    for v in 0..V {
        let at = |tok: usize| tok * width + v * LANES;
        let mut lane_max = [_mm512_set1_ps(f32::NEG_INFINITY); LANES];
        for c in 0..n / LANES {
            for (i, lane) in lane_max.iter_mut().enumerate() {
                *lane = _mm512_max_ps(load(&t.probs[at(c * LANES + i)..]), *lane);
            }
        }
        let max_v = tree(lane_max, |a, b| _mm512_max_ps(a, b));
        let mut lane_sum = [_mm512_setzero_ps(); LANES];
        for c in 0..n / LANES {
            for (i, lane) in lane_sum.iter_mut().enumerate() {
                let slot = at(c * LANES + i);
                let p = exp16(_mm512_sub_ps(load(&t.probs[slot..]), max_v));
                *lane = _mm512_add_ps(*lane, p);
                store(&mut t.probs[slot..], p);
            }
        }
        let sum_v = tree(lane_sum, |a, b| _mm512_add_ps(a, b));
        let rows = v * LANES;
        store(&mut m_b[rows..], max_v);
        store(&mut l_b[rows..], sum_v);
        if !t.first {
            // `block::merge`'s weights: `M' = max(m_b, M)`, `e^(M - M')`, `e^(m_b - M')`.
            let m = load(&st.m[rows..]);
            let m_new = _mm512_max_ps(max_v, m);
            store(&mut wa[rows..], exp16(_mm512_sub_ps(m, m_new)));
            store(&mut wb[rows..], exp16(_mm512_sub_ps(max_v, m_new)));
        }
    }
    // `P V` and the folds, one vector of 16 rows at a time (row `r` of it reads its
    // probabilities at `probs[t * width + 16 v + r]`).
    for v in 0..V {
        let rows = v * LANES..(v + 1) * LANES;
        let fold = Fold {
            blk: t.blk,
            n,
            first: t.first,
            probs: Probs {
                p: &t.probs[rows.start..],
                row: 1,
                tok: width,
            },
            m_b: &m_b[rows.clone()],
            l_b: &l_b[rows.clone()],
            wa: &wa[rows.clone()],
            wb: &wb[rows.clone()],
        };
        let mut group = TileStates {
            m: &mut st.m[rows.clone()],
            l: &mut st.l[rows.clone()],
            acc: &mut st.acc[rows.start * hd..rows.end * hd],
        };
        fold_rows::<NC, LANES>(&fold, &mut group);
    }
}

/// `math::tree(v, op)` lane for lane over 16 vectors (with `_mm512_max_ps(a, b)`, which is
/// `a > b ? a : b`, the contract's `max`, or `_mm512_add_ps`).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn tree(v: [__m512; LANES], op: impl Fn(__m512, __m512) -> __m512) -> __m512 {
    let h: [__m512; 8] = std::array::from_fn(|i| op(v[i], v[i + 8]));
    let g: [__m512; 4] = std::array::from_fn(|i| op(h[i], h[i + 4]));
    op(op(g[0], g[2]), op(g[1], g[3]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transposed_queries_put_row_r_dimension_d_where_the_kernel_reads_it() {
        for (head_dim, rows) in [(64usize, 48usize), (128, 16), (64, 37), (32, 15)] {
            let qs: Vec<Vec<f32>> = (0..rows)
                .map(|r| (0..head_dim).map(|d| (r * 1000 + d) as f32).collect())
                .collect();
            let refs: Vec<&[f32]> = qs.iter().map(|q| &q[..]).collect();
            let mut qt = vec![f32::NAN; 3];
            transpose_queries(&refs, head_dim, &mut qt);
            let groups = rows / LANES;
            assert_eq!(qt.len(), groups * head_dim * LANES);
            for (r, q) in qs.iter().enumerate().take(groups * LANES) {
                for (d, &want) in q.iter().enumerate() {
                    let at = (r / LANES * head_dim + d) * LANES + r % LANES;
                    assert_eq!(qt[at], want, "head_dim {head_dim}, row {r}, dim {d}");
                }
            }
        }
    }
}
