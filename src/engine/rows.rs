//! Row-wise arithmetic of the CPU forward pass between the kernel calls: the residual add, the
//! RMSNorm after it (also per head, for q/k norms), and the SwiGLU gate, on plain `[rows, width]` row-major slices.
//!
//! Each computes candle's bits (the add is an element-wise `f32` add; the norm is
//! `candle_nn::ops::rms_norm`: a sequential `f32` sum of squares, `m = sqrt(sum / n + eps)`,
//! `x / m * alpha`; the gate is `math::silu_mul`), so the engine's parity with
//! candle-transformers stays exact, and a row's result never depends on the other rows. A
//! batch of rows is split in two halves run on the calling thread and the forward pass's hot
//! helper (`ponder_kernels::run_pair`): in a 16-row decode step these were serial work during
//! which the helper waited. Owns no state; must not change a single bit of what candle computes.

use ponder_kernels::math::silu_mul;

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
    ponder_kernels::run_pair([(a0, b0, c0), (a1, b1, c1)], &|(a, b, c)| f(a, b, c));
}

/// `x += delta` element-wise (when given), then `out = rms_norm(x) * alpha` row by row
/// (`alpha.len()` floats per row), as candle computes them: one pass per half of the rows, so
/// a row is added and normed by the thread that has just read it.
pub(crate) fn add_and_norm(
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
        None => norm(x, alpha, eps, out),
    }
}

/// `out = rms_norm(x) * alpha` row by row (`alpha.len()` floats per row), as candle computes
/// it: [`add_and_norm`] without the add.
pub(crate) fn norm(x: &[f32], alpha: &[f32], eps: f32, out: &mut [f32]) {
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

/// `gate = silu(gate) * up` element-wise (`math::silu_mul`), `rows` rows.
pub(crate) fn silu_mul_rows(gate: &mut [f32], up: &[f32], rows: usize) {
    split_rows(gate, up, rows, &|g, u| silu_mul(g, u));
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Tensor};

    #[test]
    fn add_and_norm_is_candles_add_then_rms_norm_bitwise() -> candle_core::Result<()> {
        let (rows, width, eps) = (16usize, 576usize, 1e-5f32);
        let val = |i: usize, s: usize| ((i * 7919 + s * 104_729) % 2003) as f32 / 301.5 - 3.3;
        let x: Vec<f32> = (0..rows * width).map(|i| val(i, 1)).collect();
        let delta: Vec<f32> = (0..rows * width).map(|i| val(i, 2)).collect();
        let alpha: Vec<f32> = (0..width).map(|i| val(i, 3)).collect();
        let dev = Device::Cpu;
        let sum = (Tensor::from_slice(&x, (rows, width), &dev)?
            + Tensor::from_slice(&delta, (rows, width), &dev)?)?;
        let want = candle_nn::ops::rms_norm(&sum, &Tensor::from_slice(&alpha, width, &dev)?, eps)?;
        for r in [1, 2, 3, 11, rows] {
            let n = r * width;
            let (mut got_x, mut got) = (x[..n].to_vec(), vec![0f32; n]);
            add_and_norm(&mut got_x, Some(&delta[..n]), &alpha, eps, &mut got);
            let want_x: Vec<f32> = sum.narrow(0, 0, r)?.flatten_all()?.to_vec1()?;
            let want_out: Vec<f32> = want.narrow(0, 0, r)?.flatten_all()?.to_vec1()?;
            assert!(
                got_x
                    .iter()
                    .zip(&want_x)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "residual, {r} rows"
            );
            assert!(
                got.iter()
                    .zip(&want_out)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "norm, {r} rows"
            );
            // Without a delta the stream is normed as it is.
            let (mut summed, mut normed) = (want_x.clone(), vec![0f32; n]);
            add_and_norm(&mut summed, None, &alpha, eps, &mut normed);
            assert!(
                normed
                    .iter()
                    .zip(&want_out)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "norm alone, {r} rows"
            );
        }
        Ok(())
    }

    #[test]
    fn split_gate_is_the_serial_gate() {
        let val = |i: usize, s: usize| ((i * 7919 + s * 104_729) % 2003) as f32 / 201.5 - 5.0;
        let (rows, width) = (16usize, 1536usize);
        let up: Vec<f32> = (0..rows * width).map(|i| val(i, 1)).collect();
        let gate: Vec<f32> = (0..rows * width).map(|i| val(i, 2)).collect();
        let mut want = gate.clone();
        silu_mul(&mut want, &up);
        let _hot_helper = ponder_kernels::HotHelper::start();
        let mut got = gate.clone();
        silu_mul_rows(&mut got, &up, rows);
        assert!(got
            .iter()
            .zip(&want)
            .all(|(a, b)| a.to_bits() == b.to_bits()));
    }
}
