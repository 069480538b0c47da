//! The per-block numerics of paged attention: one query row's partial softmax state over the
//! visible keys of one KV block, and the exact log-sum-exp merge of that partial into the row's
//! running state (flash-decoding, Dao et al. 2023; the merge is FlashAttention's online
//! softmax rescale applied once per block).
//!
//! Invariant (the numerics contract): what `Scratch::attend_block` does to a row's state depends
//! only on the row's `q`, the block's keys/values, the visible-token count `n`, `scale`, the
//! state passed in and `first`; the scratch carries nothing from one call to the next. Every
//! reduction runs in a fixed order:
//! - scores as `scores` specifies; the block max in token order;
//! - `l_b = sum p_t` as 8 lane sums over chunks of 8 tokens plus a fixed tree (`sum8`);
//! - `acc_b[d] = sum p_t v_t[d]` from 0.0 in token order, one `mul_add` per token;
//! - the `merge` formula, evaluated in the order written.
//!
//! Rust never reassociates floats, so LLVM may vectorise these loops but cannot change their
//! results. A caller's obligation is to fold a row's blocks in an order fixed by the row's
//! position alone (`exec` uses fixed segments of blocks, each folded in block order and merged
//! in segment order); then the row's output is the same bits whether its blocks were visited
//! alone, in a shared-prefix group, in a prefill chunk, or on any thread.

use super::scores::{mul_add, scores_direct, LANES};
use crate::math::exp;

/// Floats of an output accumulator held in registers across a block's tokens.
const PANEL: usize = 64;

/// The sum: 8 lane sums over chunks of 8 in order, the remainder into lanes `0..`, then the
/// tree `((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7))`.
#[inline]
fn sum8(xs: &[f32]) -> f32 {
    let mut s = [0f32; 8];
    let (chunks, rest) = xs.as_chunks::<8>();
    for c in chunks {
        for i in 0..8 {
            s[i] += c[i];
        }
    }
    for (i, &x) in rest.iter().enumerate() {
        s[i] += x;
    }
    let s = [s[0] + s[4], s[1] + s[5], s[2] + s[6], s[3] + s[7]];
    (s[0] + s[2]) + (s[1] + s[3])
}

/// One key/value head's slice of one KV block: key `t` is `k[t * stride..][..head_dim]`, where
/// `head_dim` is the query row's length.
#[derive(Clone, Copy)]
pub(crate) struct BlockView<'a> {
    /// Keys from this head's slot-0 vector to the end of the block.
    pub(crate) k: &'a [f32],
    /// Values, same layout as `k`.
    pub(crate) v: &'a [f32],
    /// Elements between consecutive slots (`num_kv_heads * head_dim`).
    pub(crate) stride: usize,
}

/// A query row's running softmax state: max `m`, normaliser `l`, unnormalised output `acc`.
pub(crate) struct RowState<'s> {
    /// Running max of the scores seen so far.
    pub(crate) m: &'s mut f32,
    /// `sum e^(s - m)` over the scores seen so far.
    pub(crate) l: &'s mut f32,
    /// `sum e^(s - m) v` over the keys seen so far (`head_dim` long).
    pub(crate) acc: &'s mut [f32],
}

/// Per-work-item scratch: score buffers and the block partial `acc_b`.
pub(crate) struct Scratch {
    lanes: Vec<[f32; LANES]>,
    tails: Vec<f32>,
    /// Scores, then probabilities `e^(s_t - m_b)`.
    probs: Vec<f32>,
    acc_b: Vec<f32>,
}

impl Scratch {
    /// Scratch for blocks of `block_size` tokens and heads of `head_dim`.
    pub(crate) fn new(block_size: usize, head_dim: usize) -> Self {
        Scratch {
            lanes: vec![[0.0; LANES]; block_size],
            tails: vec![0.0; block_size],
            probs: vec![0.0; block_size],
            acc_b: vec![0.0; head_dim],
        }
    }

    /// Folds the first `n` keys of `blk` (`1 <= n <= block_size`) into row `q`'s state.
    ///
    /// Computes the block partial `s_t = scale * (q . k_t)`, `m_b = max s_t`,
    /// `l_b = sum e^(s_t - m_b)`, `acc_b = sum e^(s_t - m_b) v_t`; with `first` it becomes the
    /// state, otherwise it is folded in by `merge`.
    #[inline]
    pub(crate) fn attend_block(
        &mut self,
        q: &[f32],
        blk: BlockView<'_>,
        n: usize,
        scale: f32,
        first: bool,
        state: RowState<'_>,
    ) {
        let probs = &mut self.probs[..n];
        let m_b = scores_direct(q, blk, scale, &mut self.lanes, &mut self.tails, probs);
        for s in probs.iter_mut() {
            *s = exp(*s - m_b);
        }
        let l_b = sum8(probs);
        let acc_b = &mut self.acc_b[..];
        pv(probs, blk, acc_b);
        if first {
            *state.m = m_b;
            *state.l = l_b;
            state.acc.copy_from_slice(acc_b);
        } else {
            merge(state, m_b, l_b, acc_b);
        }
    }
}

/// Merges the partial state `(m_b, l_b, acc_b)` (of later keys) into `state` exactly:
/// `M' = max(M, m_b)`, `a = e^(M - M')`, `b = e^(m_b - M')`, `L' = L a + l_b b`,
/// `ACC' = ACC a + acc_b b`, evaluated in this order.
#[inline]
pub(crate) fn merge(state: RowState<'_>, m_b: f32, l_b: f32, acc_b: &[f32]) {
    let m_new = if m_b > *state.m { m_b } else { *state.m };
    let (a, b) = (exp(*state.m - m_new), exp(m_b - m_new));
    *state.m = m_new;
    *state.l = *state.l * a + l_b * b;
    for (acc, &ab) in state.acc.iter_mut().zip(acc_b) {
        *acc = *acc * a + ab * b;
    }
}

/// `acc_b = sum_t probs[t] * v_t`, each element accumulated over `t` in order from zero; heads
/// are done in 64-float panels that stay in registers across the tokens.
#[inline]
fn pv(probs: &[f32], blk: BlockView<'_>, acc_b: &mut [f32]) {
    let len = acc_b.len();
    let (panels, rest) = acc_b.as_chunks_mut::<PANEL>();
    for (c, panel) in panels.iter_mut().enumerate() {
        let mut acc = [0f32; PANEL];
        for (t, &p) in probs.iter().enumerate() {
            let v = &blk.v[t * blk.stride + c * PANEL..][..PANEL];
            for i in 0..PANEL {
                acc[i] = mul_add(p, v[i], acc[i]);
            }
        }
        *panel = acc;
    }
    let done = len - rest.len();
    rest.fill(0.0);
    for (t, &p) in probs.iter().enumerate() {
        let v = &blk.v[t * blk.stride + done..][..rest.len()];
        for (a, &v) in rest.iter_mut().zip(v) {
            *a = mul_add(p, v, *a);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::scores::dot;

    /// The plain loops the fast block code must equal bitwise: `dot`, token-order sums.
    fn attend_slow(
        q: &[f32],
        blk: BlockView<'_>,
        n: usize,
        scale: f32,
        first: bool,
        st: (&mut f32, &mut f32, &mut [f32]),
    ) {
        let hd = q.len();
        let s: Vec<f32> = (0..n)
            .map(|t| scale * dot(q, &blk.k[t * blk.stride..][..hd]))
            .collect();
        let m_b = s
            .iter()
            .fold(f32::NEG_INFINITY, |m, &x| if x > m { x } else { m });
        let p: Vec<f32> = s.iter().map(|&x| exp(x - m_b)).collect();
        let l_b = sum8(&p);
        let acc_b: Vec<f32> = (0..hd)
            .map(|d| {
                p.iter()
                    .enumerate()
                    .fold(0.0, |a, (t, &pt)| mul_add(pt, blk.v[t * blk.stride + d], a))
            })
            .collect();
        let (m, l, acc) = st;
        if first {
            (*m, *l) = (m_b, l_b);
            acc.copy_from_slice(&acc_b);
            return;
        }
        let m_new = if m_b > *m { m_b } else { *m };
        let (a, b) = (exp(*m - m_new), exp(m_b - m_new));
        (*m, *l) = (m_new, *l * a + l_b * b);
        for (x, &y) in acc.iter_mut().zip(&acc_b) {
            *x = *x * a + y * b;
        }
    }

    #[test]
    fn attend_block_is_bitwise_the_plain_loops() {
        let val = |i: usize, s: usize| ((i * 7919 + s * 104_729) % 2003) as f32 / 1001.5 - 1.0;
        for head_dim in [8usize, 40, 64, 72, 128] {
            let (bs, stride) = (16usize, 2 * head_dim);
            let k: Vec<f32> = (0..2 * bs * stride).map(|i| 2.0 * val(i, 1)).collect();
            let v: Vec<f32> = (0..2 * bs * stride).map(|i| val(i, 2)).collect();
            let q: Vec<f32> = (0..head_dim).map(|i| val(i, 3)).collect();
            let mut scratch = Scratch::new(bs, head_dim);
            let mut fast = (0f32, 0f32, vec![0f32; head_dim]);
            let mut slow = (0f32, 0f32, vec![0f32; head_dim]);
            for (b, n) in [(0usize, 16usize), (1, 5)] {
                let blk = BlockView {
                    k: &k[b * bs * stride..],
                    v: &v[b * bs * stride..],
                    stride,
                };
                let state = RowState {
                    m: &mut fast.0,
                    l: &mut fast.1,
                    acc: &mut fast.2,
                };
                scratch.attend_block(&q, blk, n, 0.35, b == 0, state);
                attend_slow(
                    &q,
                    blk,
                    n,
                    0.35,
                    b == 0,
                    (&mut slow.0, &mut slow.1, &mut slow.2),
                );
            }
            let bits = |st: &(f32, f32, Vec<f32>)| {
                (
                    st.0.to_bits(),
                    st.1.to_bits(),
                    st.2.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                )
            };
            assert_eq!(bits(&fast), bits(&slow), "head_dim {head_dim}");
        }
    }

    #[test]
    fn merging_two_blocks_equals_one_softmax() {
        let (hd, n) = (4usize, 6usize);
        let k: Vec<f32> = (0..n * hd)
            .map(|i| ((i * 7 % 13) as f32 - 6.0) * 0.3)
            .collect();
        let v: Vec<f32> = (0..n * hd)
            .map(|i| ((i * 5 % 11) as f32 - 5.0) * 0.2)
            .collect();
        let q = [0.5f32, -1.0, 2.0, 0.25];
        let (mut m, mut l, mut acc) = (0f32, 0f32, vec![0f32; hd]);
        let mut scratch = Scratch::new(3, hd);
        for half in 0..2 {
            let view = BlockView {
                k: &k[half * 3 * hd..],
                v: &v[half * 3 * hd..],
                stride: hd,
            };
            let state = RowState {
                m: &mut m,
                l: &mut l,
                acc: &mut acc,
            };
            scratch.attend_block(&q, view, 3, 0.7, half == 0, state);
        }
        let s: Vec<f64> = (0..n)
            .map(|t| {
                0.7 * (0..hd)
                    .map(|d| q[d] as f64 * k[t * hd + d] as f64)
                    .sum::<f64>()
            })
            .collect();
        let mx = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let p: Vec<f64> = s.iter().map(|x| (x - mx).exp()).collect();
        let sum: f64 = p.iter().sum();
        for d in 0..hd {
            let want: f64 = (0..n).map(|t| p[t] * v[t * hd + d] as f64).sum::<f64>() / sum;
            assert!((acc[d] as f64 / l as f64 - want).abs() < 1e-6, "dim {d}");
        }
    }
}
