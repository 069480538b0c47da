//! Fixtures of the PRM tests: a tiny random qwen2 checkpoint written as safetensors (a reward
//! model with a `score.*` head, or a causal LM with an `lm_head`), a byte-level BPE
//! `tokenizer.json` built here (every byte is a token, plus the Qwen chat and `<extra_0>`
//! special tokens), and the reference computation the engine must agree with: candle-
//! transformers' `qwen2::Model` hidden states, then the head in plain candle ops.

use std::collections::HashMap;
use std::path::Path;

use candle_core::{DType, Device, Tensor, D};
use candle_nn::VarBuilder;
use candle_transformers::models::qwen2::{Config, Model};

use crate::util::RandomTensors;

pub(crate) const HIDDEN: usize = 64;
pub(crate) const VOCAB: usize = 264;
const LAYERS: usize = 2;
const INTER: usize = 112;
/// Special tokens of the fixture tokenizer, after the 256 byte tokens.
pub(crate) const SPECIALS: [&str; 3] = ["<|im_start|>", "<|im_end|>", "<extra_0>"];

/// GPT-2's byte ↔ printable-character map (what byte-level BPE vocabularies spell bytes with).
fn bytes_to_unicode() -> Vec<(u8, char)> {
    let mut printable: Vec<u32> = (u32::from(b'!')..=u32::from(b'~'))
        .chain(0xA1..=0xAC)
        .chain(0xAE..=0xFF)
        .collect();
    let mut chars = printable.clone();
    let mut n = 0;
    for b in 0..256u32 {
        if !printable.contains(&b) {
            printable.push(b);
            chars.push(256 + n);
            n += 1;
        }
    }
    printable
        .iter()
        .zip(&chars)
        .map(|(&b, &c)| (b as u8, char::from_u32(c).expect("valid char")))
        .collect()
}

/// A byte-level BPE tokenizer with no merges: token id = byte value; specials from 256.
pub(crate) fn tokenizer_json() -> serde_json::Value {
    let vocab: serde_json::Map<String, serde_json::Value> = bytes_to_unicode()
        .into_iter()
        .map(|(b, c)| (c.to_string(), serde_json::json!(b)))
        .collect();
    let added: Vec<serde_json::Value> = SPECIALS
        .iter()
        .enumerate()
        .map(|(i, t)| {
            serde_json::json!({"id": 256 + i, "content": t, "single_word": false, "lstrip": false, "rstrip": false,
                               "normalized": false, "special": true})
        })
        .collect();
    serde_json::json!({
        "version": "1.0", "truncation": null, "padding": null, "added_tokens": added, "normalizer": null,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
        "post_processor": null,
        "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
        "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
                  "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
                  "vocab": vocab, "merges": []}
    })
}

fn config_json(reward_model: bool) -> serde_json::Value {
    let architecture = if reward_model {
        "Qwen2ForProcessRewardModel"
    } else {
        "Qwen2ForCausalLM"
    };
    serde_json::json!({
        "architectures": [architecture],
        "model_type": "qwen2", "vocab_size": VOCAB, "hidden_size": HIDDEN, "intermediate_size": INTER,
        "num_hidden_layers": LAYERS, "num_attention_heads": 4, "num_key_value_heads": 2,
        "max_position_embeddings": 1024, "sliding_window": 1024, "max_window_layers": LAYERS,
        "tie_word_embeddings": false, "rope_theta": 1000000.0, "rms_norm_eps": 1e-6,
        "use_sliding_window": false, "hidden_act": "silu"
    })
}

/// A checkpoint on disk and its tensors (f32), for the reference computation.
pub(crate) struct Checkpoint {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) tensors: HashMap<String, Tensor>,
    reward_model: bool,
}

/// Writes a random qwen2 checkpoint (bf16 on disk, like the published PRMs), its config and
/// the fixture tokenizer. A reward model gets a `score.0`/`score.2` head and no `lm_head`.
pub(crate) fn write_checkpoint(seed: u64, reward_model: bool) -> Checkpoint {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rand = RandomTensors::new(seed);
    let (q, kv) = (64, 32);
    let mut t = HashMap::new();
    t.insert(
        "model.embed_tokens.weight".to_string(),
        rand.tensor(&[VOCAB, HIDDEN], 0.0, 1.0),
    );
    t.insert(
        "model.norm.weight".to_string(),
        rand.tensor(&[HIDDEN], 1.0, 0.1),
    );
    if reward_model {
        t.insert(
            "score.0.weight".to_string(),
            rand.tensor(&[HIDDEN, HIDDEN], 0.0, 0.3),
        );
        t.insert("score.0.bias".to_string(), rand.tensor(&[HIDDEN], 0.0, 0.1));
        t.insert(
            "score.2.weight".to_string(),
            rand.tensor(&[2, HIDDEN], 0.0, 0.3),
        );
        t.insert("score.2.bias".to_string(), rand.tensor(&[2], 0.0, 0.1));
    } else {
        t.insert(
            "lm_head.weight".to_string(),
            rand.tensor(&[VOCAB, HIDDEN], 0.0, 0.3),
        );
    }
    rand.qwen2_layers(&mut t, LAYERS, HIDDEN, (q, kv, INTER));
    let stored: HashMap<String, Tensor> = t
        .into_iter()
        .map(|(k, v)| (k, v.to_dtype(DType::BF16).expect("cast")))
        .collect();
    candle_core::safetensors::save(&stored, dir.path().join("model.safetensors")).expect("save");
    std::fs::write(
        dir.path().join("config.json"),
        config_json(reward_model).to_string(),
    )
    .expect("config");
    std::fs::write(
        dir.path().join("tokenizer.json"),
        tokenizer_json().to_string(),
    )
    .expect("tokenizer");
    let tensors = stored
        .into_iter()
        .map(|(k, v)| (k, v.to_dtype(DType::F32).expect("cast")))
        .collect();
    Checkpoint {
        dir,
        tensors,
        reward_model,
    }
}

impl Checkpoint {
    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Token ids of `text` by the fixture tokenizer (read back from disk).
    pub(crate) fn encode(&self, text: &str) -> Vec<u32> {
        let tok = tokenizers::Tokenizer::from_file(self.path().join("tokenizer.json"))
            .expect("tokenizer");
        tok.encode(text, false).expect("encode").get_ids().to_vec()
    }

    /// candle-transformers' final-normed hidden states of `tokens` at `rows`: `[rows, hidden]`.
    pub(crate) fn reference_hidden(&self, tokens: &[u32], rows: &[usize]) -> Tensor {
        let cfg: Config =
            serde_json::from_value(config_json(self.reward_model)).expect("reference config");
        let vb = VarBuilder::from_tensors(self.tensors.clone(), DType::F32, &Device::Cpu);
        let mut model = Model::new(&cfg, vb).expect("reference model");
        let ids = Tensor::new(tokens, &Device::Cpu)
            .and_then(|t| t.unsqueeze(0))
            .expect("ids");
        let hidden = model
            .forward(&ids, 0, None)
            .and_then(|h| h.squeeze(0))
            .expect("reference forward");
        let rows: Vec<u32> = rows.iter().map(|&r| r as u32).collect();
        hidden
            .index_select(
                &Tensor::new(rows.as_slice(), &Device::Cpu).expect("rows"),
                0,
            )
            .expect("select")
    }

    /// The reward head on `hidden` in candle ops: softmax(score.2(relu(score.0(h))))[:, 1].
    pub(crate) fn reference_reward(&self, hidden: &Tensor) -> Vec<f32> {
        let t = |name: &str| self.tensors[name].clone();
        let h = hidden
            .matmul(&t("score.0.weight").t().expect("t"))
            .and_then(|x| x.broadcast_add(&t("score.0.bias")))
            .expect("score.0");
        let logits = h
            .relu()
            .and_then(|x| x.matmul(&t("score.2.weight").t().expect("t")))
            .and_then(|x| x.broadcast_add(&t("score.2.bias")))
            .expect("score.2");
        let probs = candle_nn::ops::softmax(&logits, D::Minus1).expect("softmax");
        probs
            .narrow(1, 1, 1)
            .and_then(|p| p.flatten_all())
            .and_then(|p| p.to_vec1())
            .expect("p(good)")
    }

    /// Softmax over the `good`/`bad` logits of the `lm_head` on `hidden`, P(good) per row.
    pub(crate) fn reference_token_logits(&self, hidden: &Tensor, good: u32, bad: u32) -> Vec<f32> {
        let logits = hidden
            .matmul(&self.tensors["lm_head.weight"].t().expect("t"))
            .expect("lm_head");
        let pair = logits
            .index_select(&Tensor::new(&[good, bad], &Device::Cpu).expect("ids"), 1)
            .expect("pair");
        let probs = candle_nn::ops::softmax(&pair, D::Minus1).expect("softmax");
        probs
            .narrow(1, 0, 1)
            .and_then(|p| p.flatten_all())
            .and_then(|p| p.to_vec1())
            .expect("p(good)")
    }
}
