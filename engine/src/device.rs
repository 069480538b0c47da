//! Where the engine runs: [`ComputeDevice`], parsed from `--device cpu | cuda | cuda:N`.
//!
//! Parsing never depends on the build: `cuda` parses everywhere, and only opening it
//! ([`ComputeDevice::check_built`]) fails, with an error naming the `cuda` feature, in a build
//! without it. The CPU stays the default.
//!
//! This is also the one place the build picks the CUDA backend: module `cuda` is `cuda/` with
//! feature `cuda` and `cuda_stub.rs` (the same names, uninhabited) without it, so no other file
//! of the engine needs a feature gate (candle's dummy-backend split). The
//! model chooses its backend when it loads (`model.rs`).

use std::fmt;
use std::str::FromStr;

use super::error::EngineError;

#[cfg(feature = "cuda")]
#[path = "cuda/mod.rs"]
pub(crate) mod cuda;

#[cfg(not(feature = "cuda"))]
#[path = "cuda_stub.rs"]
pub(crate) mod cuda;

/// The device a model's forward pass runs on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ComputeDevice {
    /// Our CPU kernels (the default).
    #[default]
    Cpu,
    /// CUDA device `ordinal`: weights, activations and KV blocks in device memory.
    Cuda(usize),
}

impl ComputeDevice {
    /// Whether this is a CUDA device.
    pub fn is_cuda(&self) -> bool {
        matches!(self, Self::Cuda(_))
    }

    /// `Ok` when this build can run on the device: always for the CPU; for CUDA only in a build
    /// with the `cuda` feature ([`EngineError::CudaNotBuilt`] otherwise).
    pub fn check_built(&self) -> Result<(), EngineError> {
        match self {
            Self::Cpu => Ok(()),
            Self::Cuda(_) if cfg!(feature = "cuda") => Ok(()),
            Self::Cuda(_) => Err(EngineError::CudaNotBuilt {
                device: self.to_string(),
            }),
        }
    }
}

/// How a model's matrices are stored on a CUDA device (the CPU keeps its files' formats).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum WeightDtype {
    /// f32: agreement with the CPU's f32 arithmetic up to summation order (the default).
    #[default]
    F32,
    /// bf16: half the memory and bandwidth; products and attention still accumulate in f32,
    /// and the KV blocks are bf16 too.
    Bf16,
}

impl fmt::Display for ComputeDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Cpu => f.write_str("cpu"),
            Self::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

impl FromStr for ComputeDevice {
    type Err = EngineError;

    /// `cpu`, `cuda` (device 0) or `cuda:N`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || EngineError::InvalidInput {
            field: "device",
            reason: format!("{s:?} is not one of cpu, cuda, cuda:N"),
        };
        match s.trim().to_ascii_lowercase().as_str() {
            "cpu" => Ok(Self::Cpu),
            "cuda" | "gpu" => Ok(Self::Cuda(0)),
            other => match other.strip_prefix("cuda:") {
                Some(n) => n.parse().map(Self::Cuda).map_err(|_| bad()),
                None => Err(bad()),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cpu_cuda_and_an_ordinal_and_names_the_field_otherwise() {
        assert_eq!(
            "cpu".parse::<ComputeDevice>().ok(),
            Some(ComputeDevice::Cpu)
        );
        assert_eq!(
            "cuda".parse::<ComputeDevice>().ok(),
            Some(ComputeDevice::Cuda(0))
        );
        assert_eq!(
            "CUDA:3".parse::<ComputeDevice>().ok(),
            Some(ComputeDevice::Cuda(3))
        );
        for bad in ["tpu", "cuda:", "cuda:x", ""] {
            match bad.parse::<ComputeDevice>() {
                Err(EngineError::InvalidInput { field, .. }) => assert_eq!(field, "device"),
                other => panic!("{bad:?} parsed as {other:?}"),
            }
        }
        assert_eq!(ComputeDevice::Cuda(1).to_string(), "cuda:1");
    }

    #[test]
    fn cuda_without_the_feature_is_an_error_naming_it() {
        let r = ComputeDevice::Cuda(0).check_built();
        if cfg!(feature = "cuda") {
            assert!(r.is_ok());
        } else {
            let msg = r.err().map(|e| e.to_string()).unwrap_or_default();
            assert!(msg.contains("--features cuda"), "{msg}");
        }
        assert!(ComputeDevice::Cpu.check_built().is_ok());
    }
}
