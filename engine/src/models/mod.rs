//! The decoder architectures the engine runs: one file per architecture, each declaring an
//! [`Architecture`] (its tensor names in GGUF and Hugging Face checkpoints, and its layer
//! options), and the [`REGISTRY`] that maps the name a file gives (GGUF
//! `general.architecture`, HF `model_type`) to that description.
//!
//! Follows candle-transformers' `models/<arch>.rs` and mistral.rs's `models/`, with one
//! difference: an architecture here is data, not code. The forward pass (`model.rs`, and its
//! CUDA twin) is written once and reads the options ([`LayerOptions`]); the loaders (`gguf.rs`,
//! `safetensors.rs`) are plain readers that ask the architecture for tensor names
//! (`weights::read_weights` assembles the [`TensorNames`] once for both formats). An option
//! that a new architecture needs and the forward pass lacks is added to [`LayerOptions`] (and
//! to both forward passes) first, used by no architecture; the architecture's own change then
//! only turns it on.
//!
//! Invariants: names in [`REGISTRY`] are unique; every architecture uses the SiLU-gated MLP,
//! RMSNorm and RoPE of the llama family, varying only in what [`LayerOptions`] says.
//!
//! # Adding an architecture
//!
//! Qwen3 is the worked example; its commit touched exactly three places.
//!
//! 1. **`models/qwen3.rs`** (new): one `static QWEN3: Architecture`. Its [`LayerOptions`] say
//!    what differs from the plain llama block: `qkv_bias: false`, `qk_norm: true` (an RMSNorm
//!    on each query and key head, before RoPE), `activation: Activation::Silu`. Its tensor
//!    names are the shared tables: [`TensorNames::LLAMA_CPP`] for GGUF (`blk.N.attn_q_norm`)
//!    and [`TensorNames::TRANSFORMERS`] for safetensors (`model.layers.N.self_attn.q_norm`).
//!    Its [`GgufLayout`] says llama.cpp stores its q/k rows unpermuted (RoPE pairs halves,
//!    [`RopeStyle::Halves`]) and that a file without `qwen3.rope.freq_base` means 1 000 000.
//!    Everything else (head dimension from `head_dim` / `qwen3.attention.key_length`, GQA,
//!    tied embeddings) the loaders read from the file as for every architecture.
//! 2. **This file**: `mod qwen3;` and the registry line `("qwen3", &qwen3::QWEN3),` — the name
//!    GGUF `general.architecture` and HF `model_type` give.
//! 3. **`tests/qwen3_parity.rs`**: a tiny random checkpoint written by the test as safetensors
//!    and as GGUF, whose logits must match candle-transformers' `qwen3` and `quantized_qwen3`
//!    within 1e-3 at every step of a greedy decode (`util::assert_tracks_reference`), plus a
//!    missing-tensor case.
//!
//! The forward pass did not change in that commit: the per-head q/k norm had been added
//! before as [`LayerOptions::qk_norm`] — a field here, its tensors read in
//! `weights::read_layer`, applied in `cpu.rs` and `cuda/forward.rs` — off for every
//! architecture. Do the same for what yours needs and the options lack (another activation,
//! biases elsewhere, a norm with an offset): add the option, off everywhere, in a commit of its
//! own; the architecture's commit then only turns it on. Tensor names that differ from the
//! shared tables are a struct update: `TensorNames { q: "attn.wq", ..TensorNames::LLAMA_CPP }`.

mod llama;
mod qwen2;
mod qwen3;

use super::config::RopeStyle;

/// Every architecture the engine runs, by the name a file gives it (GGUF
/// `general.architecture`, HF `model_type`): one line per name.
pub(crate) const REGISTRY: &[(&str, &Architecture)] = &[
    ("llama", &llama::LLAMA),
    ("mistral", &llama::LLAMA),
    ("qwen2", &qwen2::QWEN2),
    ("qwen3", &qwen3::QWEN3),
];

/// One decoder architecture: how its checkpoints name their tensors and how its layers differ
/// from the plain llama block.
#[derive(Debug)]
pub struct Architecture {
    /// The name it is reported under (`ponder info`, errors).
    pub name: &'static str,
    /// How its decoder blocks compute.
    pub layer: LayerOptions,
    /// Its tensors in a GGUF file, and what llama.cpp did to them.
    pub gguf: GgufLayout,
    /// Its tensors in a Hugging Face (transformers) safetensors checkpoint. RoPE there always
    /// pairs halves ([`RopeStyle::Halves`]); a missing `rope_theta` means 10 000.
    pub hf: TensorNames,
}

impl Architecture {
    /// The architecture a file names `name` (GGUF `general.architecture` or HF `model_type`).
    pub fn from_name(name: &str) -> Option<&'static Self> {
        REGISTRY
            .iter()
            .find(|(registered, _)| *registered == name)
            .map(|(_, arch)| *arch)
    }

    /// The registered names, comma-separated (for error messages).
    pub fn supported() -> String {
        REGISTRY
            .iter()
            .map(|(name, _)| *name)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl PartialEq for Architecture {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for Architecture {}

impl serde::Serialize for Architecture {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name)
    }
}

/// How an architecture's decoder block differs from the plain llama block (pre-norm RMSNorm,
/// bias-free projections, RoPE on q and k, grouped-query attention, SiLU-gated MLP).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LayerOptions {
    /// The q, k and v projections carry a bias (Qwen2).
    pub qkv_bias: bool,
    /// Each query and key head is RMS-normed (a `[head_dim]` weight per layer, shared by the
    /// heads) after the projection and before RoPE.
    pub qk_norm: bool,
    /// The MLP's gate activation.
    pub activation: Activation,
}

/// The activation of the gated MLP, `down(act(gate(x)) * up(x))`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// `x · sigmoid(x)` (SwiGLU).
    Silu,
}

/// An architecture's GGUF specifics.
#[derive(Debug, Clone, Copy)]
pub struct GgufLayout {
    /// Tensor names.
    pub names: TensorNames,
    /// How the stored q/k rows pair dimensions: llama.cpp permutes llama's q/k rows for
    /// interleaved RoPE and stores other architectures as they come.
    pub rope_style: RopeStyle,
    /// RoPE base when the file has no `{arch}.rope.freq_base`.
    pub rope_theta: f64,
}

/// The names of a decoder's tensors in one file format, without the `.weight` / `.bias`
/// suffix. A layer's tensor is `{layer_prefix}{i}.{name}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TensorNames {
    /// The token embedding table.
    pub embed: &'static str,
    /// The norm after the last block.
    pub final_norm: &'static str,
    /// The language-model head (absent when tied to the embedding).
    pub lm_head: &'static str,
    /// What precedes a block's index.
    pub layer_prefix: &'static str,
    /// RMSNorm before attention.
    pub attn_norm: &'static str,
    /// Query projection.
    pub q: &'static str,
    /// Key projection.
    pub k: &'static str,
    /// Value projection.
    pub v: &'static str,
    /// Attention output projection.
    pub o: &'static str,
    /// Per-head query norm ([`LayerOptions::qk_norm`]).
    pub q_norm: &'static str,
    /// Per-head key norm ([`LayerOptions::qk_norm`]).
    pub k_norm: &'static str,
    /// RMSNorm before the MLP.
    pub ffn_norm: &'static str,
    /// MLP gate projection.
    pub gate: &'static str,
    /// MLP up projection.
    pub up: &'static str,
    /// MLP down projection.
    pub down: &'static str,
}

impl TensorNames {
    /// llama.cpp's names, which its converter gives every llama-family architecture.
    pub const LLAMA_CPP: Self = Self {
        embed: "token_embd",
        final_norm: "output_norm",
        lm_head: "output",
        layer_prefix: "blk.",
        attn_norm: "attn_norm",
        q: "attn_q",
        k: "attn_k",
        v: "attn_v",
        o: "attn_output",
        q_norm: "attn_q_norm",
        k_norm: "attn_k_norm",
        ffn_norm: "ffn_norm",
        gate: "ffn_gate",
        up: "ffn_up",
        down: "ffn_down",
    };

    /// transformers' names for `LlamaForCausalLM` and the models that copy its layout.
    pub const TRANSFORMERS: Self = Self {
        embed: "model.embed_tokens",
        final_norm: "model.norm",
        lm_head: "lm_head",
        layer_prefix: "model.layers.",
        attn_norm: "input_layernorm",
        q: "self_attn.q_proj",
        k: "self_attn.k_proj",
        v: "self_attn.v_proj",
        o: "self_attn.o_proj",
        q_norm: "self_attn.q_norm",
        k_norm: "self_attn.k_norm",
        ffn_norm: "post_attention_layernorm",
        gate: "mlp.gate_proj",
        up: "mlp.up_proj",
        down: "mlp.down_proj",
    };

    /// The full name of block `layer`'s tensor `name` (one of this table's layer fields).
    pub fn layer(&self, layer: usize, name: &str) -> String {
        format!("{}{layer}.{name}", self.layer_prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_registered_name_is_unique_and_resolves_to_its_entry() {
        for (i, (name, arch)) in REGISTRY.iter().enumerate() {
            assert!(
                REGISTRY[..i].iter().all(|(other, _)| other != name),
                "{name} registered twice"
            );
            assert_eq!(Architecture::from_name(name), Some(*arch));
        }
        assert_eq!(Architecture::from_name("mamba"), None);
        assert!(Architecture::supported().contains("qwen2"));
    }
}
