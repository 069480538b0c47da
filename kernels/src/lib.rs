//! Ponder's compute kernels.
//!
//! Today: a batch-invariant CPU quantized matmul ([`QuantMatrix`]) for the GGUF Q4_1 / Q8_0
//! weights of the models Ponder runs, bitwise equal to candle-core 0.11.1's generic quantized
//! dot products but SIMD, multithreaded, and independent of the batch size. Planned (see
//! DESIGN.md): CUDA sources (`.cu`) for paged and shared-prefix attention, KV block copy and
//! fused sampling, each with a Rust CPU reference and a launcher.
//!
//! Knows only tensors: no scheduling, no strategies.

pub mod attention;
mod cpu;

pub use cpu::{KernelError, KernelPath, QuantFormat, QuantMatrix, Result};
