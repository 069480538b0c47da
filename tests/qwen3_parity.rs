//! Our forward pass on a tiny qwen3 model (random weights, written by the test) against
//! candle-transformers: a safetensors checkpoint against `qwen3::ModelForCausalLM` (f32 and
//! bf16 files, tied and untied heads) and a GGUF file against `quantized_qwen3` (f32 and Q4_1).
//! Both exercise what qwen3 adds: per-head q/k RMSNorm before RoPE, no q/k/v biases, and a head
//! dimension that is not `hidden / heads`; GQA too.

use std::collections::HashMap;
use std::path::Path;

use candle_core::quantized::gguf_file::{self, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::qwen3::{Config, ModelForCausalLM};
use ponder_engine::forward::{load_model, Architecture, MatmulImpl};

use crate::util::{assert_tracks_reference, RandomTensors};

const VOCAB: usize = 96;
const HIDDEN: usize = 64;
const LAYERS: usize = 2;
const HEADS: usize = 4;
const KV_HEADS: usize = 2;
/// Wider than `HIDDEN / HEADS` (16), as in Qwen3-0.6B (1024 wide, 16 heads of 128).
const HEAD_DIM: usize = 32;
const INTER: usize = 128;

fn config_json(tie: bool, vocab: usize) -> serde_json::Value {
    serde_json::json!({
        "model_type": "qwen3", "vocab_size": vocab, "hidden_size": HIDDEN,
        "intermediate_size": INTER, "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS, "head_dim": HEAD_DIM, "attention_bias": false,
        "max_position_embeddings": 256, "sliding_window": null, "max_window_layers": LAYERS,
        "tie_word_embeddings": tie, "rope_theta": 1000000.0, "rms_norm_eps": 1e-6,
        "use_sliding_window": false, "hidden_act": "silu"
    })
}

/// Writes a random qwen3 checkpoint of `vocab` tokens into `dir` (its `model.safetensors` and
/// `config.json`) and returns its tensors (as f32). The parity tests use [`VOCAB`]; the
/// thinking-model tests the real Qwen3 vocabulary.
pub(crate) fn write_checkpoint(
    dir: &Path,
    seed: u64,
    tie: bool,
    dtype: DType,
    vocab: usize,
) -> HashMap<String, Tensor> {
    let mut rand = RandomTensors::new(seed);
    let (q, kv) = (HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM);
    let mut t = HashMap::new();
    t.insert(
        "model.embed_tokens.weight".to_string(),
        rand.tensor(&[vocab, HIDDEN], 0.0, 1.0),
    );
    t.insert(
        "model.norm.weight".to_string(),
        rand.tensor(&[HIDDEN], 1.0, 0.1),
    );
    if !tie {
        t.insert(
            "lm_head.weight".to_string(),
            rand.tensor(&[vocab, HIDDEN], 0.0, 0.2),
        );
    }
    for i in 0..LAYERS {
        let p = format!("model.layers.{i}");
        for (name, shape, centre, spread) in [
            ("self_attn.q_proj", vec![q, HIDDEN], 0.0, 0.15),
            ("self_attn.k_proj", vec![kv, HIDDEN], 0.0, 0.15),
            ("self_attn.v_proj", vec![kv, HIDDEN], 0.0, 0.15),
            ("self_attn.o_proj", vec![HIDDEN, q], 0.0, 0.15),
            ("self_attn.q_norm", vec![HEAD_DIM], 1.0, 0.3),
            ("self_attn.k_norm", vec![HEAD_DIM], 1.0, 0.3),
            ("mlp.gate_proj", vec![INTER, HIDDEN], 0.0, 0.15),
            ("mlp.up_proj", vec![INTER, HIDDEN], 0.0, 0.15),
            ("mlp.down_proj", vec![HIDDEN, INTER], 0.0, 0.15),
            ("input_layernorm", vec![HIDDEN], 1.0, 0.1),
            ("post_attention_layernorm", vec![HIDDEN], 1.0, 0.1),
        ] {
            t.insert(
                format!("{p}.{name}.weight"),
                rand.tensor(&shape, centre, spread),
            );
        }
    }
    let stored: HashMap<String, Tensor> = t
        .into_iter()
        .map(|(k, v)| (k, v.to_dtype(dtype).expect("cast")))
        .collect();
    candle_core::safetensors::save(&stored, dir.join("model.safetensors")).expect("save");
    std::fs::write(dir.join("config.json"), config_json(tie, vocab).to_string()).expect("config");
    stored
        .into_iter()
        .map(|(k, v)| (k, v.to_dtype(DType::F32).expect("cast")))
        .collect()
}

fn check_against_reference(tie: bool, dtype: DType) {
    let dir = tempfile::tempdir().expect("tempdir");
    let tensors = write_checkpoint(dir.path(), 7, tie, dtype, VOCAB);
    let cfg: Config = serde_json::from_value(config_json(tie, VOCAB)).expect("reference config");
    let mut reference = ModelForCausalLM::new(
        &cfg,
        VarBuilder::from_tensors(tensors, DType::F32, &Device::Cpu),
    )
    .expect("reference");
    let ours = load_model(dir.path(), &Device::Cpu, MatmulImpl::default()).expect("our model");
    assert_eq!(
        Some(ours.config().architecture),
        Architecture::from_name("qwen3")
    );
    assert_eq!(ours.config().head_dim, HEAD_DIM);
    let prompt = [3, 17, 42, 5, 88, 1, 60, 23, 9];
    assert_tracks_reference(
        &ours,
        &prompt,
        17,
        &format!("qwen3 tie={tie} {dtype:?}"),
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
fn qwen3_f32_untied_matches_candle_reference() {
    check_against_reference(false, DType::F32);
}

#[test]
fn qwen3_bf16_tied_matches_candle_reference() {
    check_against_reference(true, DType::BF16);
}

#[test]
fn qwen3_without_its_q_norm_is_refused_naming_the_tensor() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_checkpoint(dir.path(), 7, false, DType::F32, VOCAB);
    let path = dir.path().join("model.safetensors");
    let mut tensors = candle_core::safetensors::load(&path, &Device::Cpu).expect("load");
    tensors.remove("model.layers.1.self_attn.q_norm.weight");
    candle_core::safetensors::save(&tensors, &path).expect("save");
    let err = load_model(dir.path(), &Device::Cpu, MatmulImpl::default())
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        err.contains("model.layers.1.self_attn.q_norm.weight"),
        "{err}"
    );
}

/// Writes the checkpoint of `write_checkpoint` as a GGUF file under llama.cpp's names, matrices
/// as `dtype` (norms f32), and returns its path.
fn write_gguf(dir: &Path, dtype: GgmlDType) -> std::path::PathBuf {
    let tensors = write_checkpoint(dir, 11, false, DType::F32, VOCAB);
    let gguf_name = |hf: &str| -> String {
        let renamed = [
            ("model.embed_tokens", "token_embd"),
            ("model.norm", "output_norm"),
            ("lm_head", "output"),
            ("model.layers.", "blk."),
            ("self_attn.q_proj", "attn_q"),
            ("self_attn.k_proj", "attn_k"),
            ("self_attn.v_proj", "attn_v"),
            ("self_attn.o_proj", "attn_output"),
            ("self_attn.q_norm", "attn_q_norm"),
            ("self_attn.k_norm", "attn_k_norm"),
            ("mlp.gate_proj", "ffn_gate"),
            ("mlp.up_proj", "ffn_up"),
            ("mlp.down_proj", "ffn_down"),
            ("post_attention_layernorm", "ffn_norm"),
            ("input_layernorm", "attn_norm"),
        ];
        renamed
            .iter()
            .fold(hf.to_string(), |name, (from, to)| name.replace(from, to))
    };
    let mut names: Vec<&String> = tensors.keys().collect();
    names.sort();
    let quantized: Vec<(String, QTensor)> = names
        .into_iter()
        .map(|name| {
            let t = &tensors[name];
            let dt = if t.rank() == 1 { GgmlDType::F32 } else { dtype };
            (gguf_name(name), QTensor::quantize(t, dt).expect("quantize"))
        })
        .collect();
    let key = |k: &str| format!("qwen3.{k}");
    let metadata: Vec<(String, Value)> = vec![
        ("general.architecture".into(), Value::String("qwen3".into())),
        // The reference computes in f16 without this (0: f32).
        ("general.dtype".into(), Value::U32(0)),
        (key("embedding_length"), Value::U32(HIDDEN as u32)),
        (key("feed_forward_length"), Value::U32(INTER as u32)),
        (key("block_count"), Value::U32(LAYERS as u32)),
        (key("context_length"), Value::U32(256)),
        (key("attention.head_count"), Value::U32(HEADS as u32)),
        (key("attention.head_count_kv"), Value::U32(KV_HEADS as u32)),
        (key("attention.key_length"), Value::U32(HEAD_DIM as u32)),
        (key("attention.value_length"), Value::U32(HEAD_DIM as u32)),
        (key("attention.layer_norm_rms_epsilon"), Value::F32(1e-6)),
        (key("rope.freq_base"), Value::F32(1_000_000.0)),
    ];
    let md: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let ts: Vec<(&str, &QTensor)> = quantized.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let path = dir.join(format!("tiny-qwen3-{dtype:?}.gguf"));
    let mut file = std::fs::File::create(&path).expect("create");
    gguf_file::write(&mut file, &md, &ts).expect("write gguf");
    path
}

fn check_gguf_against_reference(dtype: GgmlDType, matmul: MatmulImpl) {
    use candle_transformers::models::quantized_qwen3::ModelWeights;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write_gguf(dir.path(), dtype);
    let mut f = std::fs::File::open(&path).expect("open");
    let content = gguf_file::Content::read(&mut f).expect("read");
    let mut reference = ModelWeights::from_gguf(content, &mut f, &Device::Cpu).expect("reference");
    let ours = load_model(&path, &Device::Cpu, matmul).expect("our model");
    assert_eq!(ours.config().head_dim, HEAD_DIM);
    let prompt = [5, 90, 17, 33, 3, 64, 1, 42, 77];
    assert_tracks_reference(
        &ours,
        &prompt,
        9,
        &format!("qwen3 gguf {dtype:?} {matmul:?}"),
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
fn qwen3_gguf_f32_matches_candle_quantized_reference() {
    check_gguf_against_reference(GgmlDType::F32, MatmulImpl::default());
}

#[test]
fn qwen3_gguf_q4_1_matches_candle_quantized_reference() {
    check_gguf_against_reference(GgmlDType::Q4_1, MatmulImpl::Ponder);
}
