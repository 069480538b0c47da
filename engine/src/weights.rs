//! The tensors of a decoder, whatever file they came from, and their assembly: a loader
//! implements [`TensorSource`] (read one tensor by name) and [`read_weights`] asks the
//! architecture (`models/`) which names make up the decoder, once for every format.
//!
//! Projections stay in their file's format. On CPU, Q4_1 and Q8_0 GGUF matrices run on our own
//! batch-invariant SIMD kernel ([`QuantMatrix`]: bitwise equal to candle's generic Q4_1 path,
//! several times faster, and a row's result never depends on what it is batched with); other
//! quantized types use candle's q-matmul, and dense safetensors weights the `QMatMul::Tensor`
//! variant. Norm weights and the embedding table are dense f32.

use candle_core::quantized::QMatMul;
use candle_core::{CpuStorage, Module, Storage, Tensor};
use ponder_kernels::{KernelError, QuantMatrix};

use super::error::Result;
use super::models::{Architecture, LayerOptions, TensorNames};

/// The weight of a projection.
#[derive(Debug, Clone)]
pub(crate) enum Projection {
    /// Candle's matmul (dense, or quantized types our kernel does not cover).
    Candle(QMatMul),
    /// Our CPU kernel.
    Kernel(QuantMatrix),
}

/// A projection `y = x Wᵀ (+ b)`.
#[derive(Debug, Clone)]
pub(crate) struct Linear {
    weight: Projection,
    bias: Option<Tensor>,
}

impl Linear {
    pub(crate) fn new(weight: Projection, bias: Option<Tensor>) -> Self {
        Self { weight, bias }
    }

    /// The weight (the CUDA path uploads it).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn weight(&self) -> &Projection {
        &self.weight
    }

    /// The bias, if any.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn bias(&self) -> Option<&Tensor> {
        self.bias.as_ref()
    }

    /// `x`: `[tokens, in]` → `[tokens, out]`.
    pub(crate) fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let y = match &self.weight {
            Projection::Candle(w) => w.forward(x)?,
            Projection::Kernel(w) => {
                Tensor::from_vec(kernel_rows(w, x)?, (x.dims2()?.0, w.rows()), x.device())?
            }
        };
        Ok(match &self.bias {
            Some(b) => y.broadcast_add(b)?,
            None => y,
        })
    }

    /// [`Linear::forward`] as a row-major `[tokens, out]` vector: our kernel's output as it
    /// comes when there is no bias, without a tensor around it.
    pub(crate) fn forward_vec(&self, x: &Tensor) -> Result<Vec<f32>> {
        match (&self.weight, &self.bias) {
            (Projection::Kernel(w), None) => kernel_rows(w, x),
            _ => Ok(self.forward(x)?.flatten_all()?.to_vec1()?),
        }
    }
}

/// Projections that read the same input (q/k/v, gate/up) as one stacked kernel matrix: one
/// matmul call computes all their outputs (one activation quantization, one parallel region),
/// each bitwise what its own matmul gives (`QuantMatrix::stack`).
#[derive(Debug, Clone)]
pub(crate) struct Stacked<const N: usize> {
    matrix: QuantMatrix,
    widths: [usize; N],
}

impl<const N: usize> Stacked<N> {
    /// Stacks `parts` when each is a bias-free kernel projection and they fit one matrix; the
    /// parts then become views of the stack, so it costs no memory. `None` (parts untouched)
    /// otherwise: candle matrices, a bias (Qwen2's q/k/v), mixed formats or shapes.
    pub(crate) fn of(parts: [&mut Linear; N]) -> Option<Self> {
        let mut matrices = Vec::with_capacity(N);
        for part in &parts {
            match (&part.weight, &part.bias) {
                (Projection::Kernel(w), None) => matrices.push(w.clone()),
                _ => return None,
            }
        }
        let widths: [usize; N] = matrices
            .iter()
            .map(QuantMatrix::rows)
            .collect::<Vec<_>>()
            .try_into()
            .ok()?;
        let (matrix, views) = QuantMatrix::stack(&matrices).ok()?;
        for (part, view) in parts.into_iter().zip(views) {
            part.weight = Projection::Kernel(view);
        }
        Some(Self { matrix, widths })
    }

    /// Each part's output for `x` (`[tokens, in]`): `[tokens, width]` row-major per part,
    /// written there by the kernel (no copy).
    pub(crate) fn forward(&self, x: &Tensor) -> Result<[Vec<f32>; N]> {
        let (rows, _) = x.dims2()?;
        let parts = with_rows(x, |input| {
            Ok(self.matrix.matmul_parts_vec(input, rows, &self.widths)?)
        })?;
        // One vector per width, so this always converts.
        parts.try_into().map_err(|p: Vec<Vec<f32>>| {
            KernelError::OutputParts {
                part: p.len(),
                reason: format!("{} outputs for {N} parts", p.len()),
            }
            .into()
        })
    }
}

/// `x Wᵀ` through our kernel, `[tokens, out]` row-major.
fn kernel_rows(w: &QuantMatrix, x: &Tensor) -> Result<Vec<f32>> {
    let (rows, _) = x.dims2()?;
    with_rows(x, |input| Ok(w.matmul_vec(input, rows)?))
}

/// Runs `f` on `x`'s elements as one row-major slice: a contiguous f32 CPU tensor is read in
/// place (no copy of the activations), anything else is copied out first.
fn with_rows<T>(x: &Tensor, f: impl FnOnce(&[f32]) -> Result<T>) -> Result<T> {
    let (storage, layout) = x.storage_and_layout();
    let borrowed = match (&*storage, layout.contiguous_offsets()) {
        (Storage::Cpu(CpuStorage::F32(data)), Some((start, end))) => data.get(start..end),
        _ => None,
    };
    match borrowed {
        Some(input) => f(input),
        None => {
            drop(storage);
            let input: Vec<f32> = x.flatten_all()?.to_vec1()?;
            f(&input)
        }
    }
}

/// One decoder block.
#[derive(Debug, Clone)]
pub(crate) struct LayerWeights {
    pub(crate) attn_norm: Tensor,
    pub(crate) q_proj: Linear,
    pub(crate) k_proj: Linear,
    pub(crate) v_proj: Linear,
    /// Per-head query and key norms, `[head_dim]` each ([`LayerOptions::qk_norm`]).
    pub(crate) qk_norm: Option<(Tensor, Tensor)>,
    pub(crate) o_proj: Linear,
    pub(crate) ffn_norm: Tensor,
    pub(crate) gate_proj: Linear,
    pub(crate) up_proj: Linear,
    pub(crate) down_proj: Linear,
    /// q, k and v as one matrix, when they stack ([`LayerWeights::with_stacks`]).
    pub(crate) qkv: Option<Stacked<3>>,
    /// gate and up as one matrix, when they stack.
    pub(crate) gate_up: Option<Stacked<2>>,
}

impl LayerWeights {
    /// Stacks q/k/v and gate/up where [`Stacked::of`] can (the loaders call this last).
    pub(crate) fn with_stacks(mut self) -> Self {
        self.qkv = Stacked::of([&mut self.q_proj, &mut self.k_proj, &mut self.v_proj]);
        self.gate_up = Stacked::of([&mut self.gate_proj, &mut self.up_proj]);
        self
    }
}

/// All tensors of a model.
#[derive(Debug, Clone)]
pub(crate) struct ModelWeights {
    /// `[vocab, hidden]`, dense f32.
    pub(crate) embed: Tensor,
    pub(crate) layers: Vec<LayerWeights>,
    pub(crate) final_norm: Tensor,
    /// `None` for a model with only a score head (a process reward model).
    pub(crate) lm_head: Option<Linear>,
}

/// A file's tensors by name, as the forward pass stores them: what a loader implements so that
/// [`read_weights`] can assemble a decoder from any format.
pub(crate) trait TensorSource {
    /// A dense f32 tensor (a norm, a bias, the embedding table).
    fn dense(&mut self, name: &str) -> Result<Tensor>;

    /// A projection weight `[out, in]`, in the format the file (and the loader's options) give.
    fn projection(&mut self, name: &str) -> Result<Projection>;
}

/// Reads a decoder of `num_layers` blocks of `arch` whose tensors are named by `names`, and its
/// language-model head from tensor `lm_head` (`None`: a model with only a score head). Every
/// name is `names`' field plus `.weight` or `.bias`.
pub(crate) fn read_weights(
    src: &mut dyn TensorSource,
    arch: &Architecture,
    names: &TensorNames,
    num_layers: usize,
    lm_head: Option<&str>,
) -> Result<ModelWeights> {
    let embed = src.dense(&format!("{}.weight", names.embed))?;
    let final_norm = src.dense(&format!("{}.weight", names.final_norm))?;
    let lm_head = match lm_head {
        Some(name) => Some(Linear::new(
            src.projection(&format!("{name}.weight"))?,
            None,
        )),
        None => None,
    };
    let layers = (0..num_layers)
        .map(|i| read_layer(src, &arch.layer, names, i))
        .collect::<Result<Vec<_>>>()?;
    Ok(ModelWeights {
        embed,
        layers,
        final_norm,
        lm_head,
    })
}

fn read_layer(
    src: &mut dyn TensorSource,
    options: &LayerOptions,
    names: &TensorNames,
    i: usize,
) -> Result<LayerWeights> {
    let mut linear = |name: &str, with_bias: bool| -> Result<Linear> {
        let name = names.layer(i, name);
        let weight = src.projection(&format!("{name}.weight"))?;
        let bias = if with_bias {
            Some(src.dense(&format!("{name}.bias"))?)
        } else {
            None
        };
        Ok(Linear::new(weight, bias))
    };
    let q_proj = linear(names.q, options.qkv_bias)?;
    let k_proj = linear(names.k, options.qkv_bias)?;
    let v_proj = linear(names.v, options.qkv_bias)?;
    let o_proj = linear(names.o, false)?;
    let gate_proj = linear(names.gate, false)?;
    let up_proj = linear(names.up, false)?;
    let down_proj = linear(names.down, false)?;
    let mut norm = |name: &str| src.dense(&format!("{}.weight", names.layer(i, name)));
    let qk_norm = if options.qk_norm {
        Some((norm(names.q_norm)?, norm(names.k_norm)?))
    } else {
        None
    };
    Ok(LayerWeights {
        attn_norm: norm(names.attn_norm)?,
        ffn_norm: norm(names.ffn_norm)?,
        q_proj,
        k_proj,
        v_proj,
        qk_norm,
        o_proj,
        gate_proj,
        up_proj,
        down_proj,
        qkv: None,
        gate_up: None,
    }
    .with_stacks())
}
