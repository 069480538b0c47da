//! The CUDA launchers' error type: the CPU kernels' validation errors (the same checks run
//! before every launch), the driver's errors, and the limits of the CUDA kernels themselves.

use crate::attention::AttentionError;
use crate::kv::KvError;

/// Errors from creating the CUDA context or launching a kernel.
#[derive(Debug, thiserror::Error)]
pub enum CudaError {
    /// No usable CUDA driver or device (the driver library is missing, or has no device).
    #[error("no usable CUDA device: {0}")]
    NoDevice(String),
    /// The GPU is older than the oldest architecture the PTX was built for (sm_80).
    #[error("GPU compute capability {major}.{minor} is below the kernels' minimum, 8.0")]
    UnsupportedGpu {
        /// Compute capability, major.
        major: i32,
        /// Compute capability, minor.
        minor: i32,
    },
    /// The driver rejected a module's PTX (e.g. a driver older than the PTX's CUDA 13.0).
    #[error("loading the `{module}` kernels: {source}")]
    ModuleLoad {
        /// The `.cu` file's stem.
        module: &'static str,
        /// The driver's error.
        source: cudarc::driver::DriverError,
    },
    /// A CUDA driver call failed.
    #[error("CUDA driver: {0}")]
    Driver(#[from] cudarc::driver::DriverError),
    /// Invalid attention arguments (as the CPU kernels report them).
    #[error(transparent)]
    Attention(#[from] AttentionError),
    /// Invalid KV append / copy arguments.
    #[error(transparent)]
    Kv(#[from] KvError),
    /// A device buffer has the wrong number of elements.
    #[error("`{arg}` has {got} elements on the device; the call needs {expected}")]
    DeviceLen {
        /// The buffer.
        arg: &'static str,
        /// Its length.
        got: usize,
        /// The length required.
        expected: usize,
    },
    /// `head_dim` is above what the CUDA attention kernels support.
    #[error("`kv.head_dim` = {head_dim} exceeds the CUDA attention kernels' limit of {max}")]
    HeadDimTooLarge {
        /// The head dim supplied.
        head_dim: usize,
        /// The largest supported.
        max: usize,
    },
    /// A run's cache, `q` or `out` differs from what its `AttentionPlan` was built for.
    #[error("`{arg}` is {got} for this run; the attention plan was built for {planned}")]
    PlanMismatch {
        /// The argument (`kv.k`, `kv.head_dim`, `q`, `out`, ...).
        arg: &'static str,
        /// The planned value (a length or a size).
        planned: usize,
        /// The value given.
        got: usize,
    },
    /// A launcher pushed arguments that differ from its kernel's declared parameter list (a
    /// bug in this crate, reported instead of launching).
    #[error("the launcher of `{kernel}` pushed {pushed}; the kernel takes {declared}")]
    ArgumentList {
        /// The kernel (its stem for per-dtype kernels).
        kernel: &'static str,
        /// The argument types pushed.
        pushed: String,
        /// The parameter types declared.
        declared: String,
    },
    /// A size does not fit the kernels' 32-bit indices or the launch grid.
    #[error("`{arg}` = {value} exceeds the CUDA kernels' limit of {max}")]
    TooLarge {
        /// What was too large.
        arg: &'static str,
        /// Its value.
        value: usize,
        /// The limit.
        max: usize,
    },
}

/// `x` as a u32 kernel argument, or `TooLarge` naming `arg`.
pub(crate) fn u32_arg(arg: &'static str, x: usize) -> Result<u32, CudaError> {
    u32::try_from(x).map_err(|_| CudaError::TooLarge {
        arg,
        value: x,
        max: u32::MAX as usize,
    })
}

/// `x` as a grid dimension in y or z (at most 65535).
pub(crate) fn grid_yz(arg: &'static str, x: usize) -> Result<u32, CudaError> {
    if x > 65_535 {
        return Err(CudaError::TooLarge {
            arg,
            value: x,
            max: 65_535,
        });
    }
    u32_arg(arg, x)
}
