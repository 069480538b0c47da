//! Launcher for the fused sampler in `cuda/sampling.cu`: one CTA per row, the CPU's
//! `sampling::sample` checks first (same errors), and the same result: the same token bit for
//! bit (shared integer arithmetic and Philox stream), logprobs and entropy within float
//! tolerance. A row with a NaN / `+inf` logit or only `-inf` becomes the CPU's typed error.
#![allow(unsafe_code)]

use cudarc::driver::{CudaSlice, DeviceRepr, LaunchConfig, PushKernelArg, ValidAsZeroBits};

use super::device::{CudaKernels, Module};
use super::error::{u32_arg, CudaError};
use crate::sampling::{validate, RowCode, Sample, SampleRequest, SamplingError};

/// The sampler kernel (`sampling.cu`).
pub(crate) const SAMPLE_KERNEL: &str = "fused_sample";

/// Threads per row, as the kernel's `S_THREADS` (its `__launch_bounds__`).
const THREADS: u32 = 512;

// SAFETY: `RowCode` is `repr(C)` (u64, u64, u64, u32, f32, f32, u32), laid out as the kernel's
// `SampleRow`.
unsafe impl DeviceRepr for RowCode {}

/// The kernel's `SampleOut`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct SampleOut {
    token: u32,
    status: u32,
    logprob: f32,
    entropy: f32,
}

// SAFETY: `repr(C)` of u32/f32, laid out as the kernel's `SampleOut`; all-zero bits are valid.
unsafe impl DeviceRepr for SampleOut {}
// SAFETY: as above.
unsafe impl ValidAsZeroBits for SampleOut {}

impl CudaKernels {
    /// Samples every row of `logits` (`[rows.len(), vocab]`, on the device), as the CPU's
    /// `sampling::sample` does.
    pub fn sample(
        &self,
        logits: &CudaSlice<f32>,
        vocab: usize,
        rows: &[SampleRequest],
    ) -> Result<Vec<Sample>, CudaError> {
        let codes = validate(logits.len(), vocab, rows)?;
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let stream = self.stream();
        let n_top = rows
            .iter()
            .map(|r| r.config.top_logprobs)
            .max()
            .unwrap_or(0);
        let codes_d = stream.clone_htod(&codes)?;
        let mut out = stream.alloc_zeros::<SampleOut>(rows.len())?;
        let mut top_ids = stream.alloc_zeros::<u32>(rows.len() * n_top.max(1))?;
        let mut top_lp = stream.alloc_zeros::<f32>(rows.len() * n_top.max(1))?;
        let (vocab_u, n_top_u) = (u32_arg("vocab", vocab)?, u32_arg("top_logprobs", n_top)?);
        let cfg = LaunchConfig {
            grid_dim: (u32_arg("rows", rows.len())?, 1, 1),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let f = self.function(Module::Sampling, SAMPLE_KERNEL)?;
        let mut b = stream.launch_builder(&f);
        b.arg(logits).arg(&vocab_u).arg(&codes_d).arg(&n_top_u);
        b.arg(&mut out).arg(&mut top_ids).arg(&mut top_lp);
        // SAFETY: the arguments match `fused_sample` in sampling.cu; `validate` checked
        // `logits` holds `rows * vocab` elements with `0 < vocab <= MAX_VOCAB`; the outputs
        // hold one `SampleOut` and `n_top` top entries per row, what each CTA writes.
        unsafe { b.launch(cfg) }?;
        let out = stream.clone_dtoh(&out)?;
        let top_ids = stream.clone_dtoh(&top_ids)?;
        let top_lp = stream.clone_dtoh(&top_lp)?;
        let mut samples = Vec::with_capacity(rows.len());
        for (row, (o, req)) in out.iter().zip(rows).enumerate() {
            match o.status {
                0 => {}
                1 => {
                    let index = o.token as usize;
                    let at = row * vocab + index;
                    let value = stream.clone_dtoh(&logits.slice(at..at + 1))?;
                    return Err(SamplingError::NonFiniteLogit {
                        row,
                        index,
                        value: value.first().copied().unwrap_or(f32::NAN),
                    }
                    .into());
                }
                _ => return Err(SamplingError::AllMasked { row }.into()),
            }
            let tops = (0..req.config.top_logprobs)
                .map(|j| (top_ids[row * n_top + j], top_lp[row * n_top + j]))
                .filter(|&(id, _)| id != u32::MAX)
                .collect();
            samples.push(Sample {
                token: o.token,
                logprob: o.logprob,
                top_logprobs: tops,
                entropy: o.entropy,
            });
        }
        Ok(samples)
    }
}
