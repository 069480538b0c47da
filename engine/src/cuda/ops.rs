//! The forward pass's small kernels (embedding gather, RMSNorm, RoPE, SiLU·mul, bias, bf16
//! cast, random fill) as [`super::Gpu`] methods: `ponder-kernels`' launchers for
//! `kernels/cuda/decoder_ops.cu` (built to PTX by its build script, loaded with the other
//! kernel modules when the device opens), dispatched over [`DeviceData`]'s element type, their
//! errors as `EngineError::Cuda`. The launchers check every buffer's length against the sizes
//! given, so no launch reads or writes out of bounds.

use cudarc::driver::CudaSlice;
use half::bf16;

use super::cuda_err;
use crate::error::Result;

/// A dense matrix on the device, f32 or bf16.
#[derive(Debug)]
pub(crate) enum DeviceData {
    F32(CudaSlice<f32>),
    Bf16(CudaSlice<bf16>),
}

impl DeviceData {
    pub(crate) fn len(&self) -> usize {
        match self {
            Self::F32(s) => s.len(),
            Self::Bf16(s) => s.len(),
        }
    }
}

impl super::Gpu {
    /// `out[t] = table[ids[t]]` for `[vocab, hidden]` tables; ids were checked against the vocab.
    pub(crate) fn embed(
        &self,
        table: &DeviceData,
        ids: &CudaSlice<u32>,
        out: &mut CudaSlice<f32>,
        tokens: usize,
        hidden: usize,
    ) -> Result<()> {
        let k = &self.kernels;
        match table {
            DeviceData::F32(w) => k.gather_rows(w, ids, tokens, hidden, out),
            DeviceData::Bf16(w) => k.gather_rows(w, ids, tokens, hidden, out),
        }
        .map_err(|e| cuda_err("embed", e))
    }

    /// `out[r] = x[rows[r]]`, rows of a `[_, hidden]` matrix (indices checked by the caller).
    pub(crate) fn gather_rows(
        &self,
        x: &CudaSlice<f32>,
        rows: &CudaSlice<u32>,
        n: usize,
        hidden: usize,
        out: &mut CudaSlice<f32>,
    ) -> Result<()> {
        self.kernels
            .gather_rows(x, rows, n, hidden, out)
            .map_err(|e| cuda_err("gather_rows", e))
    }

    /// RMSNorm of `rows` rows of `x` with weight `w` into `out`.
    pub(crate) fn rms_norm(
        &self,
        x: &CudaSlice<f32>,
        w: &CudaSlice<f32>,
        out: &mut CudaSlice<f32>,
        rows: usize,
        hidden: usize,
        eps: f32,
    ) -> Result<()> {
        self.kernels
            .rms_norm(x, w, out, rows, hidden, eps)
            .map_err(|e| cuda_err("rms_norm", e))
    }

    /// Rotates `x` (`[tokens, heads, 2 * half]`) in place, token `t` at `pos[t]`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn rope(
        &self,
        x: &mut CudaSlice<f32>,
        pos: &CudaSlice<u32>,
        cos: &CudaSlice<f32>,
        sin: &CudaSlice<f32>,
        tokens: usize,
        heads: usize,
        half: usize,
        interleaved: bool,
    ) -> Result<()> {
        self.kernels
            .rope(x, pos, cos, sin, tokens, heads, half, interleaved)
            .map_err(|e| cuda_err("rope", e))
    }

    /// `g = silu(g) * u` over the first `n` elements.
    pub(crate) fn silu_mul(
        &self,
        g: &mut CudaSlice<f32>,
        u: &CudaSlice<f32>,
        n: usize,
    ) -> Result<()> {
        self.kernels
            .silu_mul(g, u, n)
            .map_err(|e| cuda_err("silu_mul", e))
    }

    /// `y[r] += bias` for `rows` rows of `cols`.
    pub(crate) fn add_bias(
        &self,
        y: &mut CudaSlice<f32>,
        bias: &CudaSlice<f32>,
        rows: usize,
        cols: usize,
    ) -> Result<()> {
        self.kernels
            .add_bias(y, bias, rows, cols)
            .map_err(|e| cuda_err("add_bias", e))
    }

    /// The first `n` elements of `x` as bf16 into `out`.
    pub(crate) fn cast_bf16(
        &self,
        x: &CudaSlice<f32>,
        out: &mut CudaSlice<bf16>,
        n: usize,
    ) -> Result<()> {
        self.kernels
            .from_f32(x, out, n)
            .map_err(|e| cuda_err("from_f32", e))
    }

    /// Fills `out` with uniform values in `[-scale, scale)` from `seed` (a random model).
    pub(crate) fn fill_random(&self, out: &mut DeviceData, seed: u64, scale: f32) -> Result<()> {
        let k = &self.kernels;
        match out {
            DeviceData::F32(s) => k.fill_random(s, seed, scale),
            DeviceData::Bf16(s) => k.fill_random(s, seed, scale),
        }
        .map_err(|e| cuda_err("fill_random", e))
    }
}
