//! The tensors of a decoder, whatever file they came from.
//!
//! Projections are [`QMatMul`]s: quantized GGUF blocks stay quantized and are multiplied by
//! candle's CPU (or CUDA) q-matmul; dense safetensors weights use the `QMatMul::Tensor` variant,
//! so the forward pass has one code path. Norm weights and the embedding table are dense f32.

use candle_core::quantized::QMatMul;
use candle_core::{Module, Tensor};

use super::error::Result;

/// A projection `y = x Wᵀ (+ b)`.
#[derive(Debug, Clone)]
pub(crate) struct Linear {
    weight: QMatMul,
    bias: Option<Tensor>,
}

impl Linear {
    pub(crate) fn new(weight: QMatMul, bias: Option<Tensor>) -> Self {
        Self { weight, bias }
    }

    /// `x`: `[tokens, in]` → `[tokens, out]`.
    pub(crate) fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let y = self.weight.forward(x)?;
        Ok(match &self.bias {
            Some(b) => y.broadcast_add(b)?,
            None => y,
        })
    }
}

/// One decoder block.
#[derive(Debug, Clone)]
pub(crate) struct LayerWeights {
    pub(crate) attn_norm: Tensor,
    pub(crate) q_proj: Linear,
    pub(crate) k_proj: Linear,
    pub(crate) v_proj: Linear,
    pub(crate) o_proj: Linear,
    pub(crate) ffn_norm: Tensor,
    pub(crate) gate_proj: Linear,
    pub(crate) up_proj: Linear,
    pub(crate) down_proj: Linear,
}

/// All tensors of a model.
#[derive(Debug, Clone)]
pub(crate) struct ModelWeights {
    /// `[vocab, hidden]`, dense f32.
    pub(crate) embed: Tensor,
    pub(crate) layers: Vec<LayerWeights>,
    pub(crate) final_norm: Tensor,
    pub(crate) lm_head: Linear,
}
