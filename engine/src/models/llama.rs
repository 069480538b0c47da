//! Llama (SmolLM2, Llama 2/3, and Mistral, which shares its layout): the plain block —
//! bias-free projections, RMSNorm before attention and MLP, RoPE on q and k, SiLU-gated MLP.
//!
//! llama.cpp's converter permutes the q/k rows of llama weights so that RoPE pairs adjacent
//! dimensions (interleaved); Hugging Face checkpoints keep transformers' halves.

use super::{Activation, Architecture, GgufLayout, LayerOptions, RopeStyle, TensorNames};

/// The llama architecture.
pub(crate) static LLAMA: Architecture = Architecture {
    name: "llama",
    layer: LayerOptions {
        qkv_bias: false,
        qk_norm: false,
        activation: Activation::Silu,
    },
    gguf: GgufLayout {
        names: TensorNames::LLAMA_CPP,
        rope_style: RopeStyle::Interleaved,
        rope_theta: 10_000.0,
    },
    hf: TensorNames::TRANSFORMERS,
};
