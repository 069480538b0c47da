//! Our own decoder forward pass over a batch of sequences of different lengths.
//!
//! Unlike candle-transformers' `ModelWeights` (one sequence, KV cache inside the model), a
//! [`Model`] is immutable and shared: the tokens of every sequence in a batch are packed into
//! one `[tokens, hidden]` matrix for the projections and the MLP (one matmul per weight for the
//! whole batch), and only attention runs per sequence, against keys and values held by an
//! external [`KvStore`]. That is the shape continuous batching and shared-prefix KV need.
//!
//! Numerics follow llama.cpp / candle-transformers: RMSNorm, RoPE (interleaved for llama GGUF,
//! halves otherwise), grouped-query attention with a causal mask, SiLU-gated MLP, f32 activations.

use candle_core::{Device, Tensor};

use super::config::ModelConfig;
use super::error::{EngineError, Result};
use super::attention::AttentionShape;
use super::kv::{KvStore, LayerChunk, SeqId};
use super::rope::Rope;
use super::weights::{LayerWeights, ModelWeights};

/// New tokens of one sequence, to be appended at `start_pos` (which must equal what the KV store
/// already holds for `seq`).
#[derive(Debug, Clone, Copy)]
pub struct SeqChunk<'a> {
    /// The sequence these tokens extend.
    pub seq: SeqId,
    /// Token ids, at least one.
    pub tokens: &'a [u32],
    /// Position of `tokens[0]`.
    pub start_pos: usize,
}

/// Which positions to return logits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogitsFor {
    /// Only each sequence's last new position: `[vocab]` per sequence (decoding).
    LastPosition,
    /// Every new position: `[len, vocab]` per sequence (scoring a text, parity tests).
    AllPositions,
}

/// A loaded decoder.
#[derive(Debug, Clone)]
pub struct Model {
    config: ModelConfig,
    weights: ModelWeights,
    rope: Rope,
    device: Device,
}

impl Model {
    pub(crate) fn new(config: ModelConfig, weights: ModelWeights, device: Device) -> Result<Self> {
        Ok(Self { rope: Rope::new(&config), config, weights, device })
    }

    /// The model's hyper-parameters.
    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// The device the weights live on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Runs one forward pass over every chunk in `batch` together, appending their keys and
    /// values to `kv`, and returns logits per chunk in batch order.
    ///
    /// On error no sequence keeps positions from this call.
    pub fn forward(&self, batch: &[SeqChunk<'_>], kv: &mut dyn KvStore, which: LogitsFor) -> Result<Vec<Tensor>> {
        self.validate(batch, kv)?;
        let result = self.forward_unchecked(batch, kv, which);
        if result.is_err() {
            for chunk in batch {
                kv.truncate(chunk.seq, chunk.start_pos)?;
            }
        }
        result
    }

    fn validate(&self, batch: &[SeqChunk<'_>], kv: &dyn KvStore) -> Result<()> {
        if batch.is_empty() {
            return Err(EngineError::InvalidInput { field: "batch", reason: "no sequences".into() });
        }
        let mut seen = std::collections::HashSet::new();
        for chunk in batch {
            if chunk.tokens.is_empty() {
                return Err(EngineError::InvalidInput { field: "tokens", reason: format!("sequence {} has no tokens", chunk.seq) });
            }
            if !seen.insert(chunk.seq) {
                return Err(EngineError::InvalidInput { field: "batch", reason: format!("sequence {} appears twice", chunk.seq) });
            }
            let end = chunk.start_pos + chunk.tokens.len();
            if end > self.config.context_length {
                return Err(EngineError::PromptTooLong { tokens: end, context: self.config.context_length });
            }
            let held = kv.seq_len(chunk.seq);
            if held != chunk.start_pos {
                return Err(EngineError::Kv(format!(
                    "sequence {} starts at position {} but the store holds {held} positions",
                    chunk.seq, chunk.start_pos
                )));
            }
            if let Some(&bad) = chunk.tokens.iter().find(|&&t| t as usize >= self.config.vocab_size) {
                return Err(EngineError::InvalidInput {
                    field: "tokens",
                    reason: format!("token id {bad} is outside the vocabulary of {}", self.config.vocab_size),
                });
            }
        }
        Ok(())
    }

    fn forward_unchecked(&self, batch: &[SeqChunk<'_>], kv: &mut dyn KvStore, which: LogitsFor) -> Result<Vec<Tensor>> {
        kv.begin_step(batch)?;
        let ids: Vec<u32> = batch.iter().flat_map(|c| c.tokens.iter().copied()).collect();
        let ids = Tensor::new(ids.as_slice(), &self.device)?;
        let mut x = self.weights.embed.index_select(&ids, 0)?;
        let eps = self.config.rms_norm_eps as f32;
        for (layer_idx, layer) in self.weights.layers.iter().enumerate() {
            let h = candle_nn::ops::rms_norm(&x, &layer.attn_norm, eps)?;
            let attn = self.attention(layer_idx, layer, &h, batch, kv)?;
            x = (x + attn)?;
            let h = candle_nn::ops::rms_norm(&x, &layer.ffn_norm, eps)?;
            let gate = candle_nn::ops::silu(&layer.gate_proj.forward(&h)?)?;
            let up = layer.up_proj.forward(&h)?;
            x = (x + layer.down_proj.forward(&(gate * up)?)?)?;
        }
        let mut offsets = Vec::with_capacity(batch.len());
        let mut offset = 0;
        for chunk in batch {
            offsets.push(offset);
            offset += chunk.tokens.len();
        }
        match which {
            LogitsFor::LastPosition => {
                let rows: Vec<u32> = batch.iter().zip(&offsets).map(|(c, o)| (o + c.tokens.len() - 1) as u32).collect();
                let rows = Tensor::new(rows.as_slice(), &self.device)?;
                let last = x.index_select(&rows, 0)?;
                let logits = self.weights.lm_head.forward(&candle_nn::ops::rms_norm(&last, &self.weights.final_norm, eps)?)?;
                (0..batch.len()).map(|i| Ok(logits.get(i)?)).collect()
            }
            LogitsFor::AllPositions => {
                let logits = self.weights.lm_head.forward(&candle_nn::ops::rms_norm(&x, &self.weights.final_norm, eps)?)?;
                batch.iter().zip(&offsets).map(|(c, &o)| Ok(logits.narrow(0, o, c.tokens.len())?)).collect()
            }
        }
    }

    /// Self-attention for every sequence of the batch; `h` is the normed `[tokens, hidden]`.
    ///
    /// Queries, keys and values stay token-major (`[tokens, heads, head_dim]`, the projections'
    /// own layout) from the projection to the store: one RoPE pass rotates every sequence at
    /// its own positions, and each chunk is a slice, not a reshaped copy.
    fn attention(
        &self,
        layer_idx: usize,
        layer: &LayerWeights,
        h: &Tensor,
        batch: &[SeqChunk<'_>],
        kv: &mut dyn KvStore,
    ) -> Result<Tensor> {
        let shape = self.attention_shape();
        let (nh, nkv, d) = (shape.num_heads, shape.num_kv_heads, shape.head_dim);
        let positions: Vec<usize> =
            batch.iter().flat_map(|c| c.start_pos..c.start_pos + c.tokens.len()).collect();
        let mut q: Vec<f32> = layer.q_proj.forward(h)?.flatten_all()?.to_vec1()?;
        let mut k: Vec<f32> = layer.k_proj.forward(h)?.flatten_all()?.to_vec1()?;
        let v: Vec<f32> = layer.v_proj.forward(h)?.flatten_all()?.to_vec1()?;
        self.rope.apply(&mut q, nh, &positions);
        self.rope.apply(&mut k, nkv, &positions);
        let mut chunks = Vec::with_capacity(batch.len());
        let mut offset = 0;
        for c in batch {
            let len = c.tokens.len();
            let (qs, ks) = (offset * nh * d, offset * nkv * d);
            chunks.push(LayerChunk {
                seq: c.seq,
                start_pos: c.start_pos,
                len,
                q: &q[qs..qs + len * nh * d],
                k: &k[ks..ks + len * nkv * d],
                v: &v[ks..ks + len * nkv * d],
            });
            offset += len;
        }
        let y = kv.attend(layer_idx, &chunks, &shape)?;
        let y = Tensor::from_vec(y, (positions.len(), nh * d), &self.device)?;
        layer.o_proj.forward(&y)
    }

    /// Heads and head size, as the KV store needs them.
    pub fn attention_shape(&self) -> AttentionShape {
        AttentionShape { num_heads: self.config.num_heads, num_kv_heads: self.config.num_kv_heads, head_dim: self.config.head_dim }
    }
}
