//! Attention scores `s_t = scale * (q . k_t)` for the tokens of one KV block, in the one
//! summation order the numerics contract fixes.
//!
//! The order, as `dot` spells it out: lane `i` (0..8) starts at 0.0 and accumulates
//! `mul_add(q[8c + i], k[8c + i], lane_i)` for chunks `c = 0, 1, ...` in order; the lanes are
//! summed by the fixed tree `((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7))`; the tail
//! (`head_dim % 8`) is a sequential `mul_add` chain from 0.0, added last; then `scale *`.
//! `scores_direct` computes exactly this for every token of a block, arranged for speed (the
//! query in registers in 64-float panels, lane sums for all tokens first, then the trees) and
//! is tested bitwise against `dot`.
//!
//! Rust neither reassociates nor contracts float operations, so vectorisation cannot change
//! the result. `mul_add` is a fused multiply-add exactly when the build targets FMA hardware
//! (a compile-time choice: one build, one order).
//!
//! Tried and dropped: a vector-over-tokens kernel on keys transposed once per block (the
//! textbook matrix-matrix form, same bits by construction). With auto-vectorisation only, its
//! broadcasts and the transpose cost more than the horizontal trees it saves: 5-15% slower
//! on the 16-branch decode bench, so sweeping an L1-resident block row by row stays.

use super::block::BlockView;

/// Lane accumulators per dot product (one AVX2 vector).
pub(crate) const LANES: usize = 8;

/// Floats of a query row held in registers across a block's tokens in `scores_direct`.
const PANEL: usize = 64;

/// `a * b + c`, fused (one rounding) where the build targets FMA hardware, else two roundings.
///
/// Fixed at compile time, so within one build every caller gets the same bits (`f32::mul_add`
/// without hardware FMA would be a slow libm call).
#[inline(always)]
pub(crate) fn mul_add(a: f32, b: f32, c: f32) -> f32 {
    #[cfg(any(target_feature = "fma", target_arch = "aarch64"))]
    {
        a.mul_add(b, c)
    }
    #[cfg(not(any(target_feature = "fma", target_arch = "aarch64")))]
    {
        a * b + c
    }
}

/// The fixed lane tree: lanes `i` and `i + 4`, then `i` and `i + 2`, then 0 and 1.
#[inline(always)]
fn reduce_lanes(v: [f32; LANES]) -> f32 {
    let v = [v[0] + v[4], v[1] + v[5], v[2] + v[6], v[3] + v[7]];
    (v[0] + v[2]) + (v[1] + v[3])
}

/// `q . k` in the contract's order: its plain statement, which `scores_direct` must match.
#[cfg(test)]
pub(crate) fn dot(q: &[f32], k: &[f32]) -> f32 {
    let mut lanes = [0f32; LANES];
    let (qc, q_tail) = q.as_chunks::<LANES>();
    let (kc, k_tail) = k.as_chunks::<LANES>();
    for (x, y) in qc.iter().zip(kc) {
        for i in 0..LANES {
            lanes[i] = mul_add(x[i], y[i], lanes[i]);
        }
    }
    let mut tail = 0f32;
    for (&x, &y) in q_tail.iter().zip(k_tail) {
        tail = mul_add(x, y, tail);
    }
    reduce_lanes(lanes) + tail
}

/// Scores of row `q` against the first `out.len()` keys of `blk`, written to `out`; returns
/// their maximum (`-inf` for none). `lanes` and `tails` are scratch, at least `out.len()` long.
#[inline]
pub(crate) fn scores_direct(
    q: &[f32],
    blk: BlockView<'_>,
    scale: f32,
    lanes: &mut [[f32; LANES]],
    tails: &mut [f32],
    out: &mut [f32],
) -> f32 {
    let n = out.len();
    let (lanes, tails) = (&mut lanes[..n], &mut tails[..n]);
    // Panels of the query stay in registers across the tokens; lanes park in memory between.
    let (q_panels, q_rest) = q.as_chunks::<PANEL>();
    for (c, panel) in q_panels.iter().enumerate() {
        let (qc, _) = panel.as_chunks::<LANES>();
        let key = |t: usize| blk.k[t * blk.stride + c * PANEL..][..PANEL].as_chunks::<LANES>().0;
        // Four tokens at a time: four independent FMA chains in flight instead of one chain
        // whose every step waits for the last (each token's lanes still accumulate in chunk
        // order, so the bits are the same).
        let (quads, rest) = lanes.as_chunks_mut::<4>();
        for (u, quad) in quads.iter_mut().enumerate() {
            let t = 4 * u;
            let (k0, k1, k2, k3) = (key(t), key(t + 1), key(t + 2), key(t + 3));
            let mut acc = if c == 0 { [[0.0; LANES]; 4] } else { *quad };
            for (j, x) in qc.iter().enumerate() {
                for i in 0..LANES {
                    acc[0][i] = mul_add(x[i], k0[j][i], acc[0][i]);
                    acc[1][i] = mul_add(x[i], k1[j][i], acc[1][i]);
                    acc[2][i] = mul_add(x[i], k2[j][i], acc[2][i]);
                    acc[3][i] = mul_add(x[i], k3[j][i], acc[3][i]);
                }
            }
            *quad = acc;
        }
        let done_tokens = 4 * quads.len();
        for (t, lane_t) in rest.iter_mut().enumerate() {
            let kc = key(done_tokens + t);
            let mut acc = if c == 0 { [0.0; LANES] } else { *lane_t };
            for (x, y) in qc.iter().zip(kc) {
                for i in 0..LANES {
                    acc[i] = mul_add(x[i], y[i], acc[i]);
                }
            }
            *lane_t = acc;
        }
    }
    let done = q_panels.len() * PANEL;
    let (q_chunks, q_tail) = q_rest.as_chunks::<LANES>();
    if q_rest.is_empty() {
        tails.fill(0.0);
    } else {
        for (t, (lane_t, tail_t)) in lanes.iter_mut().zip(tails.iter_mut()).enumerate() {
            let (kc, k_tail) = blk.k[t * blk.stride + done..][..q_rest.len()].as_chunks::<LANES>();
            let mut acc = if done == 0 { [0.0; LANES] } else { *lane_t };
            for (x, y) in q_chunks.iter().zip(kc) {
                for i in 0..LANES {
                    acc[i] = mul_add(x[i], y[i], acc[i]);
                }
            }
            *lane_t = acc;
            let mut tail = 0f32;
            for (&x, &y) in q_tail.iter().zip(k_tail) {
                tail = mul_add(x, y, tail);
            }
            *tail_t = tail;
        }
    }
    // The running max in the same loop also keeps LLVM from vectorising the trees across
    // tokens with gathers, which are several times slower than the in-register tree.
    let mut max = f32::NEG_INFINITY;
    for ((s, lane), &tail) in out.iter_mut().zip(lanes.iter()).zip(tails.iter()) {
        *s = scale * (reduce_lanes(*lane) + tail);
        max = if *s > max { *s } else { max };
    }
    max
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic values in [-1, 1) with a spread of magnitudes, so rounding order shows.
    fn values(n: usize, seed: u32) -> Vec<f32> {
        (0..n)
            .map(|i| {
                ((i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) >> 8) as f32
                    / (1u32 << 23) as f32
                    - 1.0
            })
            .collect()
    }

    #[test]
    fn scores_direct_is_dot_bitwise_for_every_head_and_token_count() {
        for head_dim in [1usize, 7, 8, 40, 64, 72, 100, 128, 136] {
            for (block_size, stride_heads) in [(1usize, 1usize), (5, 2), (16, 3), (17, 1)] {
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
                    let (mut lanes, mut tails) = (vec![[0.0; LANES]; n], vec![0.0; n]);
                    let mut direct = vec![0f32; n];
                    let max = scores_direct(&q, blk, 0.3, &mut lanes, &mut tails, &mut direct);
                    let what = format!("head_dim {head_dim}, block {block_size}, n {n}");
                    assert_eq!(
                        direct.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                        want,
                        "{what}"
                    );
                    assert_eq!(
                        max,
                        direct.iter().cloned().fold(f32::NEG_INFINITY, f32::max),
                        "{what}"
                    );
                }
            }
        }
    }

    #[test]
    fn dot_is_close_to_the_exact_sum() {
        for len in [1usize, 7, 8, 9, 64, 80, 127] {
            let (a, b) = (values(len, 1), values(len, 2));
            let want: f64 = a.iter().zip(&b).map(|(&x, &y)| x as f64 * y as f64).sum();
            assert!((dot(&a, &b) as f64 - want).abs() < 1e-5, "len {len}");
        }
    }
}
