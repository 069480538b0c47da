//! Model hyper-parameters, independent of the file format they were read from.
//!
//! Both loaders (GGUF and safetensors) produce a [`ModelConfig`]; the forward pass reads only
//! this. The architecture's layer options come with it (a description from `models/`); the
//! shape and RoPE parameters are the file's.

use super::models::Architecture;

/// How rotary embeddings pair the dimensions of a head.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum RopeStyle {
    /// Pairs `(2i, 2i+1)`: llama weights as llama.cpp stores them in GGUF (q/k rows permuted).
    Interleaved,
    /// Pairs `(i, i + d/2)`: HF checkpoints, and qwen2 in any format.
    Halves,
}

/// Everything the forward pass needs to know about a model's shape.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ModelConfig {
    /// Which decoder architecture (its layer options; registered in `models/`).
    pub architecture: &'static Architecture,
    /// Vocabulary size (rows of the embedding).
    pub vocab_size: usize,
    /// Width of the residual stream.
    pub hidden_size: usize,
    /// Width of the MLP.
    pub intermediate_size: usize,
    /// Number of decoder blocks.
    pub num_layers: usize,
    /// Query heads.
    pub num_heads: usize,
    /// Key/value heads (fewer than query heads under GQA).
    pub num_kv_heads: usize,
    /// Dimension of one head.
    pub head_dim: usize,
    /// RoPE base frequency.
    pub rope_theta: f64,
    /// RoPE pairing convention.
    pub rope_style: RopeStyle,
    /// RMSNorm epsilon.
    pub rms_norm_eps: f64,
    /// Longest sequence (prompt plus generation) the model accepts.
    pub context_length: usize,
}

impl ModelConfig {
    /// Query heads that share one key/value head.
    pub fn gqa_group(&self) -> usize {
        self.num_heads / self.num_kv_heads.max(1)
    }

    /// Checks the shape is self-consistent, so the forward pass can rely on it.
    pub(crate) fn validate(&self) -> Result<(), String> {
        if self.num_heads == 0 || self.num_kv_heads == 0 || self.num_layers == 0 {
            return Err(format!(
                "heads ({}), kv heads ({}) and layers ({}) must be positive",
                self.num_heads, self.num_kv_heads, self.num_layers
            ));
        }
        if !self.num_heads.is_multiple_of(self.num_kv_heads) {
            return Err(format!(
                "{} query heads are not a multiple of {} kv heads",
                self.num_heads, self.num_kv_heads
            ));
        }
        if self.head_dim == 0 || !self.head_dim.is_multiple_of(2) {
            return Err(format!(
                "head dimension {} must be even and positive",
                self.head_dim
            ));
        }
        if self.context_length == 0 || self.vocab_size == 0 {
            return Err("context length and vocabulary size must be positive".into());
        }
        Ok(())
    }
}
