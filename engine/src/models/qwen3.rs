//! Qwen3 (Qwen3 dense models, the Qwen3 reasoning releases): the llama block with an RMSNorm on
//! each query and key head (`q_norm` / `k_norm`, one `[head_dim]` weight each) between the
//! projection and RoPE, and no q/k/v biases. The head dimension is the config's (`head_dim`,
//! GGUF `qwen3.attention.key_length`), not `hidden / heads`.
//!
//! llama.cpp stores qwen3's q/k rows as transformers has them (NeoX RoPE), so RoPE pairs halves
//! in both formats.

use super::{Activation, Architecture, GgufLayout, LayerOptions, RopeStyle, TensorNames};

/// The qwen3 architecture.
pub(crate) static QWEN3: Architecture = Architecture {
    name: "qwen3",
    layer: LayerOptions {
        qkv_bias: false,
        qk_norm: true,
        activation: Activation::Silu,
    },
    gguf: GgufLayout {
        names: TensorNames::LLAMA_CPP,
        rope_style: RopeStyle::Halves,
        rope_theta: 1_000_000.0,
    },
    hf: TensorNames::TRANSFORMERS,
};
