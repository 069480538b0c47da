//! Sentence embeddings: all-MiniLM-L6-v2 through candle-transformers' BERT, mean pooling over
//! the attention mask, L2 normalisation — the three modules of the sentence-transformers model
//! (`Transformer` → `Pooling(mean)` → `Normalize`), so vectors match the reference
//! implementation (`scripts/make_embedding_fixture.py`, checked by `tests/router.rs`).
//!
//! The model is loaded once; [`Embedder::embed`] encodes a batch in one forward pass, padded to
//! its longest member; [`Embedder::embed_many`] encodes any number of texts in batches of
//! similar length. A text longer than the encoder's window (sentence-transformers'
//! `max_seq_length`, 256 word pieces) is truncated to it and reported as such.

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

use super::error::{Result, RouterError};

/// The window when the model directory does not state one (sentence-transformers' value).
const DEFAULT_WINDOW: usize = 256;

/// Texts per forward pass in [`Embedder::embed_many`].
const EMBED_BATCH: usize = 32;

/// The encoder the shipped router was trained on.
pub const MODEL_NAME: &str = "sentence-transformers/all-MiniLM-L6-v2";

/// One text's embedding.
#[derive(Debug, Clone, PartialEq)]
pub struct Embedding {
    /// Unit-length vector.
    pub vector: Vec<f32>,
    /// Word pieces encoded (with `[CLS]` and `[SEP]`).
    pub tokens: usize,
    /// Whether the text was cut to the encoder's window.
    pub truncated: bool,
}

/// A loaded sentence encoder.
pub struct Embedder {
    model: BertModel,
    tokenizer: Tokenizer,
    device: Device,
    dir: PathBuf,
    window: usize,
    dim: usize,
    weights_sha256: String,
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder")
            .field("dir", &self.dir)
            .field("window", &self.window)
            .field("dim", &self.dim)
            .finish()
    }
}

#[derive(serde::Deserialize)]
struct SentenceBertConfig {
    max_seq_length: usize,
}

impl Embedder {
    /// Loads `config.json`, `model.safetensors` and `tokenizer.json` from `dir` on the CPU.
    pub fn load(dir: &Path) -> Result<Self> {
        let err = |reason: String| RouterError::Embedder {
            dir: dir.to_path_buf(),
            reason,
        };
        let config_path = dir.join("config.json");
        let text = std::fs::read_to_string(&config_path)
            .map_err(|e| RouterError::read(&config_path, e))?;
        let config: Config = serde_json::from_str(&text)
            .map_err(|e| RouterError::corrupt(&config_path, "BERT config", e))?;
        let dim = config.hidden_size;
        let window = std::fs::read_to_string(dir.join("sentence_bert_config.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<SentenceBertConfig>(&t).ok())
            .map_or(DEFAULT_WINDOW, |c| c.max_seq_length)
            .min(config.max_position_embeddings);
        let device = Device::Cpu;
        let weights_path = dir.join("model.safetensors");
        if !weights_path.is_file() {
            return Err(RouterError::read(&weights_path, "no such file"));
        }
        let weights =
            std::fs::read(&weights_path).map_err(|e| RouterError::read(&weights_path, e))?;
        let weights_sha256 = crate::models::sha256_hex(&weights);
        let tensors = candle_core::safetensors::load_buffer(&weights, &device)
            .map_err(|e| RouterError::corrupt(&weights_path, "safetensors file", e))?;
        drop(weights);
        let vb = VarBuilder::from_tensors(tensors, DType::F32, &device);
        let model =
            BertModel::load(vb, &config).map_err(|e| err(format!("loading BERT weights: {e}")))?;
        let tokenizer_path = dir.join("tokenizer.json");
        let mut tokenizer = Tokenizer::from_file(&tokenizer_path)
            .map_err(|e| RouterError::corrupt(&tokenizer_path, "tokenizer", e))?;
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: window,
                ..Default::default()
            }))
            .map_err(|e| err(format!("tokenizer truncation: {e}")))?;
        tokenizer.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            ..Default::default()
        }));
        Ok(Self {
            model,
            tokenizer,
            device,
            dir: dir.to_path_buf(),
            window,
            dim,
            weights_sha256,
        })
    }

    /// The SHA-256 (hex) of the weights it loaded: what vectors cached for it are keyed by.
    pub fn weights_sha256(&self) -> &str {
        &self.weights_sha256
    }

    /// Vector length (384 for MiniLM-L6).
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Most word pieces encoded per text; longer texts are truncated.
    pub fn window(&self) -> usize {
        self.window
    }

    /// Embeds `texts` in one batch; the result is in the same order.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Embedding>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let err = |reason: String| RouterError::Embedder {
            dir: self.dir.clone(),
            reason,
        };
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| err(format!("tokenizing: {e}")))?;
        let rows = encodings.len();
        let len = encodings.first().map_or(0, |e| e.len());
        let mut ids = Vec::with_capacity(rows * len);
        let mut types = Vec::with_capacity(rows * len);
        let mut mask = Vec::with_capacity(rows * len);
        for e in &encodings {
            ids.extend(e.get_ids().iter().copied());
            types.extend(e.get_type_ids().iter().copied());
            mask.extend(e.get_attention_mask().iter().copied());
        }
        let vectors = self
            .forward(ids, types, &mask, rows, len)
            .map_err(|e| err(format!("forward pass: {e}")))?;
        Ok(vectors
            .into_iter()
            .zip(&encodings)
            .map(|(vector, e)| Embedding {
                vector,
                tokens: e.get_attention_mask().iter().filter(|m| **m != 0).count(),
                truncated: !e.get_overflowing().is_empty(),
            })
            .collect())
    }

    /// The vectors of `texts`, in order, 32 texts a forward pass. Texts are batched by length
    /// (a batch pads to its longest text, and attention grows with the square of it), which
    /// halves the time of the shipped example pool's embedding against batches in the given
    /// order; every caller embedding more than one text goes through here.
    pub fn embed_many(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| texts[i].len());
        let mut out = vec![Vec::new(); texts.len()];
        let started = std::time::Instant::now();
        for (done, batch) in order.chunks(EMBED_BATCH).enumerate() {
            let chunk: Vec<&str> = batch.iter().map(|&i| texts[i]).collect();
            for (&i, e) in batch.iter().zip(self.embed(&chunk)?) {
                out[i] = e.vector;
            }
            let embedded = ((done + 1) * EMBED_BATCH).min(texts.len());
            if embedded.is_multiple_of(EMBED_BATCH * 32) {
                tracing::info!(
                    embedded,
                    of = texts.len(),
                    elapsed_s = started.elapsed().as_secs(),
                    "embedding"
                );
            }
        }
        Ok(out)
    }

    fn forward(
        &self,
        ids: Vec<u32>,
        types: Vec<u32>,
        mask: &[u32],
        rows: usize,
        len: usize,
    ) -> candle_core::Result<Vec<Vec<f32>>> {
        let ids = Tensor::from_vec(ids, (rows, len), &self.device)?;
        let types = Tensor::from_vec(types, (rows, len), &self.device)?;
        let mask = Tensor::from_vec(mask.to_vec(), (rows, len), &self.device)?;
        let hidden = self.model.forward(&ids, &types, Some(&mask))?;
        // Mean over the real tokens (sentence-transformers clamps the count at 1e-9).
        let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
        let summed = hidden.broadcast_mul(&mask)?.sum(1)?;
        let counts = mask.sum(1)?.clamp(1e-9, f64::MAX)?;
        let mean = summed.broadcast_div(&counts)?;
        // Normalize: x / max(||x||, 1e-12), as torch.nn.functional.normalize.
        let norms = mean.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12, f64::MAX)?;
        mean.broadcast_div(&norms)?.to_vec2::<f32>()
    }
}

/// Cosine similarity of two vectors (0 when either is zero).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb: f32 = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na * nb)
    }
}
