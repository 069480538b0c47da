//! The forward pass on a CUDA device: the CPU pass's structure (one packed `[tokens, hidden]`
//! matrix for the projections and the MLP, attention per sequence against the paged store)
//! with every tensor in device memory. Only token ids, positions and the rows read out cross
//! to the device; only the read-out rows (logits or hidden states) come back, as CPU tensors,
//! so the scheduler, sampling and scoring code is the same for both devices.
//!
//! Architecture options (q/k/v biases, per-head q/k norms) are read from the config's
//! description, as on the CPU.
//!
//! Numerics: f32 activations, f32 accumulation in every product, RMSNorm / RoPE / SiLU as the
//! CPU computes them (the RoPE angle table is the CPU's own, uploaded), no fused multiply-add
//! in the elementwise kernels; cuBLAS and attention sum in a different order than the CPU, so
//! results agree within float tolerance, not bitwise.

use std::sync::Arc;

use candle_core::{Device, Tensor};
use cudarc::driver::CudaSlice;
use half::bf16;

use super::weights::{CudaWeights, WeightDtype};
use super::{cuda_err, Gpu};
use crate::config::{ModelConfig, RopeStyle};
use crate::error::{EngineError, Result};
use crate::kv::KvStore;
use crate::model::{read_out, Readout, SeqChunk};
use crate::rope::Rope;
use crate::weights::ModelWeights;

/// A model's weights and RoPE tables on one device.
#[derive(Debug)]
pub(crate) struct CudaModel {
    gpu: Arc<Gpu>,
    weights: CudaWeights,
    cos: CudaSlice<f32>,
    sin: CudaSlice<f32>,
    config: ModelConfig,
    dtype: WeightDtype,
}

impl CudaModel {
    /// Uploads CPU weights to `gpu`.
    pub(crate) fn upload(
        gpu: Arc<Gpu>,
        config: &ModelConfig,
        weights: &ModelWeights,
        dtype: WeightDtype,
    ) -> Result<Self> {
        let w = CudaWeights::upload(&gpu, weights, dtype)?;
        Self::with_weights(gpu, config, w, dtype)
    }

    /// A random model of `config`'s shape generated on `gpu`.
    pub(crate) fn random(
        gpu: Arc<Gpu>,
        config: &ModelConfig,
        dtype: WeightDtype,
        seed: u64,
    ) -> Result<Self> {
        let w = CudaWeights::random(&gpu, config, dtype, seed)?;
        Self::with_weights(gpu, config, w, dtype)
    }

    fn with_weights(
        gpu: Arc<Gpu>,
        config: &ModelConfig,
        weights: CudaWeights,
        dtype: WeightDtype,
    ) -> Result<Self> {
        let rope = Rope::new(config);
        let (cos, sin) = rope.tables();
        let stream = gpu.stream();
        let cos = stream
            .clone_htod(cos)
            .map_err(|e| cuda_err("uploading rope tables", e))?;
        let sin = stream
            .clone_htod(sin)
            .map_err(|e| cuda_err("uploading rope tables", e))?;
        stream
            .synchronize()
            .map_err(|e| cuda_err("uploading weights", e))?;
        Ok(Self {
            gpu,
            weights,
            cos,
            sin,
            config: config.clone(),
            dtype,
        })
    }

    /// The device.
    pub(crate) fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }

    /// How the matrices are stored.
    pub(crate) fn dtype(&self) -> WeightDtype {
        self.dtype
    }

    /// Whether the model has a language-model head.
    pub(crate) fn has_lm_head(&self) -> bool {
        self.weights.lm_head.is_some()
    }

    fn alloc(&self, n: usize) -> Result<CudaSlice<f32>> {
        self.gpu
            .stream()
            .alloc_zeros::<f32>(n.max(1))
            .map_err(|e| cuda_err("allocating activations", e))
    }

    /// One forward pass over `batch` (validated by `Model`), returning what `readouts` ask for.
    pub(crate) fn forward_readouts(
        &self,
        batch: &[SeqChunk<'_>],
        kv: &mut dyn KvStore,
        readouts: &[Readout],
    ) -> Result<Vec<Option<Tensor>>> {
        self.gpu.bind()?;
        kv.begin_step(batch)?;
        let c = &self.config;
        let (hdim, inter) = (c.hidden_size, c.intermediate_size);
        let (nh, nkv, d) = (c.num_heads, c.num_kv_heads, c.head_dim);
        let ids: Vec<u32> = batch
            .iter()
            .flat_map(|ch| ch.tokens.iter().copied())
            .collect();
        let positions: Vec<u32> = batch
            .iter()
            .flat_map(|ch| (ch.start_pos..ch.start_pos + ch.tokens.len()).map(|p| p as u32))
            .collect();
        let t = ids.len();
        let stream = self.gpu.stream();
        let ids_d = stream
            .clone_htod(&ids)
            .map_err(|e| cuda_err("uploading token ids", e))?;
        let pos_d = stream
            .clone_htod(&positions)
            .map_err(|e| cuda_err("uploading positions", e))?;
        let mut x = self.alloc(t * hdim)?;
        self.gpu
            .embed(&self.weights.embed, &ids_d, &mut x, t, hdim)?;
        let (mut h, mut q, mut k, mut v, mut att) = (
            self.alloc(t * hdim)?,
            self.alloc(t * nh * d)?,
            self.alloc(t * nkv * d)?,
            self.alloc(t * nkv * d)?,
            self.alloc(t * nh * d)?,
        );
        let (mut g, mut u) = (self.alloc(t * inter)?, self.alloc(t * inter)?);
        let mut scratch: Option<CudaSlice<bf16>> = None;
        // Per-head q/k norms write here, then swap with `q` / `k`.
        let mut qk_normed = if c.architecture.layer.qk_norm {
            Some((self.alloc(t * nh * d)?, self.alloc(t * nkv * d)?))
        } else {
            None
        };
        let eps = c.rms_norm_eps as f32;
        let interleaved = c.rope_style == RopeStyle::Interleaved;
        for (layer_idx, l) in self.weights.layers.iter().enumerate() {
            let gpu = &self.gpu;
            gpu.rms_norm(&x, &l.attn_norm, &mut h, t, hdim, eps)?;
            gpu.linear(&l.q, &h, t, &mut q, 0.0, &mut scratch)?;
            gpu.linear(&l.k, &h, t, &mut k, 0.0, &mut scratch)?;
            gpu.linear(&l.v, &h, t, &mut v, 0.0, &mut scratch)?;
            if let (Some((q_norm, k_norm)), Some((qn, kn))) = (&l.qk_norm, qk_normed.as_mut()) {
                gpu.rms_norm(&q, q_norm, qn, t * nh, d, eps)?;
                gpu.rms_norm(&k, k_norm, kn, t * nkv, d, eps)?;
                std::mem::swap(&mut q, qn);
                std::mem::swap(&mut k, kn);
            }
            gpu.rope(
                &mut q,
                &pos_d,
                &self.cos,
                &self.sin,
                t,
                nh,
                d / 2,
                interleaved,
            )?;
            gpu.rope(
                &mut k,
                &pos_d,
                &self.cos,
                &self.sin,
                t,
                nkv,
                d / 2,
                interleaved,
            )?;
            kv.attend_cuda(layer_idx, &q, &k, &v, &mut att)?;
            gpu.linear(&l.o, &att, t, &mut x, 1.0, &mut scratch)?;
            gpu.rms_norm(&x, &l.ffn_norm, &mut h, t, hdim, eps)?;
            gpu.linear(&l.gate, &h, t, &mut g, 0.0, &mut scratch)?;
            gpu.linear(&l.up, &h, t, &mut u, 0.0, &mut scratch)?;
            gpu.silu_mul(&mut g, &u, t * inter)?;
            gpu.linear(&l.down, &g, t, &mut x, 1.0, &mut scratch)?;
        }
        read_out(batch, readouts, |rows, logits| {
            self.head_rows(&x, rows, logits, &mut scratch)
        })
    }

    /// Final-normed rows `rows` of `x` (`[n, hidden]`), through the head when `logits`
    /// (`[n, vocab]`), copied to the host.
    fn head_rows(
        &self,
        x: &CudaSlice<f32>,
        rows: &[u32],
        logits: bool,
        scratch: &mut Option<CudaSlice<bf16>>,
    ) -> Result<Tensor> {
        let (n, hdim) = (rows.len(), self.config.hidden_size);
        let stream = self.gpu.stream();
        let rows_d = stream
            .clone_htod(rows)
            .map_err(|e| cuda_err("uploading rows", e))?;
        let mut sel = self.alloc(n * hdim)?;
        self.gpu.gather_rows(x, &rows_d, n, hdim, &mut sel)?;
        let mut normed = self.alloc(n * hdim)?;
        self.gpu.rms_norm(
            &sel,
            &self.weights.final_norm,
            &mut normed,
            n,
            hdim,
            self.config.rms_norm_eps as f32,
        )?;
        let (data, cols) = if logits {
            let head = self.weights.lm_head.as_ref().ok_or_else(|| EngineError::InvalidInput {
                field: "readouts",
                reason: "the model has no language-model head (a reward model); ask for hidden states".into(),
            })?;
            let mut y = self.alloc(n * head.out_dim)?;
            self.gpu.linear(head, &normed, n, &mut y, 0.0, scratch)?;
            (y, head.out_dim)
        } else {
            (normed, hdim)
        };
        let mut host = stream
            .clone_dtoh(&data)
            .map_err(|e| cuda_err("copying outputs to the host", e))?;
        host.truncate(n * cols);
        Ok(Tensor::from_vec(host, (n, cols), &Device::Cpu)?)
    }
}
