//! CPU kernels: batch-invariant quantized matmul over GGML Q4_1 / Q8_0 weights.
//!
//! Layering, bottom up: `quant` (activation quantization, a mirror of candle-core 0.11.1;
//! `quant_avx512` its 16-blocks-at-a-time AVX-512 twin; `groups` the AMX kernels' layout of
//! it),
//! `layout` (GGML blocks to 16-column tiles), `scalar` (the reference kernels), `x86` (the
//! AVX2 / AVX-512 VNNI kernels) and `amx` (AMX-INT8 for groups of 16 rows; the two hold the only
//! unsafe code), `kernel` (path selection and dispatch),
//! `columns` (tasks writing their own columns of shared outputs in place; unsafe inside),
//! `parallel` (work sharing across threads), `matrix` (`QuantMatrix` and validation). Invariant across all of them: each output element is a pure function of one
//! activation row and one weight row, computed bitwise as candle's `vec_dot_unopt` does.

#[cfg(target_arch = "x86_64")]
mod amx;
mod columns;
mod error;
mod groups;
mod kernel;
mod layout;
mod matrix;
mod parallel;
mod quant;
#[cfg(target_arch = "x86_64")]
mod quant_avx512;
mod scalar;
#[cfg(target_arch = "x86_64")]
mod x86;

pub use error::{KernelError, Result};
pub use kernel::KernelPath;
pub use matrix::{QuantFormat, QuantMatrix};
