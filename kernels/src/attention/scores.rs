//! Attention scores `s_t = scale * (q . k_t)` for the tokens of one KV block, in the one
//! summation order the numerics contract fixes, and the 16-lane reduction tree the block's max
//! and sum (see `block`) are written in.
//!
//! The order, as `dot` spells it out: the head splits at `h = head_dim / 2`; one chain starts
//! at +0.0 and accumulates `mul_add(q[d], k[d], chain)` for `d = 0, 1, ..., h - 1`, a second
//! one the same way for `d = h, ..., head_dim - 1`; the score is `scale * (first + second)`.
//! The vector kernel (`x86`) runs these chains for 16 tokens at once, one token per lane of a
//! vector (the block's keys transposed, each query element broadcast), so a whole tile of
//! rows advances 2 x rows independent chains with no horizontal step at all; `scores` here is
//! the portable statement of the same arithmetic, and the two are tested bitwise equal.
//!
//! Rust neither reassociates nor contracts float operations, so vectorisation cannot change
//! the result. `mul_add` is a fused multiply-add exactly when the build targets FMA hardware
//! (a compile-time choice: one build, one order); the AVX-512 kernel always fuses, and it only
//! runs where FMA exists, so on an FMA build both paths give the same bits.

use super::block::BlockView;

pub(crate) use crate::math::{mul_add, tree, LANES};

/// `max` as the contract (and `vmaxps`) defines it: `a` when `a > b`, else `b` (so a NaN in `a`
/// is skipped and ties keep `b`).
#[inline(always)]
pub(crate) fn max(a: f32, b: f32) -> f32 {
    if a > b {
        a
    } else {
        b
    }
}

/// `q . k` in the contract's order: the two half chains, then their sum.
#[inline]
pub(crate) fn dot(q: &[f32], k: &[f32]) -> f32 {
    let half = q.len() / 2;
    let (q_lo, q_hi) = q.split_at(half);
    let (k_lo, k_hi) = k[..q.len()].split_at(half);
    chain(q_lo, k_lo) + chain(q_hi, k_hi)
}

/// `mul_add(x[d], y[d], acc)` for `d` in order, from +0.0.
#[inline(always)]
fn chain(x: &[f32], y: &[f32]) -> f32 {
    x.iter()
        .zip(y)
        .fold(0.0, |acc, (&x, &y)| mul_add(x, y, acc))
}

/// Scores of row `q` against the first `out.len()` keys of `blk`, written to `out`; returns
/// their maximum in the contract's order: lane `t % 16` keeps the running `max` of tokens
/// `t, t + 16, ...` from `-inf`, then `tree` with `max` (`-inf` for no tokens).
///
/// Token by token: the statement [`scores_transposed`] is tested against, and the fallback
/// for a block view too short to transpose (the attention paths otherwise score from
/// transposed keys).
#[inline]
pub(crate) fn scores(q: &[f32], blk: BlockView<'_>, scale: f32, out: &mut [f32]) -> f32 {
    for (t, s) in out.iter_mut().enumerate() {
        *s = scale * dot(q, &blk.k[t * blk.stride..]);
    }
    block_max(out)
}

/// The maximum of a block's scores in the contract's order: lane `t % 16` keeps the running
/// `max` of tokens `t, t + 16, ...` from `-inf`, then `tree` with `max`.
#[inline]
fn block_max(scores: &[f32]) -> f32 {
    let mut lane_max = [f32::NEG_INFINITY; LANES];
    for (t, &s) in scores.iter().enumerate() {
        lane_max[t % LANES] = max(s, lane_max[t % LANES]);
    }
    tree(lane_max, max)
}

/// Writes the keys of `blk`'s first `tokens` slots transposed into `kt`, 16 tokens to a chunk:
/// dimension `d` of token `16 c + i` at `kt[(c * head_dim + d) * 16 + i]`, zeros past `tokens`
/// (the layout `x86::transpose_keys` writes). Writes nothing and returns `false` when a slot's
/// key lies outside `blk.k` or `kt` is short.
pub(crate) fn transpose_keys(
    blk: BlockView<'_>,
    tokens: usize,
    head_dim: usize,
    kt: &mut [f32],
) -> bool {
    let chunks = tokens.div_ceil(LANES);
    let ok = tokens >= 1
        && blk.k.len() >= (tokens - 1) * blk.stride + head_dim
        && kt.len() >= chunks * LANES * head_dim;
    if ok {
        for (c, kt) in kt
            .chunks_exact_mut(LANES * head_dim)
            .take(chunks)
            .enumerate()
        {
            for (d, lanes) in kt.chunks_exact_mut(LANES).enumerate() {
                for (i, x) in lanes.iter_mut().enumerate() {
                    let t = c * LANES + i;
                    *x = if t < tokens {
                        blk.k[t * blk.stride + d]
                    } else {
                        0.0
                    };
                }
            }
        }
    }
    ok
}

/// Whether `blk` holds keys for `tokens` slots of `head_dim` and `kt_len` floats take them
/// transposed (whole 16-token chunks).
pub(crate) fn transpose_fits(
    blk: BlockView<'_>,
    tokens: usize,
    head_dim: usize,
    kt_len: usize,
) -> bool {
    tokens >= 1
        && blk.k.len() >= (tokens - 1) * blk.stride + head_dim
        && kt_len >= tokens.div_ceil(LANES) * LANES * head_dim
}

/// [`scores`] from the block's keys transposed by [`transpose_keys`] (at least `out.len()`
/// tokens of them): the chains of 16 tokens advance side by side, one token per lane, which
/// the compiler vectorises; same bits.
#[inline]
pub(crate) fn scores_transposed(q: &[f32], kt: &[f32], scale: f32, out: &mut [f32]) -> f32 {
    let (hd, half) = (q.len(), q.len() / 2);
    for (c, out) in out.chunks_mut(LANES).enumerate() {
        let kt = &kt[c * hd * LANES..][..hd * LANES];
        let chain = |dims: std::ops::Range<usize>| {
            let mut acc = [0f32; LANES];
            for d in dims {
                let k = &kt[d * LANES..][..LANES];
                for i in 0..LANES {
                    acc[i] = mul_add(q[d], k[i], acc[i]);
                }
            }
            acc
        };
        let (lo, hi) = (chain(0..half), chain(half..hd));
        for (i, s) in out.iter_mut().enumerate() {
            *s = scale * (lo[i] + hi[i]);
        }
    }
    block_max(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic values in [-1, 1) with a spread of magnitudes, so rounding order shows.
    pub(crate) fn values(n: usize, seed: u32) -> Vec<f32> {
        (0..n)
            .map(|i| {
                ((i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) >> 8) as f32
                    / (1u32 << 23) as f32
                    - 1.0
            })
            .collect()
    }

    #[test]
    fn scores_direct_and_transposed_are_scaled_dots_and_the_max_is_the_largest() {
        for head_dim in [1usize, 7, 16, 40, 64, 72, 128, 136] {
            for (block_size, stride_heads) in [(1usize, 1usize), (5, 2), (16, 3), (33, 1)] {
                let stride = stride_heads * head_dim;
                let k = values(block_size * stride, 7);
                let q = values(head_dim, 11);
                let blk = BlockView {
                    k: &k,
                    v: &k,
                    stride,
                };
                // The transposed keys give the same bits (the portable loops' fast form).
                let mut kt = vec![f32::NAN; block_size.div_ceil(LANES) * LANES * head_dim];
                assert!(transpose_keys(blk, block_size, head_dim, &mut kt));
                let short = BlockView {
                    k: &k[..head_dim],
                    ..blk
                };
                assert!(block_size == 1 || !transpose_keys(short, block_size, head_dim, &mut kt));
                let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                for n in 1..=block_size {
                    let want: Vec<u32> = (0..n)
                        .map(|t| (0.3 * dot(&q, &k[t * stride..][..head_dim])).to_bits())
                        .collect();
                    let (mut got, mut got_t) = (vec![0f32; n], vec![0f32; n]);
                    let m = scores(&q, blk, 0.3, &mut got);
                    let m_t = scores_transposed(&q, &kt, 0.3, &mut got_t);
                    let what = format!("head_dim {head_dim}, block {block_size}, n {n}");
                    assert_eq!(bits(&got), want, "{what}");
                    assert_eq!(bits(&got_t), want, "transposed, {what}");
                    assert_eq!(m_t.to_bits(), m.to_bits(), "transposed max, {what}");
                    assert_eq!(
                        m,
                        got.iter().cloned().fold(f32::NEG_INFINITY, f32::max),
                        "{what}"
                    );
                }
            }
        }
    }

    #[test]
    fn dot_is_close_to_the_exact_sum() {
        for len in [1usize, 7, 8, 9, 16, 17, 64, 80, 127] {
            let (a, b) = (values(len, 1), values(len, 2));
            let want: f64 = a.iter().zip(&b).map(|(&x, &y)| x as f64 * y as f64).sum();
            assert!((dot(&a, &b) as f64 - want).abs() < 1e-5, "len {len}");
        }
    }

    #[test]
    fn the_tree_pairs_lanes_as_documented() {
        // Concatenation shows the pairing: the result spells the tree's shape.
        let v: [f32; LANES] = std::array::from_fn(|i| i as f32);
        let order = std::cell::RefCell::new(Vec::new());
        tree(v, |a, b| {
            order.borrow_mut().push((a, b));
            a + b
        });
        let order = order.into_inner();
        assert_eq!(&order[..3], &[(0.0, 8.0), (1.0, 9.0), (2.0, 10.0)]);
        assert_eq!(order[8], (8.0, 16.0)); // (0 + 8) with (4 + 12)
        assert_eq!(order.len(), 15);
    }
}
