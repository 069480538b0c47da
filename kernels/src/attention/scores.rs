//! Attention scores `s_t = scale * (q . k_t)` for the tokens of one KV block, in the one
//! summation order the numerics contract fixes, and the 16-lane reduction tree that order (and
//! the block's max and sum, see `block`) is written in.
//!
//! The order, as `dot` spells it out: lane `i` (0..16) starts at +0.0 and accumulates
//! `mul_add(q[d], k[d], lane_i)` for `d = i, i + 16, i + 32, ...` in increasing `d`; the lanes
//! are combined by `tree` (lane `i` with `i + 8`, then `i + 4`, `i + 2`, `i + 1`); then
//! `scale *`. One AVX-512 vector holds the 16 lanes, so the vector kernel (`x86`) accumulates
//! a token's dot product without a horizontal step per token and reduces 16 tokens' vectors
//! together with one transposing tree; `scores` here is the portable statement of the same
//! arithmetic, and the two are tested bitwise equal.
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

/// `q . k` in the contract's order: its plain statement, which the kernels must match.
#[cfg(test)]
pub(crate) fn dot(q: &[f32], k: &[f32]) -> f32 {
    tree(lane_dot(q, k), |a, b| a + b)
}

/// The 16 lane sums of `q . k` before the tree: lane `i` accumulates `q[d] * k[d]` for
/// `d = i, i + 16, ...` in order, from +0.0.
#[inline]
fn lane_dot(q: &[f32], k: &[f32]) -> [f32; LANES] {
    let mut lanes = [0f32; LANES];
    let (qc, q_tail) = q.as_chunks::<LANES>();
    let (kc, k_tail) = k.as_chunks::<LANES>();
    for (x, y) in qc.iter().zip(kc) {
        for i in 0..LANES {
            lanes[i] = mul_add(x[i], y[i], lanes[i]);
        }
    }
    // The tail starts at a multiple of 16: element `i` belongs to lane `i`.
    for (i, (&x, &y)) in q_tail.iter().zip(k_tail).enumerate() {
        lanes[i] = mul_add(x, y, lanes[i]);
    }
    lanes
}

/// Scores of row `q` against the first `out.len()` keys of `blk`, written to `out`; returns
/// their maximum in the contract's order: lane `t % 16` keeps the running `max` of tokens
/// `t, t + 16, ...` from `-inf`, then `tree` with `max` (`-inf` for no tokens). `lanes` is
/// scratch, at least `out.len()` long.
///
/// Two passes: every token's 16 lane sums first, four tokens at a time (four independent
/// chains in flight; each token's lanes still accumulate in `d` order, so the bits are
/// `dot`'s), then each token's tree, with the running max in the same loop, which keeps LLVM
/// from vectorising the trees across tokens with shuffles that cost more than they save.
#[inline]
pub(crate) fn scores(
    q: &[f32],
    blk: BlockView<'_>,
    scale: f32,
    lanes: &mut [[f32; LANES]],
    out: &mut [f32],
) -> f32 {
    let (hd, n) = (q.len(), out.len());
    let lanes = &mut lanes[..n];
    let key = |t: usize| blk.k[t * blk.stride..][..hd].as_chunks::<LANES>();
    let (qc, q_tail) = q.as_chunks::<LANES>();
    let (quads, rest) = lanes.as_chunks_mut::<4>();
    for (u, quad) in quads.iter_mut().enumerate() {
        let keys: [(&[[f32; LANES]], &[f32]); 4] = std::array::from_fn(|j| key(4 * u + j));
        let mut acc = [[0f32; LANES]; 4];
        for (c, x) in qc.iter().enumerate() {
            let (k0, k1, k2, k3) = (&keys[0].0[c], &keys[1].0[c], &keys[2].0[c], &keys[3].0[c]);
            for i in 0..LANES {
                acc[0][i] = mul_add(x[i], k0[i], acc[0][i]);
                acc[1][i] = mul_add(x[i], k1[i], acc[1][i]);
                acc[2][i] = mul_add(x[i], k2[i], acc[2][i]);
                acc[3][i] = mul_add(x[i], k3[i], acc[3][i]);
            }
        }
        for (acc, (_, k_tail)) in acc.iter_mut().zip(&keys) {
            for (i, (&x, &y)) in q_tail.iter().zip(k_tail.iter()).enumerate() {
                acc[i] = mul_add(x, y, acc[i]);
            }
        }
        *quad = acc;
    }
    let base = 4 * quads.len();
    for (j, lane) in rest.iter_mut().enumerate() {
        *lane = lane_dot(q, &blk.k[(base + j) * blk.stride..][..hd]);
    }
    let mut lane_max = [f32::NEG_INFINITY; LANES];
    for (t, (s, lane)) in out.iter_mut().zip(lanes.iter()).enumerate() {
        *s = scale * tree(*lane, |a, b| a + b);
        lane_max[t % LANES] = max(*s, lane_max[t % LANES]);
    }
    tree(lane_max, max)
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
    fn scores_are_scaled_dots_and_the_max_is_the_largest() {
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
                for n in 1..=block_size {
                    let want: Vec<u32> = (0..n)
                        .map(|t| (0.3 * dot(&q, &k[t * stride..][..head_dim])).to_bits())
                        .collect();
                    let mut got = vec![0f32; n];
                    let mut lanes = vec![[0f32; LANES]; n];
                    let m = scores(&q, blk, 0.3, &mut lanes, &mut got);
                    let what = format!("head_dim {head_dim}, block {block_size}, n {n}");
                    assert_eq!(
                        got.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                        want,
                        "{what}"
                    );
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
