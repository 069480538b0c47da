//! Ponder's compute kernels, each with a CPU implementation and, behind feature `cuda`, a CUDA
//! one (`cuda/*.cu`, compiled to PTX by `build.rs`, launched by the `cuda` module) tested
//! against it.
//!
//! - [`QuantMatrix`]: a batch-invariant CPU quantized matmul for the GGUF Q4_1 / Q8_0 weights,
//!   bitwise equal to candle-core 0.11.1's generic quantized dot products.
//! - [`attention`]: paged attention with shared-prefix (cascade) grouping and flash-decoding
//!   splits; `cascade_attention` is the reference for the CUDA attention kernels.
//! - [`kv`]: KV cache appends and copy-on-write block copies (f32, f16, bf16).
//! - [`decoder_ops`]: the decoder layer's row-wise arithmetic (residual add + RMSNorm, RoPE,
//!   the SiLU gate, row gathers, bias, the random fill): the engine's CPU forward pass and the
//!   reference of the CUDA forward pass's small kernels.
//!
//! - [`HotHelper`]: keeps a helper thread hot across a span of kernel calls (a forward pass).
//!
//! Knows only tensors: no scheduling, no strategies.

pub mod attention;
mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod decoder_ops;
pub mod kv;
pub mod math;
mod work_sharing;

pub use cpu::{KernelError, KernelPath, QuantFormat, QuantMatrix, Result};
#[cfg(not(loom))]
pub use work_sharing::HotHelper;
pub use work_sharing::{map_tasks, run_pair};
