//! Rotary position embeddings applied in place to token-major packed heads: a model's angle
//! tables, and the rotation (`ponder_kernels::decoder_ops::rope`, the CPU twin of the CUDA
//! pass's `rope` kernel, which gets these same tables uploaded).
//!
//! Rows are `[tokens, heads, head_dim]`, each token at its own position, so one call rotates the
//! queries (or keys) of every sequence in a batch. The arithmetic is candle's `rope_i` / `rope`
//! expression for expression (`x0·cos − x1·sin`, `x0·sin + x1·cos`, no fused multiply-add), so
//! results are bitwise those of the candle-transformers reference. The angle table is computed
//! in f32 exactly as llama.cpp-derived references do.

use super::config::{ModelConfig, RopeStyle};

/// Precomputed `cos` / `sin` of every position's angles.
#[derive(Debug, Clone)]
pub(crate) struct Rope {
    style: RopeStyle,
    half: usize,
    /// `[context, half]`.
    cos: Vec<f32>,
    sin: Vec<f32>,
}

impl Rope {
    pub(crate) fn new(config: &ModelConfig) -> Self {
        let half = config.head_dim / 2;
        let theta = config.rope_theta as f32;
        let inv_freq: Vec<f32> = (0..half)
            .map(|i| 1f32 / theta.powf((2 * i) as f32 / config.head_dim as f32))
            .collect();
        let mut cos = Vec::with_capacity(config.context_length * half);
        let mut sin = Vec::with_capacity(config.context_length * half);
        for pos in 0..config.context_length {
            for f in &inv_freq {
                let angle = pos as f32 * f;
                cos.push(angle.cos());
                sin.push(angle.sin());
            }
        }
        Self {
            style: config.rope_style,
            half,
            cos,
            sin,
        }
    }

    /// The `[context, half]` cos and sin tables (the CUDA pass uploads them).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn tables(&self) -> (&[f32], &[f32]) {
        (&self.cos, &self.sin)
    }

    /// Rotates `rows` (`positions.len()` tokens × `heads` × `2 * half`) in place.
    pub(crate) fn apply(&self, rows: &mut [f32], heads: usize, positions: &[usize]) {
        ponder_kernels::decoder_ops::rope(
            rows,
            heads,
            positions,
            (&self.cos, &self.sin),
            self.half,
            self.style == RopeStyle::Interleaved,
        );
    }
}
