//! Our own decoder forward pass over a batch of sequences of different lengths.
//!
//! Unlike candle-transformers' `ModelWeights` (one sequence, KV cache inside the model), a
//! [`Model`] is immutable and shared: the tokens of every sequence in a batch are packed into
//! one `[tokens, hidden]` matrix for the projections and the MLP (one matmul per weight for the
//! whole batch), and only attention runs per sequence, against keys and values held by an
//! external [`KvStore`]. That is the shape continuous batching and shared-prefix KV need.
//!
//! Besides logits for decoding ([`Model::forward`]), a pass can read chosen rows of chosen
//! chunks ([`Model::forward_readouts`]): final-normed hidden states for a reward head, or
//! logits at step tags, which is how process reward models are scored inside the batch.
//!
//! On a CUDA device (feature `cuda`) the same passes run in `cuda::CudaModel`: same
//! validation, same rollback on error, same outputs (read-out rows copied to the host).
//!
//! Numerics follow llama.cpp / candle-transformers: RMSNorm, RoPE (interleaved for llama GGUF,
//! halves otherwise), grouped-query attention with a causal mask, SiLU-gated MLP, f32 activations.

use candle_core::{Device, Tensor};

use super::attention::AttentionShape;
use super::config::ModelConfig;
#[cfg(feature = "cuda")]
use super::cuda::CudaModel;
use super::device::ComputeDevice;
use super::error::{EngineError, Result};
use super::kv::{KvStore, LayerChunk, SeqId};
use super::rope::Rope;
use super::rows;
use super::weights::{LayerWeights, Linear, ModelWeights};
use super::WeightDtype;
#[cfg(feature = "cuda")]
use std::sync::Arc;

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

/// What one chunk of a [`Model::forward_readouts`] batch returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readout {
    /// Logits at the chunk's last position, `[vocab]` (decoding, or a prompt's last chunk).
    LastLogits,
    /// Final-normed hidden states at these offsets into the chunk, `[rows, hidden]` (what a
    /// reward head reads). No rows: `None`.
    Hidden(Vec<usize>),
    /// Logits at these offsets into the chunk, `[rows, vocab]` (a token-logit PRM). No rows:
    /// `None`.
    Logits(Vec<usize>),
    /// Nothing: a prefill chunk whose outputs nobody reads.
    Nothing,
}

/// A loaded decoder.
#[derive(Debug, Clone)]
pub struct Model {
    config: ModelConfig,
    /// The CPU weights; empty for a model on a CUDA device.
    weights: ModelWeights,
    rope: Rope,
    device: Device,
    /// The weights on a CUDA device, when the model runs there.
    #[cfg(feature = "cuda")]
    cuda: Option<Arc<CudaModel>>,
}

impl Model {
    pub(crate) fn new(config: ModelConfig, weights: ModelWeights, device: Device) -> Result<Self> {
        Ok(Self {
            rope: Rope::new(&config),
            config,
            weights,
            device,
            #[cfg(feature = "cuda")]
            cuda: None,
        })
    }

    /// Loads `weights` onto `device`: a CPU model as is, a CUDA one by uploading them (as
    /// `dtype`) and dropping the host copies.
    pub(crate) fn on_device(
        config: ModelConfig,
        weights: ModelWeights,
        device: ComputeDevice,
        dtype: WeightDtype,
    ) -> Result<Self> {
        device.check_built()?;
        match device {
            ComputeDevice::Cpu => {
                let _ = dtype;
                Self::new(config, weights, Device::Cpu)
            }
            #[cfg(feature = "cuda")]
            ComputeDevice::Cuda(ordinal) => {
                let gpu = super::cuda::Gpu::open(ordinal)?;
                let cuda = CudaModel::upload(gpu, &config, &weights, dtype)?;
                drop(weights);
                Self::with_cuda(config, cuda)
            }
            #[cfg(not(feature = "cuda"))]
            ComputeDevice::Cuda(_) => Err(EngineError::CudaNotBuilt {
                device: device.to_string(),
            }),
        }
    }

    /// A model of `config`'s shape with random weights generated on CUDA device `ordinal`
    /// (for benchmarks: nothing is read from disk). Matrices are uniform in `±1/sqrt(in)`,
    /// norms one, no biases; the same `seed` gives the same weights.
    #[cfg(feature = "cuda")]
    pub fn random_on_cuda(
        config: ModelConfig,
        ordinal: usize,
        dtype: WeightDtype,
        seed: u64,
    ) -> Result<Self> {
        config
            .validate()
            .map_err(|reason| EngineError::InvalidInput {
                field: "config",
                reason,
            })?;
        let gpu = super::cuda::Gpu::open(ordinal)?;
        let cuda = CudaModel::random(gpu, &config, dtype, seed)?;
        Self::with_cuda(config, cuda)
    }

    #[cfg(feature = "cuda")]
    fn with_cuda(config: ModelConfig, cuda: CudaModel) -> Result<Self> {
        let empty = Tensor::zeros(0, candle_core::DType::F32, &Device::Cpu)?;
        let weights = ModelWeights {
            embed: empty.clone(),
            layers: Vec::new(),
            final_norm: empty,
            lm_head: None,
        };
        Ok(Self {
            rope: Rope::new(&config),
            config,
            weights,
            device: Device::Cpu,
            cuda: Some(Arc::new(cuda)),
        })
    }

    /// The model's CUDA weights, when it runs on a CUDA device.
    #[cfg(feature = "cuda")]
    pub(crate) fn cuda_model(&self) -> Option<&Arc<CudaModel>> {
        self.cuda.as_ref()
    }

    /// Where the forward pass runs.
    pub fn compute_device(&self) -> ComputeDevice {
        #[cfg(feature = "cuda")]
        if let Some(c) = &self.cuda {
            return ComputeDevice::Cuda(c.gpu().ordinal());
        }
        ComputeDevice::Cpu
    }

    /// The model's hyper-parameters.
    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// The device of the tensors the model returns (the CPU: a CUDA model copies its read-out
    /// rows to the host; see [`Model::compute_device`] for where it runs).
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Runs one forward pass over every chunk in `batch` together, appending their keys and
    /// values to `kv`, and returns logits per chunk in batch order.
    ///
    /// On error no sequence keeps positions from this call.
    pub fn forward(
        &self,
        batch: &[SeqChunk<'_>],
        kv: &mut dyn KvStore,
        which: LogitsFor,
    ) -> Result<Vec<Tensor>> {
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
            return Err(EngineError::InvalidInput {
                field: "batch",
                reason: "no sequences".into(),
            });
        }
        let mut seen = std::collections::HashSet::new();
        for chunk in batch {
            if chunk.tokens.is_empty() {
                return Err(EngineError::InvalidInput {
                    field: "tokens",
                    reason: format!("sequence {} has no tokens", chunk.seq),
                });
            }
            if !seen.insert(chunk.seq) {
                return Err(EngineError::InvalidInput {
                    field: "batch",
                    reason: format!("sequence {} appears twice", chunk.seq),
                });
            }
            let end = chunk.start_pos + chunk.tokens.len();
            if end > self.config.context_length {
                return Err(EngineError::PromptTooLong {
                    tokens: end,
                    context: self.config.context_length,
                });
            }
            let held = kv.seq_len(chunk.seq);
            if held != chunk.start_pos {
                return Err(EngineError::Kv(format!(
                    "sequence {} starts at position {} but the store holds {held} positions",
                    chunk.seq, chunk.start_pos
                )));
            }
            if let Some(&bad) = chunk
                .tokens
                .iter()
                .find(|&&t| t as usize >= self.config.vocab_size)
            {
                return Err(EngineError::InvalidInput {
                    field: "tokens",
                    reason: format!(
                        "token id {bad} is outside the vocabulary of {}",
                        self.config.vocab_size
                    ),
                });
            }
        }
        Ok(())
    }

    fn forward_unchecked(
        &self,
        batch: &[SeqChunk<'_>],
        kv: &mut dyn KvStore,
        which: LogitsFor,
    ) -> Result<Vec<Tensor>> {
        #[cfg(feature = "cuda")]
        if let Some(cuda) = &self.cuda {
            if !cuda.has_lm_head() {
                self.lm_head()?;
            }
            let readouts: Vec<Readout> = batch
                .iter()
                .map(|c| match which {
                    LogitsFor::LastPosition => Readout::LastLogits,
                    LogitsFor::AllPositions => Readout::Logits((0..c.tokens.len()).collect()),
                })
                .collect();
            return cuda
                .forward_readouts(batch, kv, &readouts)?
                .into_iter()
                .map(|t| t.ok_or_else(|| EngineError::Kv("logits missing".into())))
                .collect();
        }
        let lm_head = self.lm_head()?;
        let x = self.residual(batch, kv)?;
        let offsets = Self::offsets(batch);
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

    /// Runs one forward pass over every chunk in `batch` together, like [`Model::forward`], and
    /// returns for each chunk what its [`Readout`] asks for (`None` for [`Readout::Nothing`]).
    ///
    /// Last-position logits of every [`Readout::LastLogits`] chunk come from one head call over
    /// exactly those rows, as [`LogitsFor::LastPosition`] computes them; rows read for scoring
    /// go through the head in a call of their own. On error no sequence keeps positions from
    /// this call.
    pub fn forward_readouts(
        &self,
        batch: &[SeqChunk<'_>],
        kv: &mut dyn KvStore,
        readouts: &[Readout],
    ) -> Result<Vec<Option<Tensor>>> {
        self.validate(batch, kv)?;
        self.validate_readouts(batch, readouts)?;
        let result = self.readouts_unchecked(batch, kv, readouts);
        if result.is_err() {
            for chunk in batch {
                kv.truncate(chunk.seq, chunk.start_pos)?;
            }
        }
        result
    }

    fn validate_readouts(&self, batch: &[SeqChunk<'_>], readouts: &[Readout]) -> Result<()> {
        if readouts.len() != batch.len() {
            return Err(EngineError::InvalidInput {
                field: "readouts",
                reason: format!("{} readouts for {} chunks", readouts.len(), batch.len()),
            });
        }
        for (chunk, r) in batch.iter().zip(readouts) {
            let rows = match r {
                Readout::Hidden(rows) | Readout::Logits(rows) => rows,
                Readout::LastLogits | Readout::Nothing => continue,
            };
            if let Some(&bad) = rows.iter().find(|&&row| row >= chunk.tokens.len()) {
                return Err(EngineError::InvalidInput {
                    field: "readouts",
                    reason: format!(
                        "row {bad} is outside sequence {}'s chunk of {} tokens",
                        chunk.seq,
                        chunk.tokens.len()
                    ),
                });
            }
        }
        if readouts
            .iter()
            .any(|r| matches!(r, Readout::LastLogits | Readout::Logits(_)))
            && !self.has_lm_head()
        {
            self.lm_head()?;
        }
        Ok(())
    }

    fn readouts_unchecked(
        &self,
        batch: &[SeqChunk<'_>],
        kv: &mut dyn KvStore,
        readouts: &[Readout],
    ) -> Result<Vec<Option<Tensor>>> {
        #[cfg(feature = "cuda")]
        if let Some(cuda) = &self.cuda {
            return cuda.forward_readouts(batch, kv, readouts);
        }
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

    /// Whether the model has a language-model head (a reward model may have only a score head).
    pub fn has_lm_head(&self) -> bool {
        #[cfg(feature = "cuda")]
        if let Some(cuda) = &self.cuda {
            return cuda.has_lm_head();
        }
        self.weights.lm_head.is_some()
    }

    fn lm_head(&self) -> Result<&Linear> {
        self.weights
            .lm_head
            .as_ref()
            .ok_or_else(|| EngineError::InvalidInput {
                field: "readouts",
                reason:
                    "the model has no language-model head (a reward model); ask for hidden states"
                        .into(),
            })
    }

    fn offsets(batch: &[SeqChunk<'_>]) -> Vec<usize> {
        let mut offsets = Vec::with_capacity(batch.len());
        let mut offset = 0;
        for chunk in batch {
            offsets.push(offset);
            offset += chunk.tokens.len();
        }
        offsets
    }

    /// The residual stream after the last block, `[tokens, hidden]` (before the final norm).
    ///
    /// The stream stays a plain row-major vector between the kernel calls: the residual adds,
    /// the norms and the gate run on it in place (`rows`, candle's bits, split across the
    /// hot helper), and only the projections' inputs become tensors (moved, not copied).
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
            rows::add_and_norm(
                &mut x,
                delta.as_deref(),
                &layer.attn_norm.to_vec1()?,
                eps,
                &mut h,
            );
            let h = Tensor::from_vec(h, (rows, hidden), &self.device)?;
            let attn = self.attention(layer_idx, layer, &h, batch, kv)?;
            let mut h = vec![0f32; x.len()];
            rows::add_and_norm(&mut x, Some(&attn), &layer.ffn_norm.to_vec1()?, eps, &mut h);
            let h = Tensor::from_vec(h, (rows, hidden), &self.device)?;
            let [mut gate, up] = match &layer.gate_up {
                Some(stacked) => stacked.forward(&h)?,
                None => [
                    layer.gate_proj.forward_vec(&h)?,
                    layer.up_proj.forward_vec(&h)?,
                ],
            };
            rows::silu_mul_rows(&mut gate, &up, rows);
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

    /// Heads and head size, as the KV store needs them.
    pub fn attention_shape(&self) -> AttentionShape {
        AttentionShape {
            num_heads: self.config.num_heads,
            num_kv_heads: self.config.num_kv_heads,
            head_dim: self.config.head_dim,
        }
    }
}

/// Each chunk's [`Readout`] from the final residual stream, the same on every device: the
/// last-position rows of every [`Readout::LastLogits`] chunk go through the head in one call (as
/// [`LogitsFor::LastPosition`] computes them), rows read for scoring in a call of their own.
/// `head_rows(rows, logits)` returns the final-normed rows `rows` (absolute positions in the
/// batch), through the language-model head when `logits`.
pub(crate) fn read_out(
    batch: &[SeqChunk<'_>],
    readouts: &[Readout],
    mut head_rows: impl FnMut(&[u32], bool) -> Result<Tensor>,
) -> Result<Vec<Option<Tensor>>> {
    let offsets = Model::offsets(batch);
    let last: Vec<u32> = batch
        .iter()
        .zip(&offsets)
        .zip(readouts)
        .filter(|(_, r)| matches!(r, Readout::LastLogits))
        .map(|((c, o), _)| (o + c.tokens.len() - 1) as u32)
        .collect();
    let last_logits = if last.is_empty() {
        None
    } else {
        Some(head_rows(&last, true)?)
    };
    let mut next_last = 0;
    let mut out = Vec::with_capacity(batch.len());
    for (r, &o) in readouts.iter().zip(&offsets) {
        let absolute =
            |rows: &[usize]| -> Vec<u32> { rows.iter().map(|&row| (o + row) as u32).collect() };
        out.push(match r {
            Readout::Nothing => None,
            Readout::LastLogits => {
                let logits = last_logits
                    .as_ref()
                    .ok_or_else(|| EngineError::Kv("last-position logits missing".into()))?;
                next_last += 1;
                Some(logits.get(next_last - 1)?)
            }
            Readout::Hidden(rows) | Readout::Logits(rows) if rows.is_empty() => None,
            Readout::Hidden(rows) => Some(head_rows(&absolute(rows), false)?),
            Readout::Logits(rows) => Some(head_rows(&absolute(rows), true)?),
        });
    }
    Ok(out)
}
