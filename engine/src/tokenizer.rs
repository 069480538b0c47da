//! Text ↔ token ids, built from the GGUF's own metadata or from a `tokenizer.json`.
//!
//! GGUF files carry no tokenizer.json, only `tokenizer.ggml.*` arrays (tokens, token types,
//! merges, special ids) and the name of llama.cpp's pre-tokenizer. We rebuild the equivalent
//! Hugging Face byte-level BPE tokenizer from them, so encoding matches llama.cpp token for
//! token (checked against a fixture). Only byte-level BPE (`tokenizer.ggml.model = "gpt2"`) is
//! supported from GGUF; SentencePiece GGUFs should be paired with their tokenizer.json.

use std::path::Path;

use candle_core::quantized::gguf_file::Value;
use serde_json::{json, Value as Json};
use tokenizers::Tokenizer;

use super::error::{EngineError, Result};
use super::gguf::GgufFile;

/// llama.cpp token types that are not ordinary vocabulary.
const TOKEN_TYPE_CONTROL: i64 = 3;
const TOKEN_TYPE_USER_DEFINED: i64 = 4;

/// GPT-2's split pattern (also used by `smollm` after splitting digits).
const GPT2_PATTERN: &str =
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";
/// Llama 3's split pattern (`llama-bpe` in llama.cpp).
const LLAMA3_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Qwen2's split pattern.
const QWEN2_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// A tokenizer plus the special ids generation needs.
#[derive(Clone)]
pub struct TextTokenizer {
    inner: Tokenizer,
    bos: Option<u32>,
    add_bos: bool,
    eos: Vec<u32>,
}

impl std::fmt::Debug for TextTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TextTokenizer")
            .field("vocab", &self.vocab_size())
            .field("bos", &self.bos)
            .field("eos", &self.eos)
            .finish()
    }
}

fn metadata(key: &str, problem: &'static str) -> EngineError {
    EngineError::GgufTokenizer {
        key: key.to_string(),
        problem,
    }
}

fn strings(v: &Value, key: &str) -> Result<Vec<String>> {
    let arr = v.to_vec().map_err(|_| metadata(key, "is not an array"))?;
    arr.iter()
        .map(|x| {
            x.to_string()
                .cloned()
                .map_err(|_| metadata(key, "holds a non-string"))
        })
        .collect()
}

fn integer(v: &Value) -> Option<i64> {
    match v {
        Value::I8(x) => Some(i64::from(*x)),
        Value::U8(x) => Some(i64::from(*x)),
        Value::I16(x) => Some(i64::from(*x)),
        Value::U16(x) => Some(i64::from(*x)),
        Value::I32(x) => Some(i64::from(*x)),
        Value::U32(x) => Some(i64::from(*x)),
        Value::I64(x) => Some(*x),
        Value::U64(x) => i64::try_from(*x).ok(),
        _ => None,
    }
}

fn pre_tokenizer(pre: &str) -> Json {
    let byte_level = |use_regex: bool| json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": use_regex});
    let split = |pattern: &str| json!({"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": false});
    match pre {
        "smollm" => {
            json!({"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": true}, byte_level(true)]})
        }
        "qwen2" | "deepseek-r1-qwen" => {
            json!({"type": "Sequence", "pretokenizers": [split(QWEN2_PATTERN), byte_level(false)]})
        }
        "llama-bpe" | "llama3" => {
            json!({"type": "Sequence", "pretokenizers": [split(LLAMA3_PATTERN), byte_level(false)]})
        }
        other => {
            if !matches!(other, "gpt2" | "default" | "") {
                tracing::warn!(
                    pre = other,
                    "unknown GGUF pre-tokenizer; using GPT-2's split"
                );
            }
            json!({"type": "Sequence", "pretokenizers": [split(GPT2_PATTERN), byte_level(false)]})
        }
    }
}

impl TextTokenizer {
    /// Rebuilds the tokenizer stored in a GGUF's `tokenizer.ggml.*` metadata.
    pub fn from_gguf(gguf: &GgufFile) -> Result<Self> {
        let md = gguf.metadata();
        let get = |k: &str| md.get(k).ok_or_else(|| metadata(k, "is missing"));
        let model = gguf.metadata_str("tokenizer.ggml.model").unwrap_or("");
        if model != "gpt2" {
            return Err(EngineError::UnsupportedTokenizer {
                model: model.to_string(),
            });
        }
        let tokens = strings(get("tokenizer.ggml.tokens")?, "tokenizer.ggml.tokens")?;
        let merges = strings(get("tokenizer.ggml.merges")?, "tokenizer.ggml.merges")?;
        let types: Vec<i64> = match md.get("tokenizer.ggml.token_type") {
            Some(v) => v
                .to_vec()
                .map_err(|_| metadata("tokenizer.ggml.token_type", "is not an array"))?
                .iter()
                .map(|x| integer(x).unwrap_or(1))
                .collect(),
            None => vec![1; tokens.len()],
        };
        let id = |k: &str| {
            md.get(k)
                .and_then(integer)
                .and_then(|x| u32::try_from(x).ok())
        };
        let bos = id("tokenizer.ggml.bos_token_id");
        // llama.cpp's default for byte-level BPE vocabularies is not to prepend bos.
        let add_bos = matches!(
            md.get("tokenizer.ggml.add_bos_token"),
            Some(Value::Bool(true))
        );
        let eos = id("tokenizer.ggml.eos_token_id");
        let vocab: serde_json::Map<String, Json> = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| (t.clone(), json!(i)))
            .collect();
        let added: Vec<Json> = tokens
            .iter()
            .enumerate()
            .filter(|(i, _)| matches!(types.get(*i), Some(&TOKEN_TYPE_CONTROL) | Some(&TOKEN_TYPE_USER_DEFINED)))
            .map(|(i, t)| {
                json!({"id": i, "content": t, "single_word": false, "lstrip": false, "rstrip": false,
                       "normalized": false, "special": types.get(i) == Some(&TOKEN_TYPE_CONTROL)})
            })
            .collect();
        let spec = json!({
            "version": "1.0",
            "truncation": null,
            "padding": null,
            "added_tokens": added,
            "normalizer": null,
            "pre_tokenizer": pre_tokenizer(gguf.metadata_str("tokenizer.ggml.pre").unwrap_or("default")),
            "post_processor": null,
            "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
            "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
                      "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
                      "ignore_merges": false, "vocab": vocab, "merges": merges},
        });
        let inner =
            Tokenizer::from_bytes(spec.to_string().as_bytes()).map_err(EngineError::Tokenizer)?;
        Ok(Self {
            inner,
            bos,
            add_bos,
            eos: eos.into_iter().collect(),
        })
    }

    /// Loads a Hugging Face `tokenizer.json`; `eos_names` are looked up as end-of-sequence tokens.
    pub fn from_file(path: &Path, eos_names: &[&str]) -> Result<Self> {
        let inner = Tokenizer::from_file(path).map_err(|source| EngineError::TokenizerFile {
            path: path.to_path_buf(),
            source,
        })?;
        let eos = eos_names
            .iter()
            .filter_map(|n| inner.token_to_id(n))
            .collect();
        Ok(Self {
            inner,
            bos: None,
            add_bos: false,
            eos,
        })
    }

    /// Adds an end-of-sequence id (e.g. `<|im_end|>` for chat models).
    pub fn add_eos(&mut self, token: &str) {
        if let Some(id) = self.inner.token_to_id(token) {
            if !self.eos.contains(&id) {
                self.eos.push(id);
            }
        }
    }

    /// Encodes text; special tokens written in the text (`<|im_start|>`) become their ids.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        Ok(self
            .inner
            .encode(text, false)
            .map_err(EngineError::Tokenizer)?
            .get_ids()
            .to_vec())
    }

    /// Decodes ids back to text, special tokens included.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        self.inner
            .decode(ids, false)
            .map_err(EngineError::Tokenizer)
    }

    /// The id of a token string, if it is in the vocabulary.
    pub fn token_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    /// The string of a token id.
    pub fn token(&self, id: u32) -> Option<String> {
        self.inner.id_to_token(id)
    }

    /// Beginning-of-sequence id, if the model has one.
    pub fn bos(&self) -> Option<u32> {
        self.bos
    }

    /// Whether prompts should start with the bos token (GGUF `tokenizer.ggml.add_bos_token`).
    pub fn add_bos(&self) -> bool {
        self.add_bos
    }

    /// Ids that end generation.
    pub fn eos(&self) -> &[u32] {
        &self.eos
    }

    /// Vocabulary size including added tokens.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }
}
