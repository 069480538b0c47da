//! The per-block numerics of paged attention: one query row's partial softmax state over the
//! visible keys of one KV block, and the exact log-sum-exp merge of that partial into the row's
//! running state (flash-decoding, Dao et al. 2023; the merge is FlashAttention's online
//! softmax rescale applied once per block).
//!
//! Invariant (the numerics contract): what `Scratch::attend_rows` does to a row's state depends
//! only on the row's `q`, the block's keys/values, the visible-token count `n`, `scale`, the
//! state passed in and `first`; not on the other rows of the tile, and the scratch carries
//! nothing from one call to the next. Every reduction runs in a fixed order, written over 16
//! lanes (lane `i` takes tokens `i, i + 16, ...` in order) and finished by `math::tree`:
//! - scores and their max `m_b` as `scores` specifies;
//! - `p_t = exp(s_t - m_b)` (`math::exp`), `l_b = math::sum(p)` (16 lane sums from +0.0, then
//!   the tree);
//! - `acc_b[d] = sum p_t v_t[d]` from +0.0 in token order, one `mul_add` per token;
//! - the `merge` formula, evaluated in the order written.
//!
//! Three implementations compute exactly this: the AVX-512 kernel (`x86`, used when the CPU
//! has AVX-512F and `head_dim` is 64 or 128, a property of the model, so one model always
//! takes one path), which works on a tile of rows at once so that their dependency chains
//! overlap and each value vector is loaded once per tile; its wide twin (`wide`,
//! `Scratch::attend_wide`) for 16 to 48 rows that all see a block in full; and the portable
//! loops here, row by row. They are tested bitwise equal on FMA builds.
//!
//! Rust never reassociates floats, so LLVM may vectorise these loops but cannot change their
//! results. A caller's obligation is to fold a row's blocks in an order fixed by the row's
//! position alone (`exec` uses fixed segments of blocks, each folded in block order and merged
//! in segment order); then the row's output is the same bits whether its blocks were visited
//! alone, in a shared-prefix group, in a prefill chunk, in any tile, or on any thread.

use super::scores::{mul_add, scores, scores_transposed, transpose_keys, LANES};
#[cfg(target_arch = "x86_64")]
use super::{wide, x86};
use crate::math::{self, exp};

/// Floats of an output accumulator held in registers across a block's tokens.
const PANEL: usize = 64;

/// Most rows one `attend_rows` call takes.
pub(crate) const MAX_TILE: usize = 8;

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

/// The states of a tile of rows, row `r` at `m[r]`, `l[r]`, `acc[r * head_dim..][..head_dim]`.
pub(crate) struct TileStates<'s> {
    /// Running maxima.
    pub(crate) m: &'s mut [f32],
    /// Normalisers.
    pub(crate) l: &'s mut [f32],
    /// Unnormalised outputs, `m.len() * head_dim`.
    pub(crate) acc: &'s mut [f32],
}

/// Per-work-item scratch: the block's scores and probabilities, the block partial `acc_b`,
/// and which kernel runs.
pub(crate) struct Scratch {
    /// Scores, then probabilities `e^(s_t - m_b)`: `MAX_TILE` rows of a whole number of
    /// 16-token chunks.
    probs: Vec<f32>,
    /// Floats per row in `probs`.
    probs_row: usize,
    acc_b: Vec<f32>,
    /// Tokens per block.
    block_size: usize,
    /// The keys of one block, transposed (`scores::transpose_keys`, or its AVX-512 twin), and
    /// the block they are of: its keys' address, slot stride and slot count. A scratch lives
    /// for one attention call, during which the cache does not change, so the address names
    /// the contents.
    kt: Vec<f32>,
    kt_of: Option<(usize, usize, usize)>,
    /// Scores and probabilities of the wide kernel's rows (`wide`), allocated on first use.
    #[cfg(target_arch = "x86_64")]
    wide_probs: Vec<f32>,
    /// The AVX-512 kernel, when the CPU and the head size allow it.
    #[cfg(target_arch = "x86_64")]
    avx512: Option<x86::Avx512>,
}

impl Scratch {
    /// Scratch for blocks of `block_size` tokens and heads of `head_dim`.
    pub(crate) fn new(block_size: usize, head_dim: usize) -> Self {
        let probs_row = block_size.div_ceil(LANES) * LANES;
        Scratch {
            probs: vec![0.0; MAX_TILE * probs_row],
            probs_row,
            acc_b: vec![0.0; head_dim],
            block_size,
            kt: vec![0.0; probs_row * head_dim],
            kt_of: None,
            #[cfg(target_arch = "x86_64")]
            wide_probs: Vec::new(),
            #[cfg(target_arch = "x86_64")]
            avx512: x86::Avx512::detect().filter(|_| x86::fits(head_dim)),
        }
    }

    /// Scratch that always runs the portable loops (the bitwise tests' other side).
    #[cfg(test)]
    pub(crate) fn portable(block_size: usize, head_dim: usize) -> Self {
        Scratch {
            #[cfg(target_arch = "x86_64")]
            avx512: None,
            ..Scratch::new(block_size, head_dim)
        }
    }

    /// Whether this scratch runs the AVX-512 kernel.
    #[cfg(test)]
    pub(crate) fn is_vector(&self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            self.avx512.is_some()
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }

    /// Folds the first `n` keys of `blk` (`1 <= n <= block_size`) into the state of each row
    /// `qs[r]` (at most `MAX_TILE` rows, all `head_dim` long).
    ///
    /// Per row: the block partial `s_t = scale * (q . k_t)`, `m_b = max s_t`,
    /// `l_b = sum e^(s_t - m_b)`, `acc_b = sum e^(s_t - m_b) v_t`; with `first` it becomes the
    /// state, otherwise it is folded in by `merge`.
    #[inline]
    pub(crate) fn attend_rows(
        &mut self,
        qs: &[&[f32]],
        blk: BlockView<'_>,
        n: usize,
        scale: f32,
        first: bool,
        states: TileStates<'_>,
    ) {
        #[cfg(target_arch = "x86_64")]
        if let Some(token) = self.avx512.filter(|_| self.transposed(blk, n)) {
            let tile = x86::Tile {
                qs,
                blk,
                kt: &self.kt,
                n,
                scale,
                first,
                probs: &mut self.probs,
                probs_row: self.probs_row,
            };
            // Hands `states` back only for sizes the kernel does not take (never for the
            // `head_dim` and `block_size` this scratch was made for).
            let Err(states) = x86::attend_rows(token, tile, states) else {
                return;
            };
            return self.attend_portable(qs, blk, n, scale, first, states);
        }
        self.attend_portable(qs, blk, n, scale, first, states)
    }

    /// Whether `kt` holds `blk`'s keys, at least `n` of them, transposing them first when it
    /// holds another block's (every slot the view reaches, up to the block size, so one
    /// transpose serves every row of the block whatever it sees).
    fn transposed(&mut self, blk: BlockView<'_>, n: usize) -> bool {
        let hd = self.acc_b.len();
        let slots = match blk.k.len().checked_sub(hd) {
            Some(rest) if blk.stride > 0 => (rest / blk.stride + 1).min(self.block_size),
            _ => 0,
        };
        let key = (blk.k.as_ptr() as usize, blk.stride, slots);
        if n > slots {
            return false;
        }
        if self.kt_of != Some(key) {
            #[cfg(target_arch = "x86_64")]
            let done = match self.avx512 {
                Some(token) => x86::transpose_keys(token, blk, slots, hd, &mut self.kt),
                None => transpose_keys(blk, slots, hd, &mut self.kt),
            };
            #[cfg(not(target_arch = "x86_64"))]
            let done = transpose_keys(blk, slots, hd, &mut self.kt);
            self.kt_of = done.then_some(key);
        }
        self.kt_of == Some(key)
    }

    /// Whether [`Self::attend_wide`] can run here (AVX-512, a head of 64 or 128 floats and
    /// blocks of whole 16-token chunks): then it is worth transposing queries for it.
    pub(crate) fn has_wide(&self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            self.avx512.is_some() && self.block_size.is_multiple_of(LANES)
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }

    /// Folds the first `n` keys of `blk`, visible to every row, into the states of `groups`
    /// vectors of 16 rows whose queries `qt` holds transposed (`wide::transpose_queries`):
    /// what [`Self::attend_rows`] does to each of them, with the same bits (`wide`). Gives
    /// `states` back when the wide kernel does not apply (no AVX-512, `n` not a multiple of
    /// 16, sizes it does not take); the caller then runs the rows through `attend_rows`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn attend_wide<'s>(
        &mut self,
        qt: &[f32],
        groups: usize,
        blk: BlockView<'_>,
        n: usize,
        scale: f32,
        first: bool,
        states: TileStates<'s>,
        between: &mut dyn FnMut(),
    ) -> Result<(), TileStates<'s>> {
        #[cfg(target_arch = "x86_64")]
        if let Some(token) = self.avx512 {
            let floats = n.saturating_mul(wide::MAX_ROWS);
            if self.wide_probs.len() < floats {
                self.wide_probs.resize(floats, 0.0);
            }
            let tile = wide::WideTile {
                qt,
                groups,
                blk,
                n,
                scale,
                first,
                probs: &mut self.wide_probs,
                between,
            };
            return wide::attend_wide(token, tile, states);
        }
        let _ = (qt, groups, blk, n, scale, first, between);
        Err(states)
    }

    /// The portable loops of `attend_rows`, row by row.
    fn attend_portable(
        &mut self,
        qs: &[&[f32]],
        blk: BlockView<'_>,
        n: usize,
        scale: f32,
        first: bool,
        states: TileStates<'_>,
    ) {
        let hd = self.acc_b.len();
        let transposed = self.transposed(blk, n);
        let rows = states.m.iter_mut().zip(states.l.iter_mut());
        for ((q, (m, l)), acc) in qs.iter().zip(rows).zip(states.acc.chunks_exact_mut(hd)) {
            let probs = &mut self.probs[..n];
            let m_b = if transposed {
                scores_transposed(q, &self.kt, scale, probs)
            } else {
                scores(q, blk, scale, probs)
            };
            for s in probs.iter_mut() {
                *s = exp(*s - m_b);
            }
            let l_b = math::sum(probs);
            let acc_b = &mut self.acc_b[..];
            pv(probs, blk, acc_b);
            if first {
                *m = m_b;
                *l = l_b;
                acc.copy_from_slice(acc_b);
            } else {
                merge(RowState { m, l, acc }, m_b, l_b, acc_b);
            }
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

/// `acc_b = sum_t probs[t] * v_t`, each element accumulated over `t` in order from +0.0; heads
/// are done in 64-float panels that stay in registers across the tokens.
#[inline]
fn pv(probs: &[f32], blk: BlockView<'_>, acc_b: &mut [f32]) {
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
    let done = panels.len() * PANEL;
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
        // Order-free here: the test data has no ties of +0 and -0 and no NaN.
        let p: Vec<f32> = s.iter().map(|&x| exp(x - m_b)).collect();
        let l_b = math::sum(&p);
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

    /// Rows' states: `(m, l, acc)` for `rows` rows of `head_dim`.
    type States = (Vec<f32>, Vec<f32>, Vec<f32>);

    fn tile(st: &mut States) -> TileStates<'_> {
        TileStates {
            m: &mut st.0,
            l: &mut st.1,
            acc: &mut st.2,
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_wide_kernel_gives_every_row_the_portable_bits() {
        // Without FMA the portable side rounds twice; without AVX-512 there is no wide kernel.
        if !cfg!(target_feature = "fma") || !Scratch::new(16, 64).has_wide() {
            return;
        }
        let val = |i: usize, s: usize| ((i * 7919 + s * 104_729) % 2003) as f32 / 1001.5 - 1.0;
        for head_dim in [64usize, 128] {
            for bs in [16usize, 32] {
                let stride = 3 * head_dim;
                let k: Vec<f32> = (0..3 * bs * stride).map(|i| 2.0 * val(i, 1)).collect();
                let v: Vec<f32> = (0..3 * bs * stride).map(|i| val(i, 2)).collect();
                let blk = |b: usize| BlockView {
                    k: &k[b * bs * stride + head_dim..],
                    v: &v[b * bs * stride + head_dim..],
                    stride,
                };
                for groups in 1..=wide::MAX_GROUPS {
                    let rows = groups * LANES;
                    let qs: Vec<Vec<f32>> = (0..rows)
                        .map(|r| (0..head_dim).map(|i| 1.5 * val(i, 3 + r)).collect())
                        .collect();
                    let q_refs: Vec<&[f32]> = qs.iter().map(|q| &q[..]).collect();
                    let mut qt = Vec::new();
                    wide::transpose_queries(&q_refs, head_dim, &mut qt);
                    // Three blocks: `first`, then two merges (the last with a larger maximum).
                    let blocks = [(0usize, 0.35f32), (1, 0.35), (2, 0.9)];
                    let mut portable = Scratch::portable(bs, head_dim);
                    let mut want: States =
                        (vec![0.0; rows], vec![0.0; rows], vec![0.0; rows * head_dim]);
                    let mut scratch = Scratch::new(bs, head_dim);
                    let mut got: States =
                        (vec![0.0; rows], vec![0.0; rows], vec![0.0; rows * head_dim]);
                    for (j, &(b, scale)) in blocks.iter().enumerate() {
                        for r0 in (0..rows).step_by(MAX_TILE) {
                            let r1 = (r0 + MAX_TILE).min(rows);
                            let states = TileStates {
                                m: &mut want.0[r0..r1],
                                l: &mut want.1[r0..r1],
                                acc: &mut want.2[r0 * head_dim..r1 * head_dim],
                            };
                            portable.attend_rows(
                                &q_refs[r0..r1],
                                blk(b),
                                bs,
                                scale,
                                j == 0,
                                states,
                            );
                        }
                        let done = scratch.attend_wide(
                            &qt,
                            groups,
                            blk(b),
                            bs,
                            scale,
                            j == 0,
                            tile(&mut got),
                            &mut || (),
                        );
                        assert!(
                            done.is_ok(),
                            "the wide kernel took head_dim {head_dim}, groups {groups}"
                        );
                    }
                    let bits = |x: &[f32]| x.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    let what = format!("head_dim {head_dim}, block {bs}, groups {groups}");
                    assert_eq!(bits(&got.0), bits(&want.0), "m: {what}");
                    assert_eq!(bits(&got.1), bits(&want.1), "l: {what}");
                    assert_eq!(bits(&got.2), bits(&want.2), "acc: {what}");
                }
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_wide_kernel_refuses_what_it_does_not_take() {
        let mut scratch = Scratch::new(16, 64);
        if !scratch.has_wide() {
            return;
        }
        let (k, qt) = (vec![0.5f32; 16 * 64], vec![0.25f32; 48 * 64]);
        let blk = BlockView {
            k: &k,
            v: &k,
            stride: 64,
        };
        let mut takes = |groups: usize, n: usize, rows: usize| {
            let mut st: States = (vec![0.0; rows], vec![0.0; rows], vec![0.0; rows * 64]);
            let call =
                scratch.attend_wide(&qt, groups, blk, n, 1.0, true, tile(&mut st), &mut || ());
            call.is_ok()
        };
        assert!(!takes(1, 15, 16), "15 visible tokens: a partial chunk");
        assert!(!takes(4, 16, 16), "4 groups");
        assert!(!takes(1, 16, 8), "states that are not 16 rows");
        assert!(!takes(1, 32, 16), "32 tokens from a view that holds 16");
        assert!(takes(1, 16, 16));
    }

    #[test]
    fn every_row_of_a_tile_is_bitwise_the_plain_loops() {
        let val = |i: usize, s: usize| ((i * 7919 + s * 104_729) % 2003) as f32 / 1001.5 - 1.0;
        for head_dim in [8usize, 16, 40, 64, 72, 128, 144] {
            for bs in [16usize, 5, 33] {
                let stride = 2 * head_dim;
                let k: Vec<f32> = (0..2 * bs * stride).map(|i| 2.0 * val(i, 1)).collect();
                let v: Vec<f32> = (0..2 * bs * stride).map(|i| val(i, 2)).collect();
                let qs: Vec<Vec<f32>> = (0..MAX_TILE)
                    .map(|r| (0..head_dim).map(|i| val(i, 3 + r)).collect())
                    .collect();
                let blk = |b: usize| BlockView {
                    k: &k[b * bs * stride..],
                    v: &v[b * bs * stride..],
                    stride,
                };
                // Block 0 in full, then block 1 partly and in full: `first`, then two merges.
                let blocks = [(0usize, bs), (1, bs.min(5)), (1, bs)];
                let slow: Vec<(f32, f32, Vec<f32>)> = qs
                    .iter()
                    .map(|q| {
                        let mut st = (0f32, 0f32, vec![0f32; head_dim]);
                        for (j, &(b, n)) in blocks.iter().enumerate() {
                            attend_slow(
                                q,
                                blk(b),
                                n,
                                0.35,
                                j == 0,
                                (&mut st.0, &mut st.1, &mut st.2),
                            );
                        }
                        st
                    })
                    .collect();
                for mut scratch in [Scratch::new(bs, head_dim), Scratch::portable(bs, head_dim)] {
                    if scratch.is_vector() && !cfg!(target_feature = "fma") {
                        continue; // the portable side rounds twice without FMA
                    }
                    for rows in 1..=MAX_TILE {
                        let q_refs: Vec<&[f32]> = qs[..rows].iter().map(|q| &q[..]).collect();
                        let mut fast: States =
                            (vec![0.0; rows], vec![0.0; rows], vec![0.0; rows * head_dim]);
                        for (j, &(b, n)) in blocks.iter().enumerate() {
                            scratch.attend_rows(&q_refs, blk(b), n, 0.35, j == 0, tile(&mut fast));
                        }
                        for (r, want) in slow[..rows].iter().enumerate() {
                            let what = format!(
                                "head_dim {head_dim}, block {bs}, row {r} of {rows}, vector kernel {}",
                                scratch.is_vector()
                            );
                            assert_eq!(fast.0[r].to_bits(), want.0.to_bits(), "m: {what}");
                            assert_eq!(fast.1[r].to_bits(), want.1.to_bits(), "l: {what}");
                            let acc = &fast.2[r * head_dim..][..head_dim];
                            let bits =
                                |x: &[f32]| x.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                            assert_eq!(bits(acc), bits(&want.2), "acc: {what}");
                        }
                    }
                }
            }
        }
    }

    /// On a machine with AVX-512 the vector kernel must actually be the one tested above.
    #[test]
    #[cfg(all(target_arch = "x86_64", target_feature = "fma"))]
    fn the_vector_kernel_runs_where_the_cpu_has_it() {
        let has = std::arch::is_x86_feature_detected!("avx512f");
        assert_eq!(Scratch::new(16, 64).is_vector(), has);
        assert_eq!(Scratch::new(16, 128).is_vector(), has);
        assert!(
            !Scratch::new(16, 40).is_vector(),
            "head_dim 40 runs the portable loops"
        );
        assert!(
            !Scratch::new(16, 144).is_vector(),
            "head_dim 144 runs the portable loops"
        );
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
        let mut st: States = (vec![0.0], vec![0.0], vec![0.0; hd]);
        let mut scratch = Scratch::new(3, hd);
        for half in 0..2 {
            let view = BlockView {
                k: &k[half * 3 * hd..],
                v: &v[half * 3 * hd..],
                stride: hd,
            };
            scratch.attend_rows(&[&q], view, 3, 0.7, half == 0, tile(&mut st));
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
            assert!(
                (st.2[d] as f64 / st.1[0] as f64 - want).abs() < 1e-6,
                "dim {d}"
            );
        }
    }
}

#[cfg(test)]
mod speed {
    use super::*;

    /// Nanoseconds per row and block for one L1-resident block (16 tokens, head_dim 64), tiles
    /// of 4 and of `MAX_TILE` rows, on the vector kernel and the portable loops; one JSON line
    /// each. Run with
    /// `cargo test -p ponder-kernels --release --lib -- --ignored tile_kernel_speed --nocapture`.
    #[test]
    #[ignore]
    fn tile_kernel_speed() {
        let (bs, hd, stride) = (16usize, 64usize, 192usize);
        let val = |i: usize, s: usize| ((i * 7919 + s * 104_729) % 2003) as f32 / 1001.5 - 1.0;
        let k: Vec<f32> = (0..bs * stride).map(|i| val(i, 1)).collect();
        let v: Vec<f32> = (0..bs * stride).map(|i| val(i, 2)).collect();
        let qs: Vec<Vec<f32>> = (0..MAX_TILE)
            .map(|r| (0..hd).map(|i| val(i, 3 + r)).collect())
            .collect();
        let blk = BlockView {
            k: &k,
            v: &v,
            stride,
        };
        for (rows, mut scratch) in [
            (4, Scratch::new(bs, hd)),
            (MAX_TILE, Scratch::new(bs, hd)),
            (4, Scratch::portable(bs, hd)),
        ] {
            let q_refs: Vec<&[f32]> = qs[..rows].iter().map(|q| &q[..]).collect();
            let (mut m, mut l, mut acc) =
                (vec![0f32; rows], vec![0f32; rows], vec![0f32; rows * hd]);
            let iters = 200_000;
            let t0 = std::time::Instant::now();
            for i in 0..iters {
                let st = TileStates {
                    m: &mut m,
                    l: &mut l,
                    acc: &mut acc,
                };
                scratch.attend_rows(&q_refs, blk, bs, 0.125, i == 0, st);
            }
            let ns = t0.elapsed().as_nanos() as f64 / (iters * rows) as f64;
            let kernel = if scratch.is_vector() {
                "avx512"
            } else {
                "portable"
            };
            println!(
                "{{\"kernel\": \"{kernel}\", \"rows\": {rows}, \"ns_per_row_and_block\": {ns:.1}}}"
            );
        }
    }
}
