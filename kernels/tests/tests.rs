//! Integration tests of `ponder-kernels`: one binary, one module per concern.
//!
//! - `paths`: every SIMD path equals the scalar reference bitwise, over many shapes.
//! - `invariance`: a row's output does not depend on the batch size or the thread count.
//! - `candle_parity`: Q4_1 bitwise equal to candle-core 0.11.1's `QMatMul`; Q8_0 bitwise equal
//!   to `BlockQ8_0::vec_dot_unopt` and within 1e-5 (relative) of candle's own x86 path.
//! - `errors`: wrong lengths and shapes are typed errors that name the argument.
//! - `cascade`: cascade attention (the CUDA attention kernels' CPU reference) against plain
//!   softmax over gathered KV; the softmax-state merge; group errors.
//! - `kv`: KV append / block copy against element loops, f32 / f16 / bf16; errors.
//! - `decoder_ops`: the residual add + RMSNorm and RoPE bitwise against candle-nn; gathers,
//!   bias and the random fill (the references of `cuda/decoder_ops.cu`).
//! - `stack`: a matmul over stacked matrices equals the parts' own, bitwise; stack errors.
//! - `nvcc`: every `cuda/*.cu` compiles to PTX for sm_80 and sm_90 and assembles (required
//!   when `PONDER_REQUIRE_NVCC=1`, as in CI; skipped with a message when nvcc is missing).
//! - `gpu` (feature `cuda`): each CUDA kernel against its CPU reference on random inputs;
//!   skipped with a message when no GPU or driver is present.

// Test helpers state expectations with `expect` as the tests do (clippy.toml allows that in
// `#[test]` functions only; library and binary code may not).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod candle_parity;
mod cascade;
mod common;
mod decoder_ops;
mod errors;
#[cfg(feature = "cuda")]
mod gpu;
mod invariance;
mod kv;
mod nvcc;
mod paths;
mod stack;
