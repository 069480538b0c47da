//! Portable tile kernels: the scalar reference every SIMD kernel must match bitwise, and the
//! fallback on CPUs without AVX2.
//!
//! Invariant: for each (activation row, column) the arithmetic is exactly candle-core 0.11.1's
//! `vec_dot_unopt` (llama.cpp's generic `ggml_vec_dot_q4_1_q8_1` / `ggml_vec_dot_q8_0_q8_0`):
//! an exact i32 sum per block, then, in block order,
//! - Q4_1: `sumf += sumi as f32 * dx * dy + mx * sy` (that is `((sumi * dx) * dy) + (mx * sy)`,
//!   then added to `sumf`; Rust never contracts these into FMAs);
//! - Q8_0: `sumf += sumi as f32 * dx * dy`.
//!
//! The SIMD kernels may order the integer sum any way they like (it is exact) but must do the
//! f32 steps per lane in this order with separate multiplies and adds.

use super::layout::{f16_at, q4_1_weights, q8_0_weights, Q4_1_M, TB_Q4_1, TB_Q8_0, TILE};
use super::quant::QuantizedRows;

/// Q4_1 tile `tile` (its `nb` tile blocks) against all rows of `act`; writes
/// `out[r * TILE + j]` for row `r`, tile column `j`.
pub(crate) fn q4_1_tile(tile: &[u8], act: &QuantizedRows, m: usize, out: &mut [f32]) {
    for r in 0..m {
        let mut sumf = [0f32; TILE];
        for (b, blk) in tile.chunks_exact(TB_Q4_1).enumerate() {
            let a = act.block(r, b);
            let (dy, sy) = (a.d, a.s);
            for (j, acc) in sumf.iter_mut().enumerate() {
                let w = q4_1_weights(blk, j);
                let sumi: i32 = w.iter().zip(&a.qs).map(|(&w, &a)| w * a as i32).sum();
                let (dx, mx) = (f16_at(blk, 2 * j), f16_at(blk, Q4_1_M + 2 * j));
                *acc += sumi as f32 * dx * dy + mx * sy;
            }
        }
        out[r * TILE..(r + 1) * TILE].copy_from_slice(&sumf);
    }
}

/// Q8_0 tile `tile` against all rows of `act`; same output convention as [`q4_1_tile`].
pub(crate) fn q8_0_tile(tile: &[u8], act: &QuantizedRows, m: usize, out: &mut [f32]) {
    for r in 0..m {
        let mut sumf = [0f32; TILE];
        for (b, blk) in tile.chunks_exact(TB_Q8_0).enumerate() {
            let a = act.block(r, b);
            let dy = a.d;
            for (j, acc) in sumf.iter_mut().enumerate() {
                let w = q8_0_weights(blk, j);
                let sumi: i32 = w.iter().zip(&a.qs).map(|(&w, &a)| w * a as i32).sum();
                *acc += sumi as f32 * f16_at(blk, 2 * j) * dy;
            }
        }
        out[r * TILE..(r + 1) * TILE].copy_from_slice(&sumf);
    }
}
