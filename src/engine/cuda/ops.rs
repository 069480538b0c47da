//! Launchers for the small kernels of `ops_src.cu` (embedding gather, RMSNorm, RoPE, SiLU·mul,
//! bias, bf16 cast, random fill), compiled by NVRTC when a [`super::Gpu`] opens.
//!
//! Every launcher takes device buffers whose lengths it checks against the sizes it is given
//! (an `EngineError::Cuda` otherwise), so a launch never reads or writes out of bounds.

use cudarc::driver::{CudaFunction, CudaModule, CudaSlice, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::CompileOptions;
use half::bf16;
use ponder_kernels::cuda::CudaKernels;
use std::sync::Arc;

use super::{catch, cuda_err};
use crate::engine::error::{EngineError, Result};

/// The kernels' source (NVRTC needs no headers for it).
const SOURCE: &str = include_str!("ops_src.cu");
/// Threads per CTA.
const THREADS: u32 = 256;

/// The compiled module's functions.
#[derive(Debug)]
pub(crate) struct Ops {
    _module: Arc<CudaModule>,
    embed_f32: CudaFunction,
    embed_bf16: CudaFunction,
    gather_rows: CudaFunction,
    rms_norm: CudaFunction,
    rope: CudaFunction,
    silu_mul: CudaFunction,
    add_bias: CudaFunction,
    cast_f32_bf16: CudaFunction,
    fill_random_bf16: CudaFunction,
    fill_random_f32: CudaFunction,
}

fn check(arg: &'static str, got: usize, need: usize) -> Result<()> {
    if got < need {
        return Err(EngineError::Cuda {
            op: "launch",
            reason: format!("`{arg}` holds {got} elements; the launch needs {need}"),
        });
    }
    Ok(())
}

fn u32_of(arg: &'static str, x: usize) -> Result<u32> {
    u32::try_from(x).map_err(|_| EngineError::Cuda {
        op: "launch",
        reason: format!("`{arg}` = {x} exceeds u32"),
    })
}

fn rows_cfg(rows: usize) -> Result<LaunchConfig> {
    Ok(LaunchConfig {
        grid_dim: (u32_of("rows", rows.max(1))?, 1, 1),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    })
}

fn flat_cfg(n: usize) -> Result<LaunchConfig> {
    Ok(LaunchConfig {
        grid_dim: (
            u32_of("elements", n.div_ceil(THREADS as usize).max(1))?,
            1,
            1,
        ),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    })
}

impl Ops {
    /// Compiles `ops_src.cu` with NVRTC (for `compute_80`, which newer GPUs JIT) and loads it.
    pub(crate) fn load(kernels: &CudaKernels) -> Result<Self> {
        let opts = CompileOptions {
            arch: Some("compute_80"),
            fmad: Some(false),
            ..Default::default()
        };
        let ptx = catch("loading NVRTC (libnvrtc)", || {
            cudarc::nvrtc::compile_ptx_with_opts(SOURCE, opts)
        })?
        .map_err(|e| cuda_err("compiling ops_src.cu with NVRTC", e))?;
        let module = kernels
            .context()
            .load_module(ptx)
            .map_err(|e| cuda_err("loading ops_src.cu", e))?;
        let f = |name: &str| {
            module
                .load_function(name)
                .map_err(|e| cuda_err("loading an ops kernel", e))
        };
        Ok(Self {
            embed_f32: f("embed_f32")?,
            embed_bf16: f("embed_bf16")?,
            gather_rows: f("gather_rows")?,
            rms_norm: f("rms_norm")?,
            rope: f("rope")?,
            silu_mul: f("silu_mul")?,
            add_bias: f("add_bias")?,
            cast_f32_bf16: f("cast_f32_bf16")?,
            fill_random_bf16: f("fill_random_bf16")?,
            fill_random_f32: f("fill_random_f32")?,
            _module: module,
        })
    }
}

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
        check("ids", ids.len(), tokens)?;
        check("out", out.len(), tokens * hidden)?;
        let (t, h) = (u32_of("tokens", tokens)?, u32_of("hidden", hidden)?);
        let cfg = rows_cfg(tokens)?;
        let stream = self.stream();
        match table {
            DeviceData::F32(w) => {
                let mut b = stream.launch_builder(&self.ops.embed_f32);
                b.arg(w).arg(ids).arg(out).arg(&t).arg(&h);
                // SAFETY: matches `embed_f32`; out holds tokens * hidden, ids tokens ids below
                // the table's rows (validated by the model against the vocabulary).
                unsafe { b.launch(cfg) }.map_err(|e| cuda_err("embed", e))?;
            }
            DeviceData::Bf16(w) => {
                let mut b = stream.launch_builder(&self.ops.embed_bf16);
                b.arg(w).arg(ids).arg(out).arg(&t).arg(&h);
                // SAFETY: as above, for `embed_bf16`.
                unsafe { b.launch(cfg) }.map_err(|e| cuda_err("embed", e))?;
            }
        }
        Ok(())
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
        check("rows", rows.len(), n)?;
        check("out", out.len(), n * hidden)?;
        let (nn, h) = (u32_of("rows", n)?, u32_of("hidden", hidden)?);
        let mut b = self.stream().launch_builder(&self.ops.gather_rows);
        b.arg(x).arg(rows).arg(out).arg(&nn).arg(&h);
        // SAFETY: matches `gather_rows`; out holds n * hidden; every row index was built by the
        // forward pass from offsets inside its batch, below x's rows.
        unsafe { b.launch(rows_cfg(n)?) }.map_err(|e| cuda_err("gather_rows", e))?;
        Ok(())
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
        check("x", x.len(), rows * hidden)?;
        check("w", w.len(), hidden)?;
        check("out", out.len(), rows * hidden)?;
        let (r, h) = (u32_of("rows", rows)?, u32_of("hidden", hidden)?);
        let mut b = self.stream().launch_builder(&self.ops.rms_norm);
        b.arg(x).arg(w).arg(out).arg(&r).arg(&h).arg(&eps);
        // SAFETY: matches `rms_norm` (256 threads, its shared array's size); lengths checked.
        unsafe { b.launch(rows_cfg(rows)?) }.map_err(|e| cuda_err("rms_norm", e))?;
        Ok(())
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
        let n = tokens * heads * half;
        check("x", x.len(), 2 * n)?;
        check("pos", pos.len(), tokens)?;
        let (t, h, hf, il) = (
            u32_of("tokens", tokens)?,
            u32_of("heads", heads)?,
            u32_of("half", half)?,
            u32::from(interleaved),
        );
        let mut b = self.stream().launch_builder(&self.ops.rope);
        b.arg(x)
            .arg(pos)
            .arg(cos)
            .arg(sin)
            .arg(&t)
            .arg(&h)
            .arg(&hf)
            .arg(&il);
        // SAFETY: matches `rope`; x holds tokens * heads * 2 * half; positions were validated
        // against the context length, and cos/sin hold context * half each.
        unsafe { b.launch(flat_cfg(n)?) }.map_err(|e| cuda_err("rope", e))?;
        Ok(())
    }

    /// `g = silu(g) * u` over the first `n` elements.
    pub(crate) fn silu_mul(
        &self,
        g: &mut CudaSlice<f32>,
        u: &CudaSlice<f32>,
        n: usize,
    ) -> Result<()> {
        check("g", g.len(), n)?;
        check("u", u.len(), n)?;
        let nn = n as u64;
        let mut b = self.stream().launch_builder(&self.ops.silu_mul);
        b.arg(g).arg(u).arg(&nn);
        // SAFETY: matches `silu_mul`; both buffers hold n elements.
        unsafe { b.launch(flat_cfg(n)?) }.map_err(|e| cuda_err("silu_mul", e))?;
        Ok(())
    }

    /// `y[r] += bias` for `rows` rows of `cols`.
    pub(crate) fn add_bias(
        &self,
        y: &mut CudaSlice<f32>,
        bias: &CudaSlice<f32>,
        rows: usize,
        cols: usize,
    ) -> Result<()> {
        check("y", y.len(), rows * cols)?;
        check("bias", bias.len(), cols)?;
        let (r, c) = (u32_of("rows", rows)?, u32_of("cols", cols)?);
        let mut b = self.stream().launch_builder(&self.ops.add_bias);
        b.arg(y).arg(bias).arg(&r).arg(&c);
        // SAFETY: matches `add_bias`; lengths checked.
        unsafe { b.launch(flat_cfg(rows * cols)?) }.map_err(|e| cuda_err("add_bias", e))?;
        Ok(())
    }

    /// The first `n` elements of `x` as bf16 into `out`.
    pub(crate) fn cast_bf16(
        &self,
        x: &CudaSlice<f32>,
        out: &mut CudaSlice<bf16>,
        n: usize,
    ) -> Result<()> {
        check("x", x.len(), n)?;
        check("out", out.len(), n)?;
        let nn = n as u64;
        let mut b = self.stream().launch_builder(&self.ops.cast_f32_bf16);
        b.arg(x).arg(out).arg(&nn);
        // SAFETY: matches `cast_f32_bf16` (bf16 is 16 bits, as the kernel's unsigned short).
        unsafe { b.launch(flat_cfg(n)?) }.map_err(|e| cuda_err("cast_f32_bf16", e))?;
        Ok(())
    }

    /// Fills `out` with uniform values in `[-scale, scale)` from `seed` (a random model).
    pub(crate) fn fill_random(&self, out: &mut DeviceData, seed: u64, scale: f32) -> Result<()> {
        let n = out.len();
        let nn = n as u64;
        let cfg = flat_cfg(n)?;
        let stream = self.stream();
        match out {
            DeviceData::F32(s) => {
                let mut b = stream.launch_builder(&self.ops.fill_random_f32);
                b.arg(s).arg(&nn).arg(&seed).arg(&scale);
                // SAFETY: matches `fill_random_f32`; writes the buffer's n elements.
                unsafe { b.launch(cfg) }.map_err(|e| cuda_err("fill_random", e))?;
            }
            DeviceData::Bf16(s) => {
                let mut b = stream.launch_builder(&self.ops.fill_random_bf16);
                b.arg(s).arg(&nn).arg(&seed).arg(&scale);
                // SAFETY: matches `fill_random_bf16`; writes the buffer's n elements.
                unsafe { b.launch(cfg) }.map_err(|e| cuda_err("fill_random", e))?;
            }
        }
        Ok(())
    }
}
