//! The decoder layer's row-wise arithmetic between the matmuls and attention, on plain
//! `[rows, width]` row-major f32 slices: the residual add and RMSNorm after it (also per head,
//! for q/k norms), RoPE, the SwiGLU gate, row gathers (the embedding lookup), the bias add and
//! the deterministic random fill of a benchmark model.
//!
//! These are the engine's CPU forward pass (`engine/src/cpu.rs` calls them) and the CPU
//! references of `cuda/decoder_ops.cu` (the CUDA forward pass's kernels, tested against them
//! in `tests/gpu/decoder_ops.rs`); the narrowing kernel's reference is [`KvElem::from_f32`] and
//! the gate's is [`math::silu_mul`](crate::math::silu_mul).
//!
//! Numerics. Each computes candle's bits (the add is an element-wise `f32` add; the norm is
//! `candle_nn::ops::rms_norm`: a sequential `f32` sum of squares, `m = sqrt(sum / n + eps)`,
//! `x / m * alpha`; RoPE is candle's `rope_i` / `rope`, `x0·cos − x1·sin`, `x0·sin + x1·cos`
//! with no fused multiply-add; the gate is `math::silu_mul`), so the engine's parity with
//! candle-transformers stays exact (`tests/candle_parity.rs`), and a row's result never
//! depends on the other rows. Must not change a single bit of what candle computes.
//!
//! Work split. A batch of rows is split in two halves run on the calling thread and the
//! forward pass's hot helper ([`run_pair`](crate::run_pair)): in a 16-row decode step these
//! were serial work during which the helper waited.
//!
//! Shapes are not errors here: a pass covers the rows both of its slices hold, and an index
//! past its table (a gathered row, a RoPE position) leaves its output row as it was, which is
//! what the CUDA kernels do too. Callers validate ids and positions first (the engine does).

use crate::kv::KvElem;
use crate::math::silu_mul;

/// Elements below which a call runs on the calling thread alone (a hand-off costs more).
const SPLIT_MIN: usize = 4096;

/// Runs `f` on matching row ranges of `a` (mutable) and `b`, each `rows` rows long, in two
/// halves on this thread and a helper when the work is big enough.
fn split_rows(a: &mut [f32], b: &[f32], rows: usize, f: &(dyn Fn(&mut [f32], &[f32]) + Sync)) {
    split_rows3(a, b, &mut [], rows, &|a, b, _| f(a, b));
}

/// A row-wise pass over three matching row ranges (see [`split_rows3`]).
type RowPass3<'a> = dyn Fn(&mut [f32], &[f32], &mut [f32]) + Sync + 'a;

/// [`split_rows`] over three matching row ranges: `a` and `c` mutable (`c` may be empty: its
/// halves are then empty too), `b` read-only.
fn split_rows3(a: &mut [f32], b: &[f32], c: &mut [f32], rows: usize, f: &RowPass3<'_>) {
    if rows < 2
        || a.len() < SPLIT_MIN
        || a.len() != b.len()
        || !(c.is_empty() || c.len() == a.len())
    {
        f(a, b, c);
        return;
    }
    let half = rows.div_ceil(2) * (a.len() / rows);
    let (c0, c1) = c.split_at_mut(half.min(c.len()));
    let (a0, a1) = a.split_at_mut(half);
    let (b0, b1) = b.split_at(half);
    crate::run_pair([(a0, b0, c0), (a1, b1, c1)], &|(a, b, c)| f(a, b, c));
}

/// `x += delta` element-wise (when given), then `out = rms_norm(x) * alpha` row by row
/// (`alpha.len()` floats per row), as candle computes them: one pass per half of the rows, so
/// a row is added and normed by the thread that has just read it.
pub fn add_and_norm(
    x: &mut [f32],
    delta: Option<&[f32]>,
    alpha: &[f32],
    eps: f32,
    out: &mut [f32],
) {
    let width = alpha.len().max(1);
    let rows = x.len() / width;
    match delta {
        Some(delta) => split_rows3(x, delta, out, rows, &|x, d, out| {
            for (x, &d) in x.iter_mut().zip(d) {
                *x += d;
            }
            norm_rows(x, alpha, eps, out);
        }),
        None => rms_norm(x, alpha, eps, out),
    }
}

/// `out = rms_norm(x) * alpha` row by row (`alpha.len()` floats per row), as candle computes
/// it: [`add_and_norm`] without the add. Reference of `rms_norm` in `decoder_ops.cu`.
pub fn rms_norm(x: &[f32], alpha: &[f32], eps: f32, out: &mut [f32]) {
    let rows = x.len() / alpha.len().max(1);
    split_rows(out, x, rows, &|out, x| norm_rows(x, alpha, eps, out));
}

/// Rows whose sums of squares run side by side in [`norm_rows`].
const NORM_ROWS_AT_ONCE: usize = 8;

/// candle's `rms_row` for `f32` on every whole row of `alpha.len()` floats in `x`: each row's
/// sum of squares is candle's sequential `f32` sum, but the sums of up to
/// [`NORM_ROWS_AT_ONCE`] rows advance together, so the adds of different rows overlap instead
/// of waiting on one row's chain (576 dependent adds per row of SmolLM2). Every row gets the
/// bits it gets alone.
fn norm_rows(x: &[f32], alpha: &[f32], eps: f32, out: &mut [f32]) {
    let width = alpha.len();
    if width == 0 {
        return;
    }
    let chunk = NORM_ROWS_AT_ONCE * width;
    for (x, out) in x.chunks(chunk).zip(out.chunks_mut(chunk)) {
        let rows = x.len() / width;
        let mut sum2 = [0f32; NORM_ROWS_AT_ONCE];
        for i in 0..width {
            for (r, s) in sum2.iter_mut().enumerate().take(rows) {
                let v = x[r * width + i];
                *s += v * v;
            }
        }
        for (r, (out, x)) in out
            .chunks_exact_mut(width)
            .zip(x.chunks_exact(width))
            .enumerate()
        {
            let m = (sum2[r] / width as f32 + eps).sqrt();
            for ((o, &v), &a) in out.iter_mut().zip(x).zip(alpha) {
                *o = v / m * a;
            }
        }
    }
}

/// `gate = silu(gate) * up` element-wise ([`math::silu_mul`](crate::math::silu_mul)), `rows`
/// rows split as the norms are.
pub fn silu_mul_rows(gate: &mut [f32], up: &[f32], rows: usize) {
    split_rows(gate, up, rows, &|g, u| silu_mul(g, u));
}

/// Rotates `rows` (`positions.len()` tokens × `heads` × `2 * half`) in place, token `t` at
/// `positions[t]`, with the `[context, half]` tables `cos` / `sin` (`half = cos.len() /
/// context`, so the caller passes `half` too). Pairs `(2i, 2i+1)` when `interleaved` (llama
/// GGUF), else `(i, i + half)`. A position past the tables leaves its token unrotated.
/// Reference of `rope` in `decoder_ops.cu` (bitwise).
pub fn rope(
    rows: &mut [f32],
    heads: usize,
    positions: &[usize],
    tables: (&[f32], &[f32]),
    half: usize,
    interleaved: bool,
) {
    let (cos, sin) = tables;
    let d = 2 * half;
    if d == 0 || heads == 0 {
        return;
    }
    for (token, &pos) in rows.chunks_exact_mut(heads * d).zip(positions) {
        let at = pos.saturating_mul(half);
        let (Some(cos), Some(sin)) = (cos.get(at..at + half), sin.get(at..at + half)) else {
            continue;
        };
        for head in token.chunks_exact_mut(d) {
            for i in 0..half {
                let (a, b) = if interleaved {
                    (2 * i, 2 * i + 1)
                } else {
                    (i, i + half)
                };
                let (x0, x1) = (head[a], head[b]);
                head[a] = x0 * cos[i] - x1 * sin[i];
                head[b] = x0 * sin[i] + x1 * cos[i];
            }
        }
    }
}

/// `out[r] = table[rows[r]]` widened to f32, rows of `width` elements (the embedding lookup,
/// and the rows the head reads). Reference of `gather_rows_<dtype>` in `decoder_ops.cu`.
pub fn gather_rows<T: KvElem>(table: &[T], rows: &[u32], width: usize, out: &mut [f32]) {
    if width == 0 {
        return;
    }
    for (&src, dst) in rows.iter().zip(out.chunks_exact_mut(width)) {
        let at = (src as usize).saturating_mul(width);
        if let Some(row) = table.get(at..at.saturating_add(width)) {
            for (o, &v) in dst.iter_mut().zip(row) {
                *o = v.to_f32();
            }
        }
    }
}

/// `y[r] += bias` for every whole row of `bias.len()` floats. Reference of `add_bias` in
/// `decoder_ops.cu` (bitwise).
pub fn add_bias(y: &mut [f32], bias: &[f32]) {
    if bias.is_empty() {
        return;
    }
    for row in y.chunks_exact_mut(bias.len()) {
        for (y, &b) in row.iter_mut().zip(bias) {
            *y += b;
        }
    }
}

/// A uniform value in `[-1, 1)` from `(seed, i)`: splitmix64's finaliser over
/// `seed * golden + i`, its top 24 bits as a fraction (so a weight is a function of its index,
/// and a device fills a model in parallel). Reference of `fill_random_<dtype>` in
/// `decoder_ops.cu` (bitwise).
pub fn random_uniform(seed: u64, i: u64) -> f32 {
    let mut z = seed
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(i)
        .wrapping_add(0x632B_E59B_D9B4_E019);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    ((z >> 40) as f32) * (1.0 / 16_777_216.0) * 2.0 - 1.0
}

/// `out[i] = random_uniform(seed, i) * scale`, narrowed to `T`.
pub fn fill_random<T: KvElem>(out: &mut [T], seed: u64, scale: f32) {
    for (i, o) in out.iter_mut().enumerate() {
        *o = T::from_f32(random_uniform(seed, i as u64) * scale);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn split_gate_is_the_serial_gate() {
        let val = |i: usize, s: usize| ((i * 7919 + s * 104_729) % 2003) as f32 / 201.5 - 5.0;
        let (rows, width) = (16usize, 1536usize);
        let up: Vec<f32> = (0..rows * width).map(|i| val(i, 1)).collect();
        let gate: Vec<f32> = (0..rows * width).map(|i| val(i, 2)).collect();
        let mut want = gate.clone();
        silu_mul(&mut want, &up);
        let _hot_helper = crate::HotHelper::start();
        let mut got = gate.clone();
        silu_mul_rows(&mut got, &up, rows);
        assert!(got
            .iter()
            .zip(&want)
            .all(|(a, b)| a.to_bits() == b.to_bits()));
    }
}
