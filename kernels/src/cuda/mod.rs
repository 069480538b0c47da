//! CUDA launchers (feature `cuda`): the `.cu` kernels in `kernels/cuda/`, compiled to PTX by
//! `build.rs` and embedded (`ptx`), loaded through cudarc on a [`CudaKernels`] handle.
//!
//! Every launcher mirrors a CPU function of this crate, takes the same arguments (device
//! buffers for tensors, host slices for bookkeeping such as block tables and slots), runs the
//! CPU's own validation before launching, and is tested against it (`tests/gpu.rs`):
//!
//! | launcher | kernels | CPU reference |
//! | --- | --- | --- |
//! | `plan_attention` + `run_attention` (`paged_attention`, `cascade_attention`) | `paged_attention.cu`, `cascade_attention.cu` | `attention::{paged_attention, cascade_attention}` |
//! | `kv_append`, `kv_copy_blocks` | `kv_cache.cu` | `kv::{append, copy_blocks}` |
//! | `gather_rows`, `rms_norm`, `rope`, `silu_mul`, `add_bias`, `from_f32`, `fill_random` | `decoder_ops.cu` | `decoder_ops::{gather_rows, rms_norm, rope, add_bias, fill_random}`, `math::silu_mul`, `KvElem::from_f32` |
//!
//! Without the feature none of this (nor cudarc) is built.

mod attention;
mod decoder_ops;
mod device;
mod error;
mod kv;
mod plan;
mod ptx;

pub use attention::{AttentionPlan, CudaPagedKv, PlanLayout, SeqSpan, MAX_HEAD_DIM};
pub use cudarc;
pub use device::CudaKernels;
pub use error::CudaError;
pub use plan::Grouping;
