//! The engine on a CUDA GPU (feature `cuda`; `device.rs` swaps in `cuda_stub.rs` without it):
//! [`Gpu`] (one device: `ponder-kernels`' CUDA kernels — attention, KV writes and the small
//! kernels of `kernels/cuda/decoder_ops.cu` (`ops.rs`), all PTX built by that crate — and
//! cuBLAS, all queued on one stream), the device weights (`weights.rs`), the device KV memory
//! behind `PagedKvStore` (`kv.rs`) and the forward pass over them (`forward.rs`). No CUDA
//! source lives in the engine.
//!
//! What runs where. On the GPU: the embedding gather, RMSNorm, RoPE, SiLU·mul, every
//! projection (cuBLAS `GemmEx`, f32 accumulation; f32 or bf16 weights), KV append and
//! copy-on-write block copies (`ponder-kernels`' `kv_append` / `kv_copy_blocks`) and attention
//! for prefill and decode rows alike (`plan_attention` once per step, `run_attention` per
//! layer, shared-prefix groups when they pay). On the host: the block bookkeeping
//! (`ponder-kvcache`, unchanged), the plan's metadata, and sampling: the logits rows a step
//! samples from are copied to the host and sampled by the same seeded `Sampler` as on CPU, so
//! a seed gives the same choices on both devices for the same logits (the fused CUDA sampler
//! draws from a Philox stream, not the scheduler's per-sequence ChaCha RNG, so it is not used).
//!
//! Why not candle's CUDA device: candle-core 0.11.1's `cuda` feature links cudarc with
//! `dynamic-linking`, i.e. against `libcuda`, `libcublas`, `libcublasLt`, `libcurand` and
//! `libnvrtc` at build time. The build machine has only the nvcc wheels (no driver library and
//! no cuBLAS), so `cargo build --features cuda` could not link, and a binary linked that way
//! would not even start (CPU included) where those libraries are missing. cudarc's
//! `fallback-dynamic-loading` (what `ponder-kernels` uses) loads cuBLAS at run time; nothing
//! is compiled at run time (no NVRTC).
//! GGUF weights are dequantized on the host and uploaded as f32 (no quantized matmul on GPU).
#![allow(unsafe_code)]

mod forward;
mod kv;
mod ops;
mod weights;

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use cudarc::cublas::CudaBlas;
use ponder_kernels::cuda::CudaKernels;

pub(crate) use forward::CudaModel;
pub(crate) use kv::{DeviceKv, StepSeq};
pub(crate) use weights::WeightDtype;

use crate::error::{EngineError, Result};

/// A device buffer of `f32` (what `KvStore::attend_cuda` takes; `cuda_stub.rs` names the same
/// type in a build without the feature).
pub(crate) type DeviceSlice = cudarc::driver::CudaSlice<f32>;

/// One CUDA device with everything the forward pass launches; every launch goes to one stream.
#[derive(Debug)]
pub(crate) struct Gpu {
    pub(crate) kernels: CudaKernels,
    pub(crate) blas: CudaBlas,
    ordinal: usize,
}

impl Gpu {
    /// Opens device `ordinal`: our kernels (every module of `ponder-kernels`) and cuBLAS.
    pub(crate) fn open(ordinal: usize) -> Result<Arc<Self>> {
        let kernels = CudaKernels::new(ordinal).map_err(|e| cuda_err("opening the device", e))?;
        let stream = Arc::clone(kernels.stream());
        // cudarc panics when a library it loads at run time is missing; report it instead.
        let blas = catch("loading cuBLAS (libcublas)", || {
            CudaBlas::new(Arc::clone(&stream))
        })?
        .map_err(|e| cuda_err("creating a cuBLAS handle", e))?;
        Ok(Arc::new(Self {
            kernels,
            blas,
            ordinal,
        }))
    }

    /// The device's ordinal.
    pub(crate) fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// Makes the device's context current on the calling thread (the executor runs on its own).
    pub(crate) fn bind(&self) -> Result<()> {
        self.kernels
            .context()
            .bind_to_thread()
            .map_err(|e| cuda_err("binding the context", e))
    }

    /// The stream every launch is queued on.
    pub(crate) fn stream(&self) -> &Arc<cudarc::driver::CudaStream> {
        self.kernels.stream()
    }
}

/// An [`EngineError::Cuda`] for `op`, keeping the CUDA error as its source.
pub(crate) fn cuda_err(
    op: &'static str,
    e: impl std::error::Error + Send + Sync + 'static,
) -> EngineError {
    EngineError::Cuda {
        op,
        source: Box::new(e),
    }
}

/// Runs `f`, turning a panic (cudarc's way of saying a library is missing) into an error.
pub(crate) fn catch<T>(op: &'static str, f: impl FnOnce() -> T) -> Result<T> {
    std::panic::catch_unwind(AssertUnwindSafe(f)).map_err(|panic| {
        let reason = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "a CUDA library could not be loaded".into());
        EngineError::Cuda {
            op,
            source: reason.into(),
        }
    })
}
