//! Integration tests of `ponder-kernels`: one binary, one module per concern.
//!
//! - `paths`: every SIMD path equals the scalar reference bitwise, over many shapes.
//! - `invariance`: a row's output does not depend on the batch size or the thread count.
//! - `candle_parity`: Q4_1 bitwise equal to candle-core 0.11.1's `QMatMul`; Q8_0 bitwise equal
//!   to `BlockQ8_0::vec_dot_unopt` and within 1e-5 (relative) of candle's own x86 path.
//! - `errors`: wrong lengths and shapes are typed errors that name the argument.

mod candle_parity;
mod common;
mod errors;
mod invariance;
mod paths;
