//! Qwen2 (Qwen2.5, DeepSeek-R1-Distill-Qwen, Qwen2.5-Math-PRM): the llama block with a bias on
//! the q, k and v projections.
//!
//! llama.cpp stores qwen2's q/k rows as transformers has them, so RoPE pairs halves in both
//! formats; llama.cpp's default RoPE base for qwen2 is 1 000 000.

use super::{Activation, Architecture, GgufLayout, LayerOptions, RopeStyle, TensorNames};

/// The qwen2 architecture.
pub(crate) static QWEN2: Architecture = Architecture {
    name: "qwen2",
    layer: LayerOptions {
        qkv_bias: true,
        qk_norm: false,
        activation: Activation::Silu,
    },
    gguf: GgufLayout {
        names: TensorNames::LLAMA_CPP,
        rope_style: RopeStyle::Halves,
        rope_theta: 1_000_000.0,
    },
    hf: TensorNames::TRANSFORMERS,
};
