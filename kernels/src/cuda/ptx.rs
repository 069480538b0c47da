//! The PTX `build.rs` compiled from `cuda/*.cu`: one [`PtxModule`] per file, embedded in the
//! binary (nothing is read from disk at run time), for sm_80 (A100) and sm_90 (H100/H200).
//! The driver JIT-compiles it for the GPU at load; newer GPUs run the sm_90 PTX.

/// One `.cu` file's PTX for each target architecture.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PtxModule {
    /// The file's stem (`paged_attention` for `cuda/paged_attention.cu`).
    pub(crate) name: &'static str,
    /// PTX for `compute_80`.
    pub(crate) sm80: &'static str,
    /// PTX for `compute_90`.
    pub(crate) sm90: &'static str,
}

include!(concat!(env!("OUT_DIR"), "/ptx.rs"));
