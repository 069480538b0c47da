//! Launchers for `cuda/decoder_ops.cu`: the decoder layer's small kernels around the matmuls
//! and attention (row gathers, RMSNorm, RoPE, the SiLU gate, the bias add, f32 narrowing, the
//! random fill), each the twin of a CPU function in [`crate::decoder_ops`].
//!
//! Every launcher checks the lengths of the device buffers it is given against the sizes it is
//! given (`CudaError::DeviceLen` otherwise) before it launches, so no launch reads or writes
//! outside a buffer; indices held on the device (token ids, positions, rows) are bounded by
//! the kernels themselves. Each kernel's parameter list is declared once here ([`KERNELS`]):
//! the test in `device.rs` checks it against the PTX, and [`Args`] checks every launch's
//! arguments against it, so a launcher and its kernel cannot drift apart unnoticed.
#![allow(unsafe_code)]

use cudarc::driver::{
    CudaFunction, CudaModule, CudaSlice, CudaStream, LaunchArgs, LaunchConfig, PushKernelArg,
};
use std::sync::Arc;

use super::device::CudaKernels;
use super::error::{u32_arg, CudaError};
use crate::kv::{KvDtype, KvElem};

/// Threads per CTA (`rms_norm` requires exactly this many: its reduction array's size).
const THREADS: u32 = 256;

/// A kernel parameter's type, as the launcher pushes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Param {
    /// A device pointer (a `CudaSlice`).
    Ptr,
    /// `uint32_t`.
    U32,
    /// `uint64_t`.
    U64,
    /// `float`.
    F32,
}

impl Param {
    /// How the PTX declares it (`.param .u64 name_param_0`): a pointer is a `.u64`.
    #[cfg(test)]
    pub(crate) fn ptx(self) -> &'static str {
        match self {
            Param::Ptr | Param::U64 => ".u64",
            Param::U32 => ".u32",
            Param::F32 => ".f32",
        }
    }
}

/// A kernel of `decoder_ops.cu` and the parameters its launcher pushes.
#[derive(Debug)]
pub(crate) struct Kernel {
    /// The entry point's name, or its stem when `per_dtype` (`gather_rows` ->
    /// `gather_rows_f32`, `_f16`, `_bf16`).
    pub(crate) name: &'static str,
    /// One entry point per KV element type.
    pub(crate) per_dtype: bool,
    /// The parameters, in order.
    pub(crate) params: &'static [Param],
}

impl Kernel {
    /// The entry point for `dtype` (ignored unless `per_dtype`).
    pub(crate) fn entry(&self, dtype: KvDtype) -> String {
        if self.per_dtype {
            format!("{}_{}", self.name, dtype.name())
        } else {
            self.name.to_string()
        }
    }
}

use Param::{Ptr, F32, U32, U64};

const GATHER_ROWS: Kernel = Kernel {
    name: "gather_rows",
    per_dtype: true,
    params: &[Ptr, Ptr, Ptr, U32, U32, U32],
};
const FROM_F32: Kernel = Kernel {
    name: "from_f32",
    per_dtype: true,
    params: &[Ptr, Ptr, U64],
};
const FILL_RANDOM: Kernel = Kernel {
    name: "fill_random",
    per_dtype: true,
    params: &[Ptr, U64, U64, F32],
};
const RMS_NORM: Kernel = Kernel {
    name: "rms_norm",
    per_dtype: false,
    params: &[Ptr, Ptr, Ptr, U32, U32, F32],
};
const ROPE: Kernel = Kernel {
    name: "rope",
    per_dtype: false,
    params: &[Ptr, Ptr, Ptr, Ptr, U32, U32, U32, U32, U32],
};
const SILU_MUL: Kernel = Kernel {
    name: "silu_mul",
    per_dtype: false,
    params: &[Ptr, Ptr, U64],
};
const ADD_BIAS: Kernel = Kernel {
    name: "add_bias",
    per_dtype: false,
    params: &[Ptr, Ptr, U32, U32],
};

/// Every kernel the launchers below use (checked against the PTX in `device.rs`).
#[cfg(test)]
pub(crate) const KERNELS: [&Kernel; 7] = [
    &GATHER_ROWS,
    &FROM_F32,
    &FILL_RANDOM,
    &RMS_NORM,
    &ROPE,
    &SILU_MUL,
    &ADD_BIAS,
];

/// The three KV element types, in the order [`DecoderOps`] holds per-dtype functions.
const DTYPES: [KvDtype; 3] = [KvDtype::F32, KvDtype::F16, KvDtype::Bf16];

fn dtype_index(dtype: KvDtype) -> usize {
    match dtype {
        KvDtype::F32 => 0,
        KvDtype::F16 => 1,
        KvDtype::Bf16 => 2,
    }
}

/// The functions of `decoder_ops.cu`, looked up once when the module loads (these run several
/// times per layer, so a launch does not look its kernel up again).
#[derive(Debug)]
pub(crate) struct DecoderOps {
    gather_rows: [CudaFunction; 3],
    from_f32: [CudaFunction; 3],
    fill_random: [CudaFunction; 3],
    rms_norm: CudaFunction,
    rope: CudaFunction,
    silu_mul: CudaFunction,
    add_bias: CudaFunction,
}

impl DecoderOps {
    /// Looks every kernel up in `module`.
    pub(crate) fn load(module: &Arc<CudaModule>) -> Result<Self, CudaError> {
        let one = |k: &Kernel, dtype: KvDtype| -> Result<CudaFunction, CudaError> {
            Ok(module.load_function(&k.entry(dtype))?)
        };
        let each = |k: &Kernel| -> Result<[CudaFunction; 3], CudaError> {
            Ok([one(k, DTYPES[0])?, one(k, DTYPES[1])?, one(k, DTYPES[2])?])
        };
        Ok(Self {
            gather_rows: each(&GATHER_ROWS)?,
            from_f32: each(&FROM_F32)?,
            fill_random: each(&FILL_RANDOM)?,
            rms_norm: one(&RMS_NORM, KvDtype::F32)?,
            rope: one(&ROPE, KvDtype::F32)?,
            silu_mul: one(&SILU_MUL, KvDtype::F32)?,
            add_bias: one(&ADD_BIAS, KvDtype::F32)?,
        })
    }
}

/// A launch's arguments, pushed in order and checked against the kernel's [`Kernel::params`]
/// before it launches.
struct Args<'a> {
    builder: LaunchArgs<'a>,
    kernel: &'static Kernel,
    pushed: Vec<Param>,
}

impl<'a> Args<'a> {
    fn new(stream: &'a CudaStream, f: &'a CudaFunction, kernel: &'static Kernel) -> Self {
        Self {
            builder: stream.launch_builder(f),
            kernel,
            pushed: Vec::with_capacity(kernel.params.len()),
        }
    }

    fn slice<T>(&mut self, s: &'a CudaSlice<T>) -> &mut Self {
        self.builder.arg(s);
        self.pushed.push(Ptr);
        self
    }

    fn slice_mut<T>(&mut self, s: &'a mut CudaSlice<T>) -> &mut Self {
        self.builder.arg(s);
        self.pushed.push(Ptr);
        self
    }

    fn u32(&mut self, v: &'a u32) -> &mut Self {
        self.builder.arg(v);
        self.pushed.push(U32);
        self
    }

    fn u64(&mut self, v: &'a u64) -> &mut Self {
        self.builder.arg(v);
        self.pushed.push(U64);
        self
    }

    fn f32(&mut self, v: &'a f32) -> &mut Self {
        self.builder.arg(v);
        self.pushed.push(F32);
        self
    }

    /// Launches with `cfg` once the arguments match the kernel's parameter list.
    ///
    /// # Safety
    /// The buffers must hold what the kernel reads and writes for the sizes pushed (each
    /// launcher checks that first).
    unsafe fn launch(mut self, cfg: LaunchConfig) -> Result<(), CudaError> {
        if self.pushed != self.kernel.params {
            return Err(CudaError::ArgumentList {
                kernel: self.kernel.name,
                pushed: format!("{:?}", self.pushed),
                declared: format!("{:?}", self.kernel.params),
            });
        }
        // SAFETY: the argument types and order match the kernel's declaration (checked above,
        // and against the PTX by the tests); lengths are the caller's obligation.
        unsafe { self.builder.launch(cfg) }?;
        Ok(())
    }
}

/// `DeviceLen` unless `got >= need`.
fn at_least(arg: &'static str, got: usize, need: usize) -> Result<(), CudaError> {
    if got < need {
        return Err(CudaError::DeviceLen {
            arg,
            got,
            expected: need,
        });
    }
    Ok(())
}

/// `a * b`, or `TooLarge` naming `arg` when it overflows.
fn product(arg: &'static str, a: usize, b: usize) -> Result<usize, CudaError> {
    a.checked_mul(b).ok_or(CudaError::TooLarge {
        arg,
        value: a,
        max: usize::MAX / b.max(1),
    })
}

/// One CTA of [`THREADS`] per row.
fn rows_cfg(rows: usize) -> Result<LaunchConfig, CudaError> {
    Ok(LaunchConfig {
        grid_dim: (u32_arg("rows", rows)?, 1, 1),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    })
}

/// One thread per element.
fn flat_cfg(n: usize) -> Result<LaunchConfig, CudaError> {
    Ok(LaunchConfig {
        grid_dim: (u32_arg("elements", n.div_ceil(THREADS as usize))?, 1, 1),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    })
}

impl CudaKernels {
    /// `out[r] = table[rows[r]]` widened to f32, for `n` rows of `width` (`[_, width]` tables
    /// of `T`): the embedding lookup and the rows the head reads. A row index past the table
    /// leaves its output row as it was. CPU twin: [`crate::decoder_ops::gather_rows`].
    pub fn gather_rows<T: KvElem>(
        &self,
        table: &CudaSlice<T>,
        rows: &CudaSlice<u32>,
        n: usize,
        width: usize,
        out: &mut CudaSlice<f32>,
    ) -> Result<(), CudaError> {
        at_least("rows", rows.len(), n)?;
        at_least("out", out.len(), product("rows * width", n, width)?)?;
        if n == 0 || width == 0 {
            return Ok(());
        }
        let (nn, w) = (u32_arg("rows", n)?, u32_arg("width", width)?);
        let table_rows = u32_arg("table rows", table.len() / width)?;
        let f = &self.decoder_ops().gather_rows[dtype_index(T::DTYPE)];
        let mut a = Args::new(self.stream(), f, &GATHER_ROWS);
        a.slice(table).slice(rows).slice_mut(out);
        a.u32(&nn).u32(&w).u32(&table_rows);
        // SAFETY: out holds n * width; the kernel reads rows[0..n] (checked) and skips a row
        // index at or past `table_rows`, so it reads only whole rows inside the table.
        unsafe { a.launch(rows_cfg(n)?) }
    }

    /// RMSNorm of `rows` rows of `width` in `x` with weight `w` into `out`. CPU twin (within
    /// float tolerance: the kernel sums in a tree): [`crate::decoder_ops::rms_norm`].
    pub fn rms_norm(
        &self,
        x: &CudaSlice<f32>,
        w: &CudaSlice<f32>,
        out: &mut CudaSlice<f32>,
        rows: usize,
        width: usize,
        eps: f32,
    ) -> Result<(), CudaError> {
        let n = product("rows * width", rows, width)?;
        at_least("x", x.len(), n)?;
        at_least("w", w.len(), width)?;
        at_least("out", out.len(), n)?;
        if n == 0 {
            return Ok(());
        }
        let (r, wd) = (u32_arg("rows", rows)?, u32_arg("width", width)?);
        let f = &self.decoder_ops().rms_norm;
        let mut a = Args::new(self.stream(), f, &RMS_NORM);
        a.slice(x)
            .slice(w)
            .slice_mut(out)
            .u32(&r)
            .u32(&wd)
            .f32(&eps);
        // SAFETY: x and out hold rows * width, w holds width; one CTA of THREADS per row, the
        // block size the kernel's shared array is sized for.
        unsafe { a.launch(rows_cfg(rows)?) }
    }

    /// Rotates `x` (`[tokens, heads, 2 * half]`) in place, token `t` at `pos[t]`, with the
    /// `[context, half]` tables `cos` / `sin`; pairs `(2i, 2i+1)` when `interleaved`, else
    /// `(i, i + half)`. A position past the tables leaves its token unrotated. CPU twin
    /// (bitwise): [`crate::decoder_ops::rope`].
    #[allow(clippy::too_many_arguments)]
    pub fn rope(
        &self,
        x: &mut CudaSlice<f32>,
        pos: &CudaSlice<u32>,
        cos: &CudaSlice<f32>,
        sin: &CudaSlice<f32>,
        tokens: usize,
        heads: usize,
        half: usize,
        interleaved: bool,
    ) -> Result<(), CudaError> {
        let n = product(
            "tokens * heads * half",
            product("tokens * heads", tokens, heads)?,
            half,
        )?;
        at_least("x", x.len(), product("x", n, 2)?)?;
        at_least("pos", pos.len(), tokens)?;
        if n == 0 {
            return Ok(());
        }
        let context = cos.len() / half;
        at_least("sin", sin.len(), context * half)?;
        let (t, h, hf) = (
            u32_arg("tokens", tokens)?,
            u32_arg("heads", heads)?,
            u32_arg("half", half)?,
        );
        let (il, ctx) = (u32::from(interleaved), u32_arg("context", context)?);
        let f = &self.decoder_ops().rope;
        let mut a = Args::new(self.stream(), f, &ROPE);
        a.slice_mut(x).slice(pos).slice(cos).slice(sin);
        a.u32(&t).u32(&h).u32(&hf).u32(&il).u32(&ctx);
        // SAFETY: x holds tokens * heads * 2 * half, pos holds tokens; the kernel skips a
        // position at or past `context`, so it reads cos / sin (context * half each) in bounds.
        unsafe { a.launch(flat_cfg(n)?) }
    }

    /// `g = silu(g) * u` over the first `n` elements. CPU twin (within float tolerance: CUDA's
    /// `expf`): [`crate::math::silu_mul`].
    pub fn silu_mul(
        &self,
        g: &mut CudaSlice<f32>,
        u: &CudaSlice<f32>,
        n: usize,
    ) -> Result<(), CudaError> {
        at_least("g", g.len(), n)?;
        at_least("u", u.len(), n)?;
        if n == 0 {
            return Ok(());
        }
        let nn = n as u64;
        let f = &self.decoder_ops().silu_mul;
        let mut a = Args::new(self.stream(), f, &SILU_MUL);
        a.slice_mut(g).slice(u).u64(&nn);
        // SAFETY: both buffers hold n elements.
        unsafe { a.launch(flat_cfg(n)?) }
    }

    /// `y[r] += bias` for `rows` rows of `cols`. CPU twin (bitwise):
    /// [`crate::decoder_ops::add_bias`].
    pub fn add_bias(
        &self,
        y: &mut CudaSlice<f32>,
        bias: &CudaSlice<f32>,
        rows: usize,
        cols: usize,
    ) -> Result<(), CudaError> {
        let n = product("rows * cols", rows, cols)?;
        at_least("y", y.len(), n)?;
        at_least("bias", bias.len(), cols)?;
        if n == 0 {
            return Ok(());
        }
        let (r, c) = (u32_arg("rows", rows)?, u32_arg("cols", cols)?);
        let f = &self.decoder_ops().add_bias;
        let mut a = Args::new(self.stream(), f, &ADD_BIAS);
        a.slice_mut(y).slice(bias).u32(&r).u32(&c);
        // SAFETY: y holds rows * cols, bias cols.
        unsafe { a.launch(flat_cfg(n)?) }
    }

    /// The first `n` elements of `x` narrowed to `T` into `out` (round to nearest, ties to
    /// even): a bf16 matmul's input. CPU twin (bitwise): [`KvElem::from_f32`].
    pub fn from_f32<T: KvElem>(
        &self,
        x: &CudaSlice<f32>,
        out: &mut CudaSlice<T>,
        n: usize,
    ) -> Result<(), CudaError> {
        at_least("x", x.len(), n)?;
        at_least("out", out.len(), n)?;
        if n == 0 {
            return Ok(());
        }
        let nn = n as u64;
        let f = &self.decoder_ops().from_f32[dtype_index(T::DTYPE)];
        let mut a = Args::new(self.stream(), f, &FROM_F32);
        a.slice(x).slice_mut(out).u64(&nn);
        // SAFETY: both buffers hold n elements; T is the entry point's element type.
        unsafe { a.launch(flat_cfg(n)?) }
    }

    /// Fills `out` with `random_uniform(seed, i) * scale` (uniform in `[-scale, scale)`),
    /// narrowed to `T`: a random model generated on the device. CPU twin (bitwise):
    /// [`crate::decoder_ops::fill_random`].
    pub fn fill_random<T: KvElem>(
        &self,
        out: &mut CudaSlice<T>,
        seed: u64,
        scale: f32,
    ) -> Result<(), CudaError> {
        let n = out.len();
        if n == 0 {
            return Ok(());
        }
        let nn = n as u64;
        let f = &self.decoder_ops().fill_random[dtype_index(T::DTYPE)];
        let mut a = Args::new(self.stream(), f, &FILL_RANDOM);
        a.slice_mut(out).u64(&nn).u64(&seed).f32(&scale);
        // SAFETY: the kernel writes the buffer's n elements.
        unsafe { a.launch(flat_cfg(n)?) }
    }
}
