//! A loaded decoder: validation, rollback and read-outs of a batched forward pass, dispatched to
//! the backend chosen when the model loads ([`ComputeDevice`]): the CPU (`cpu.rs`) or a CUDA
//! device (`cuda::CudaModel`; in a build without feature `cuda`, an uninhabited stub, so this
//! file needs no `#[cfg]`).
//!
//! Unlike candle-transformers' `ModelWeights` (one sequence, KV cache inside the model), a
//! [`Model`] is immutable and shared: the tokens of every sequence in a batch are packed
//! together, and attention runs per sequence against keys and values held by an external
//! [`KvStore`]. That is the shape continuous batching and shared-prefix KV need.
//!
//! Besides logits for decoding ([`Model::forward`]), a pass can read chosen rows of chosen
//! chunks ([`Model::forward_readouts`]): final-normed hidden states for a reward head, or
//! logits at step tags, which is how process reward models are scored inside the batch. Both
//! backends validate the same way, roll back the same way on error, and return the same
//! outputs (a CUDA model copies its read-out rows to the host).

use std::sync::Arc;

use candle_core::{Device, Tensor};

use super::attention::AttentionShape;
use super::config::ModelConfig;
use super::cpu::CpuModel;
use super::cuda::{CudaModel, Gpu};
use super::device::ComputeDevice;
use super::error::{EngineError, Result};
use super::kv::{KvStore, SeqId};
use super::weights::ModelWeights;
use super::WeightDtype;

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
    /// The device of the tensors the model returns (the CPU for a CUDA model too).
    device: Device,
    backend: Backend,
}

/// Where the forward pass runs, chosen when the model loads.
#[derive(Debug, Clone)]
enum Backend {
    /// Host weights, our CPU kernels.
    Cpu(Arc<CpuModel>),
    /// Device weights; uninhabited in a build without feature `cuda`.
    Cuda(Arc<CudaModel>),
}

impl Model {
    pub(crate) fn new(config: ModelConfig, weights: ModelWeights, device: Device) -> Result<Self> {
        Ok(Self {
            backend: Backend::Cpu(Arc::new(CpuModel::new(&config, weights, device.clone()))),
            config,
            device,
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
            ComputeDevice::Cpu => Self::new(config, weights, Device::Cpu),
            ComputeDevice::Cuda(ordinal) => {
                let cuda = CudaModel::upload(Gpu::open(ordinal)?, &config, &weights, dtype)?;
                drop(weights);
                Ok(Self::with_cuda(config, cuda))
            }
        }
    }

    /// A model of `config`'s shape with random weights generated on CUDA device `ordinal`
    /// (for benchmarks: nothing is read from disk). Matrices are uniform in `±1/sqrt(in)`,
    /// norms one, no biases; the same `seed` gives the same weights. Without feature `cuda`:
    /// [`EngineError::CudaNotBuilt`].
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
        let cuda = CudaModel::random(Gpu::open(ordinal)?, &config, dtype, seed)?;
        Ok(Self::with_cuda(config, cuda))
    }

    fn with_cuda(config: ModelConfig, cuda: CudaModel) -> Self {
        Self {
            config,
            device: Device::Cpu,
            backend: Backend::Cuda(Arc::new(cuda)),
        }
    }

    /// The model's CUDA weights, when it runs on a CUDA device.
    pub(crate) fn cuda_model(&self) -> Option<&Arc<CudaModel>> {
        match &self.backend {
            Backend::Cuda(cuda) => Some(cuda),
            Backend::Cpu(_) => None,
        }
    }

    /// Where the forward pass runs.
    pub fn compute_device(&self) -> ComputeDevice {
        match self.cuda_model() {
            Some(cuda) => ComputeDevice::Cuda(cuda.gpu().ordinal()),
            None => ComputeDevice::Cpu,
        }
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
        if !self.has_lm_head() {
            return Err(no_lm_head());
        }
        let result = match &self.backend {
            Backend::Cpu(cpu) => cpu.forward(batch, kv, which),
            Backend::Cuda(cuda) => {
                let readouts: Vec<Readout> = batch
                    .iter()
                    .map(|c| match which {
                        LogitsFor::LastPosition => Readout::LastLogits,
                        LogitsFor::AllPositions => Readout::Logits((0..c.tokens.len()).collect()),
                    })
                    .collect();
                cuda.forward_readouts(batch, kv, &readouts).and_then(|out| {
                    out.into_iter()
                        .map(|t| {
                            t.ok_or(EngineError::MissingOutput {
                                what: "logits",
                                seq: None,
                            })
                        })
                        .collect()
                })
            }
        };
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
                return Err(EngineError::PositionMismatch {
                    seq: chunk.seq,
                    start: chunk.start_pos,
                    held,
                });
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
            return Err(no_lm_head());
        }
        Ok(())
    }

    fn readouts_unchecked(
        &self,
        batch: &[SeqChunk<'_>],
        kv: &mut dyn KvStore,
        readouts: &[Readout],
    ) -> Result<Vec<Option<Tensor>>> {
        match &self.backend {
            Backend::Cpu(cpu) => cpu.forward_readouts(batch, kv, readouts),
            Backend::Cuda(cuda) => cuda.forward_readouts(batch, kv, readouts),
        }
    }

    /// Whether the model has a language-model head (a reward model may have only a score head).
    pub fn has_lm_head(&self) -> bool {
        match &self.backend {
            Backend::Cpu(cpu) => cpu.has_lm_head(),
            Backend::Cuda(cuda) => cuda.has_lm_head(),
        }
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

/// The error for logits asked of a model without a language-model head.
pub(crate) fn no_lm_head() -> EngineError {
    EngineError::InvalidInput {
        field: "readouts",
        reason: "the model has no language-model head (a reward model); ask for hidden states"
            .into(),
    }
}

/// Where each chunk of `batch` starts in the packed `[tokens, …]` rows.
pub(crate) fn offsets(batch: &[SeqChunk<'_>]) -> Vec<usize> {
    let mut offsets = Vec::with_capacity(batch.len());
    let mut offset = 0;
    for chunk in batch {
        offsets.push(offset);
        offset += chunk.tokens.len();
    }
    offsets
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
    let offsets = offsets(batch);
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
                let logits = last_logits.as_ref().ok_or(EngineError::MissingOutput {
                    what: "last-position logits",
                    seq: None,
                })?;
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
