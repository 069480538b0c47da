//! [`CudaKernels`]: one CUDA context and stream with every kernel module loaded, the handle all
//! launchers hang off (`attention`, `kv`, `decoder_ops`).
//!
//! The driver library is loaded at run time (cudarc's `fallback-dynamic-loading`), so a binary
//! built with feature `cuda` starts on a machine without a GPU; `CudaKernels::new` then returns
//! `CudaError::NoDevice`. cudarc panics when `libcuda` is absent, so `new` first probes for the
//! library itself (and still turns a panic from cudarc into the error, should one come). Modules are loaded from the embedded PTX for the newest architecture
//! the GPU supports (sm_90 PTX on Hopper and later, sm_80 PTX on Ampere).

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use cudarc::driver::sys::CUdevice_attribute;
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaStream};
use cudarc::nvrtc::Ptx;

use super::decoder_ops::DecoderOps;
use super::error::CudaError;
use super::ptx::{self, PtxModule};

/// The loaded kernel modules, one per `.cu` file.
#[derive(Debug)]
struct Modules {
    paged_attention: Arc<CudaModule>,
    cascade_attention: Arc<CudaModule>,
    kv_cache: Arc<CudaModule>,
    /// `decoder_ops.cu`, its functions looked up once.
    decoder_ops: DecoderOps,
}

/// Which module a kernel lives in.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Module {
    /// `cuda/paged_attention.cu`.
    PagedAttention,
    /// `cuda/cascade_attention.cu`.
    CascadeAttention,
    /// `cuda/kv_cache.cu`.
    KvCache,
}

/// A CUDA device with Ponder's kernels loaded; launches run in order on one stream.
#[derive(Debug)]
pub struct CudaKernels {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    modules: Modules,
    capability: (i32, i32),
    sm_count: usize,
    max_shared_memory: usize,
}

impl CudaKernels {
    /// Opens device `ordinal` (its primary context) and loads every kernel module; launches
    /// go to the context's default stream.
    pub fn new(ordinal: usize) -> Result<Self, CudaError> {
        probe_driver()?;
        let ctx = match std::panic::catch_unwind(AssertUnwindSafe(|| CudaContext::new(ordinal))) {
            Ok(Ok(ctx)) => ctx,
            Ok(Err(e)) => return Err(CudaError::NoDevice(format!("device {ordinal}: {e}"))),
            Err(panic) => {
                let msg = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "the CUDA driver library could not be loaded".into());
                return Err(CudaError::NoDevice(msg));
            }
        };
        Self::with_stream(ctx.default_stream())
    }

    /// Loads every kernel module into `stream`'s context and queues launches on `stream`:
    /// for sharing a context and stream with another user of the device (candle's
    /// `CudaDevice` holds the same primary context `new` opens).
    pub fn with_stream(stream: Arc<CudaStream>) -> Result<Self, CudaError> {
        let ctx = stream.context().clone();
        let capability = ctx.compute_capability()?;
        if capability.0 < 8 {
            return Err(CudaError::UnsupportedGpu {
                major: capability.0,
                minor: capability.1,
            });
        }
        let load = |m: PtxModule| {
            let text = if capability.0 >= 9 { m.sm90 } else { m.sm80 };
            ctx.load_module(Ptx::from_src(text))
                .map_err(|source| CudaError::ModuleLoad {
                    module: m.name,
                    source,
                })
        };
        let sm_count =
            ctx.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
        let max_shared_memory = ctx
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?;
        let modules = Modules {
            paged_attention: load(ptx::PAGED_ATTENTION)?,
            cascade_attention: load(ptx::CASCADE_ATTENTION)?,
            kv_cache: load(ptx::KV_CACHE)?,
            decoder_ops: DecoderOps::load(&load(ptx::DECODER_OPS)?)?,
        };
        Ok(CudaKernels {
            ctx,
            stream,
            modules,
            capability,
            sm_count: usize::try_from(sm_count).unwrap_or(1).max(1),
            max_shared_memory: usize::try_from(max_shared_memory).unwrap_or(0),
        })
    }

    /// The CUDA context (for allocating buffers the kernels read and write).
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The stream every launch is queued on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// The device's compute capability (major, minor).
    pub fn compute_capability(&self) -> (i32, i32) {
        self.capability
    }

    /// Streaming multiprocessors of the device (plans size their grids to fill them).
    pub fn sm_count(&self) -> usize {
        self.sm_count
    }

    /// Shared memory one CTA may opt in to, in bytes.
    pub(crate) fn max_shared_memory(&self) -> usize {
        self.max_shared_memory
    }

    /// The functions of `decoder_ops.cu`.
    pub(crate) fn decoder_ops(&self) -> &DecoderOps {
        &self.modules.decoder_ops
    }

    /// Kernel `name` from `module`.
    pub(crate) fn function(&self, module: Module, name: &str) -> Result<CudaFunction, CudaError> {
        let m = match module {
            Module::PagedAttention => &self.modules.paged_attention,
            Module::CascadeAttention => &self.modules.cascade_attention,
            Module::KvCache => &self.modules.kv_cache,
        };
        Ok(m.load_function(name)?)
    }
}

/// Names the CUDA driver library goes by.
const DRIVER_LIBS: [&str; 3] = ["libcuda.so.1", "libcuda.so", "nvcuda.dll"];

/// `Ok` when the CUDA driver library can be loaded.
#[allow(unsafe_code)]
fn probe_driver() -> Result<(), CudaError> {
    for name in DRIVER_LIBS {
        // SAFETY: loading the system's CUDA driver library runs only its initialisers, as
        // cudarc's own loading of the same library does; the handle is dropped at once.
        if unsafe { libloading::Library::new(name) }.is_ok() {
            return Ok(());
        }
    }
    Err(CudaError::NoDevice(format!(
        "the CUDA driver library ({}) is not installed or not on the loader path",
        DRIVER_LIBS.join(", ")
    )))
}

#[cfg(test)]
mod tests {
    use super::super::attention::{
        cascade_kernel, cascade_smem_bytes, partial_kernel, MAX_HEAD_DIM,
    };
    use super::super::decoder_ops::KERNELS;
    use super::super::kv::{append_kernel, copy_kernel};
    use super::*;
    use crate::kv::KvDtype;

    /// The parameter types of entry point `name` in `ptx` (`.u64`, `.u32`, `.f32`, ...), or
    /// `None` when it has no such entry point.
    fn ptx_params(ptx: &str, name: &str) -> Option<Vec<String>> {
        let open = format!(".entry {name}(");
        let start = ptx.find(&open)? + open.len();
        let len = ptx[start..].find(')')?;
        Some(
            ptx[start..start + len]
                .split(',')
                .filter_map(|p| p.split_whitespace().nth(1).map(str::to_string))
                .collect(),
        )
    }

    /// Every `decoder_ops.cu` kernel a launcher uses is in the PTX of both architectures,
    /// with the parameter types, in order, that its launcher pushes.
    #[test]
    fn decoder_ops_launchers_match_the_ptx_parameter_lists() {
        let mut checked = 0;
        for kernel in KERNELS {
            let dtypes: &[KvDtype] = if kernel.per_dtype {
                &[KvDtype::F32, KvDtype::F16, KvDtype::Bf16]
            } else {
                &[KvDtype::F32]
            };
            let want: Vec<&str> = kernel.params.iter().map(|p| p.ptx()).collect();
            for &dtype in dtypes {
                let name = kernel.entry(dtype);
                for (arch, text) in [
                    ("sm80", ptx::DECODER_OPS.sm80),
                    ("sm90", ptx::DECODER_OPS.sm90),
                ] {
                    let got = ptx_params(text, &name)
                        .unwrap_or_else(|| panic!("{name} missing from decoder_ops.{arch}.ptx"));
                    assert_eq!(got, want, "{name} in decoder_ops.{arch}.ptx");
                    checked += 1;
                }
            }
        }
        assert_eq!(checked, 2 * (3 * 3 + 4), "every kernel, both architectures");
        // The PTX holds no entry point without a launcher.
        let entries = ptx::DECODER_OPS.sm90.matches(".entry ").count();
        assert_eq!(entries, 3 * 3 + 4, "decoder_ops.cu entry points");
    }

    /// The parameter parser reads what nvcc writes (a wrong parser would pass any list).
    #[test]
    fn ptx_params_reads_an_entry_points_types() {
        let ptx = ".visible .entry k(\n\t.param .u64 .ptr .align 1 k_param_0,\n\t.param .u32 k_param_1,\n\t.param .f32 k_param_2\n)\n{";
        assert_eq!(
            ptx_params(ptx, "k"),
            Some(vec![".u64".into(), ".u32".into(), ".f32".into()])
        );
        assert_eq!(ptx_params(ptx, "other"), None);
    }

    /// Every name a launcher asks for is an entry point of its module's PTX, for both
    /// architectures: a renamed kernel fails here, without a GPU.
    #[test]
    fn every_launched_kernel_is_in_the_embedded_ptx() {
        let mut wanted = Vec::new();
        for dtype in [KvDtype::F32, KvDtype::F16, KvDtype::Bf16] {
            for dpl in [1, 2, 4, 8] {
                wanted.push((ptx::PAGED_ATTENTION, partial_kernel(dtype, dpl, false)));
                if dpl > 1 {
                    wanted.push((ptx::PAGED_ATTENTION, partial_kernel(dtype, dpl, true)));
                }
            }
            for head_dim in [1, 64, 65, 128, 129, 200, 256] {
                wanted.push((ptx::CASCADE_ATTENTION, cascade_kernel(dtype, head_dim)));
            }
            wanted.push((ptx::KV_CACHE, append_kernel(dtype)));
            wanted.push((ptx::KV_CACHE, copy_kernel(dtype)));
        }
        for (module, name) in wanted {
            for (arch, text) in [("sm80", module.sm80), ("sm90", module.sm90)] {
                assert!(
                    text.contains(&format!(".entry {name}(")),
                    "{name} missing from {}.{arch}.ptx",
                    module.name
                );
            }
        }
        assert!(ptx::PAGED_ATTENTION.sm90.contains(".target sm_90"));
        assert!(ptx::PAGED_ATTENTION.sm80.contains(".target sm_80"));
        // The prefix kernel's tiles fit an A100 (163 KiB) at every head dim, and the 99 KiB
        // of sm_86 / sm_89 parts up to head dim 128 (larger falls back to ungrouped).
        assert!(cascade_smem_bytes(MAX_HEAD_DIM) <= 163 * 1024);
        assert!(cascade_smem_bytes(128) <= 99 * 1024);
        assert_eq!(
            cascade_smem_bytes(64),
            (32 * 68 * 2 + 32 * 64 + 32 * 36 + 96) * 4
        );
    }

    #[test]
    fn without_a_driver_new_is_a_typed_error_not_a_panic() {
        match CudaKernels::new(0) {
            Ok(k) => eprintln!(
                "a GPU is present (compute capability {:?})",
                k.compute_capability()
            ),
            Err(CudaError::NoDevice(msg)) => eprintln!("no device, as expected here: {msg}"),
            Err(e) => panic!("unexpected error: {e}"),
        }
    }
}
