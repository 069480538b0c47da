//! Ponder's compute kernels: CUDA sources (`.cu`) for paged and shared-prefix attention, KV
//! block copy and fused sampling, each with a Rust CPU reference and a launcher.
//!
//! Knows only tensors: no scheduling, no strategies. Kernels and their CPU twins arrive with
//! the kernels step (see DESIGN.md); today the engine's CPU path uses candle's ops.
