//! The forward pass on the CPU: the model's backend when it loads on [`ComputeDevice::Cpu`]
//! (the CUDA backend is `cuda::CudaModel`; [`Model`](super::model::Model) picks one at load
//! time and owns validation and rollback for both).
//!
//! The tokens of every sequence in a batch are packed into one `[tokens, hidden]` matrix for
//! the projections and the MLP (one matmul per weight for the whole batch), and only attention
//! runs per sequence, against keys and values held by the external [`KvStore`]. Numerics follow
//! llama.cpp / candle-transformers: RMSNorm, RoPE (interleaved for llama GGUF, halves
//! otherwise), grouped-query attention with a causal mask, SiLU-gated MLP, f32 activations.
//! What varies by architecture (q/k/v biases, per-head q/k norms, the gate's activation) is
//! read from the config's [`Architecture`](super::models::Architecture) description, never
//! from its name.
//!
//! [`ComputeDevice::Cpu`]: super::device::ComputeDevice::Cpu

use candle_core::{Device, Tensor};
use ponder_kernels::decoder_ops;

use super::attention::AttentionShape;
use super::config::ModelConfig;
use super::error::Result;
use super::kv::{KvStore, LayerChunk};
use super::model::{no_lm_head, offsets, read_out, LogitsFor, Readout, SeqChunk};
use super::models::Activation;
use super::rope::Rope;
use super::weights::{LayerWeights, Linear, ModelWeights};

/// A decoder's weights in host memory and its RoPE tables.
#[derive(Debug, Clone)]
pub(crate) struct CpuModel {
    config: ModelConfig,
    weights: ModelWeights,
    rope: Rope,
    device: Device,
}

impl CpuModel {
    pub(crate) fn new(config: &ModelConfig, weights: ModelWeights, device: Device) -> Self {
        Self {
            rope: Rope::new(config),
            config: config.clone(),
            weights,
            device,
        }
    }

    /// Whether the model has a language-model head.
    pub(crate) fn has_lm_head(&self) -> bool {
        self.weights.lm_head.is_some()
    }

    fn lm_head(&self) -> Result<&Linear> {
        self.weights.lm_head.as_ref().ok_or_else(no_lm_head)
    }

    /// Logits of `batch` (validated by `Model`) at the positions `which` asks for.
    pub(crate) fn forward(
        &self,
        batch: &[SeqChunk<'_>],
        kv: &mut dyn KvStore,
        which: LogitsFor,
    ) -> Result<Vec<Tensor>> {
        let lm_head = self.lm_head()?;
        let x = self.residual(batch, kv)?;
        let offsets = offsets(batch);
        let eps = self.config.rms_norm_eps as f32;
        match which {
            LogitsFor::LastPosition => {
                let rows: Vec<u32> = batch
                    .iter()
                    .zip(&offsets)
                    .map(|(c, o)| (o + c.tokens.len() - 1) as u32)
                    .collect();
                let rows = Tensor::new(rows.as_slice(), &self.device)?;
                let last = x.index_select(&rows, 0)?;
                let logits = lm_head.forward(&candle_nn::ops::rms_norm(
                    &last,
                    &self.weights.final_norm,
                    eps,
                )?)?;
                (0..batch.len()).map(|i| Ok(logits.get(i)?)).collect()
            }
            LogitsFor::AllPositions => {
                let logits = lm_head.forward(&candle_nn::ops::rms_norm(
                    &x,
                    &self.weights.final_norm,
                    eps,
                )?)?;
                batch
                    .iter()
                    .zip(&offsets)
                    .map(|(c, &o)| Ok(logits.narrow(0, o, c.tokens.len())?))
                    .collect()
            }
        }
    }

    /// One forward pass over `batch` (validated by `Model`), returning what `readouts` ask for.
    pub(crate) fn forward_readouts(
        &self,
        batch: &[SeqChunk<'_>],
        kv: &mut dyn KvStore,
        readouts: &[Readout],
    ) -> Result<Vec<Option<Tensor>>> {
        // One helper stays hot across the pass's ~150 kernel calls (no wake-up per call).
        let _hot_helper = ponder_kernels::HotHelper::start();
        let x = self.residual(batch, kv)?;
        let eps = self.config.rms_norm_eps as f32;
        read_out(batch, readouts, |rows, logits| {
            let rows = Tensor::new(rows, &self.device)?;
            let normed = candle_nn::ops::rms_norm(
                &x.index_select(&rows, 0)?,
                &self.weights.final_norm,
                eps,
            )?;
            if logits {
                Ok(self.lm_head()?.forward(&normed)?)
            } else {
                Ok(normed)
            }
        })
    }

    /// The residual stream after the last block, `[tokens, hidden]` (before the final norm).
    ///
    /// The stream stays a plain row-major vector between the kernel calls: the residual adds,
    /// the norms and the gate run on it in place (`ponder_kernels::decoder_ops`, candle's bits,
    /// split across the hot helper), and only the projections' inputs become tensors (moved,
    /// not copied).
    fn residual(&self, batch: &[SeqChunk<'_>], kv: &mut dyn KvStore) -> Result<Tensor> {
        kv.begin_step(batch)?;
        let ids: Vec<u32> = batch
            .iter()
            .flat_map(|c| c.tokens.iter().copied())
            .collect();
        let ids = Tensor::new(ids.as_slice(), &self.device)?;
        let embedded = self.weights.embed.index_select(&ids, 0)?;
        let (rows, hidden) = embedded.dims2()?;
        let mut x: Vec<f32> = embedded.flatten_all()?.to_vec1()?;
        let eps = self.config.rms_norm_eps as f32;
        // The output of the previous block, added to the stream before the next norm.
        let mut delta: Option<Vec<f32>> = None;
        for (layer_idx, layer) in self.weights.layers.iter().enumerate() {
            let mut h = vec![0f32; x.len()];
            decoder_ops::add_and_norm(
                &mut x,
                delta.as_deref(),
                &layer.attn_norm.to_vec1()?,
                eps,
                &mut h,
            );
            let h = Tensor::from_vec(h, (rows, hidden), &self.device)?;
            let attn = self.attention(layer_idx, layer, &h, batch, kv)?;
            let mut h = vec![0f32; x.len()];
            decoder_ops::add_and_norm(&mut x, Some(&attn), &layer.ffn_norm.to_vec1()?, eps, &mut h);
            let h = Tensor::from_vec(h, (rows, hidden), &self.device)?;
            let [mut gate, up] = match &layer.gate_up {
                Some(stacked) => stacked.forward(&h)?,
                None => [
                    layer.gate_proj.forward_vec(&h)?,
                    layer.up_proj.forward_vec(&h)?,
                ],
            };
            match self.config.architecture.layer.activation {
                Activation::Silu => decoder_ops::silu_mul_rows(&mut gate, &up, rows),
            }
            let width = gate.len() / rows.max(1);
            let gated = Tensor::from_vec(gate, (rows, width), &self.device)?;
            delta = Some(layer.down_proj.forward_vec(&gated)?);
        }
        if let Some(delta) = delta {
            for (x, d) in x.iter_mut().zip(delta) {
                *x += d;
            }
        }
        Ok(Tensor::from_vec(x, (rows, hidden), &self.device)?)
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
    ) -> Result<Vec<f32>> {
        let shape = self.attention_shape();
        let (nh, nkv, d) = (shape.num_heads, shape.num_kv_heads, shape.head_dim);
        let positions: Vec<usize> = batch
            .iter()
            .flat_map(|c| c.start_pos..c.start_pos + c.tokens.len())
            .collect();
        let [mut q, mut k, v] = match &layer.qkv {
            Some(stacked) => stacked.forward(h)?,
            None => [
                layer.q_proj.forward_vec(h)?,
                layer.k_proj.forward_vec(h)?,
                layer.v_proj.forward_vec(h)?,
            ],
        };
        if let Some((q_norm, k_norm)) = &layer.qk_norm {
            let eps = self.config.rms_norm_eps as f32;
            q = norm_heads(&q, q_norm, eps)?;
            k = norm_heads(&k, k_norm, eps)?;
        }
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
        layer.o_proj.forward_vec(&y)
    }

    fn attention_shape(&self) -> AttentionShape {
        AttentionShape {
            num_heads: self.config.num_heads,
            num_kv_heads: self.config.num_kv_heads,
            head_dim: self.config.head_dim,
        }
    }
}

/// RMSNorm of every `[head_dim]` head in `x` (`[tokens, heads, head_dim]`) with the one
/// `[head_dim]` weight `alpha`, as candle-transformers' per-head q/k norm computes it.
fn norm_heads(x: &[f32], alpha: &Tensor, eps: f32) -> Result<Vec<f32>> {
    let mut out = vec![0f32; x.len()];
    decoder_ops::rms_norm(x, &alpha.to_vec1()?, eps, &mut out);
    Ok(out)
}
