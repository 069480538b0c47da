//! Our forward pass on a tiny qwen2 checkpoint (random weights, written by the test as
//! safetensors) against candle-transformers' `qwen2::ModelForCausalLM`: GQA, q/k/v biases,
//! qwen2's RoPE theta, f32 and f16 files, tied and untied heads.

use std::collections::HashMap;
use std::path::Path;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::qwen2::{Config, ModelForCausalLM};
use ponder_engine::forward::{load_model, MatmulImpl};

use crate::util::{assert_tracks_reference, RandomTensors};

const VOCAB: usize = 96;
const HIDDEN: usize = 64;
const LAYERS: usize = 2;

fn config_json(tie: bool) -> serde_json::Value {
    serde_json::json!({
        "model_type": "qwen2", "vocab_size": VOCAB, "hidden_size": HIDDEN, "intermediate_size": 112,
        "num_hidden_layers": LAYERS, "num_attention_heads": 4, "num_key_value_heads": 2,
        "max_position_embeddings": 256, "sliding_window": 256, "max_window_layers": LAYERS,
        "tie_word_embeddings": tie, "rope_theta": 1000000.0, "rms_norm_eps": 1e-6,
        "use_sliding_window": false, "hidden_act": "silu"
    })
}

/// Writes a random qwen2 checkpoint into `dir` and returns its tensors (as f32).
fn write_checkpoint(dir: &Path, seed: u64, tie: bool, dtype: DType) -> HashMap<String, Tensor> {
    let mut rand = RandomTensors::new(seed);
    let (q, kv, inter) = (64, 32, 112);
    let mut t = HashMap::new();
    t.insert(
        "model.embed_tokens.weight".to_string(),
        rand.tensor(&[VOCAB, HIDDEN], 0.0, 1.0),
    );
    t.insert(
        "model.norm.weight".to_string(),
        rand.tensor(&[HIDDEN], 1.0, 0.1),
    );
    if !tie {
        t.insert(
            "lm_head.weight".to_string(),
            rand.tensor(&[VOCAB, HIDDEN], 0.0, 0.2),
        );
    }
    rand.qwen2_layers(&mut t, LAYERS, HIDDEN, (q, kv, inter));
    let stored: HashMap<String, Tensor> = t
        .into_iter()
        .map(|(k, v)| (k, v.to_dtype(dtype).expect("cast")))
        .collect();
    candle_core::safetensors::save(&stored, dir.join("model.safetensors")).expect("save");
    std::fs::write(dir.join("config.json"), config_json(tie).to_string()).expect("config");
    stored
        .into_iter()
        .map(|(k, v)| (k, v.to_dtype(DType::F32).expect("cast")))
        .collect()
}

fn check_against_reference(tie: bool, dtype: DType) {
    let dir = tempfile::tempdir().expect("tempdir");
    let tensors = write_checkpoint(dir.path(), 42, tie, dtype);
    let cfg: Config = serde_json::from_value(config_json(tie)).expect("reference config");
    let mut reference = ModelForCausalLM::new(
        &cfg,
        VarBuilder::from_tensors(tensors, DType::F32, &Device::Cpu),
    )
    .expect("reference");
    let ours = load_model(dir.path(), &Device::Cpu, MatmulImpl::default()).expect("our model");
    let prompt = [3, 17, 42, 5, 88, 1, 60, 23, 9];
    assert_tracks_reference(
        &ours,
        &prompt,
        17,
        &format!("tie={tie} {dtype:?}"),
        |input, pos| {
            let ids = Tensor::new(input, &Device::Cpu)
                .and_then(|t| t.unsqueeze(0))
                .expect("ids");
            reference
                .forward(&ids, pos)
                .and_then(|l| l.flatten_all())
                .and_then(|l| l.to_vec1())
                .expect("reference forward")
        },
    );
}

#[test]
fn qwen2_f32_untied_matches_candle_reference() {
    check_against_reference(false, DType::F32);
}

#[test]
fn qwen2_f16_tied_matches_candle_reference() {
    check_against_reference(true, DType::F16);
}

#[test]
fn qwen2_bf16_loads_and_matches_candle_reference() {
    check_against_reference(false, DType::BF16);
}
