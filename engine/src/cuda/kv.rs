//! The paged KV store's memory on a CUDA device: one key and one value buffer per layer,
//! `[num_blocks, block_size, num_kv_heads, head_dim]` of f32 or bf16, the layout of the CPU
//! store and of `ponder-kernels`' CUDA kernels.
//!
//! The bookkeeping (block pool, radix prefix index, copy-on-write decisions) stays with
//! `PagedKvStore`'s `ponder-kvcache` manager, unchanged; this module only carries out its
//! decisions on the device: block copies for copy-on-write forks (`kv_copy_blocks`), one
//! attention plan per step over the step's block tables (`plan_attention`, shared-prefix groups
//! when they pay), and per layer the append of the step's keys and values into their slots
//! (`kv_append`) followed by attention (`run_attention`) for every row, prefill and decode.

use std::sync::Arc;

use cudarc::driver::CudaSlice;
use half::bf16;
use ponder_kernels::attention::AttentionParams;
use ponder_kernels::cuda::{AttentionPlan, CudaPagedKv, Grouping, SeqSpan};
use ponder_kernels::kv::{KvElem, KvLayout};

use super::{cuda_err, CudaModel, Gpu, WeightDtype};
use crate::attention::AttentionShape;
use crate::config::ModelConfig;
use crate::error::{EngineError, Result};

/// The element type of device KV blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KvDtype {
    /// f32 (an f32 model: exact agreement with the CPU store).
    F32,
    /// bf16 (a bf16 model: half the memory and bandwidth; attention still accumulates in f32).
    Bf16,
}

impl KvDtype {
    /// Bytes per element.
    pub(crate) fn size(self) -> usize {
        match self {
            Self::F32 => 4,
            Self::Bf16 => 2,
        }
    }
}

/// Per-layer buffers of one element type, and the current step's plan.
#[derive(Debug)]
struct Layers<T> {
    k: Vec<CudaSlice<T>>,
    v: Vec<CudaSlice<T>>,
    plan: Option<AttentionPlan<T>>,
}

#[derive(Debug)]
enum Memory {
    F32(Layers<f32>),
    Bf16(Layers<bf16>),
}

/// One query sequence of a step, as the plan needs it.
#[derive(Debug, Clone)]
pub(crate) struct StepSeq {
    /// New tokens (query rows).
    pub(crate) len: usize,
    /// Its block table after this step's append.
    pub(crate) table: Vec<u32>,
    /// Position of its first new token.
    pub(crate) start_pos: usize,
}

/// Device KV memory for a model.
#[derive(Debug)]
pub(crate) struct DeviceKv {
    gpu: Arc<Gpu>,
    layout: KvLayout,
    shape: AttentionShape,
    memory: Memory,
    /// Flat slots (`block * block_size + offset`) of the step's tokens, in batch order.
    slots: Vec<u32>,
}

fn alloc_layers<T: KvElem + cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits>(
    gpu: &Gpu,
    layers: usize,
    len: usize,
) -> Result<Layers<T>> {
    let stream = gpu.stream();
    let alloc = || {
        stream
            .alloc_zeros::<T>(len)
            .map_err(|e| cuda_err("allocating KV blocks", e))
    };
    let k = (0..layers).map(|_| alloc()).collect::<Result<Vec<_>>>()?;
    let v = (0..layers).map(|_| alloc()).collect::<Result<Vec<_>>>()?;
    Ok(Layers { k, v, plan: None })
}

impl DeviceKv {
    /// As many blocks of `block_size` tokens as fit in `bytes` for `model`'s layers, in its
    /// element type (f32 weights keep f32 blocks, bf16 weights bf16 ones); the block count
    /// is returned with the memory, for the bookkeeping to manage.
    pub(crate) fn for_model(
        model: &CudaModel,
        config: &ModelConfig,
        shape: AttentionShape,
        bytes: u64,
        block_size: usize,
    ) -> Result<(usize, Self)> {
        let dtype = match model.dtype() {
            WeightDtype::F32 => KvDtype::F32,
            WeightDtype::Bf16 => KvDtype::Bf16,
        };
        let per_block = (2
            * config.num_layers
            * block_size
            * config.num_kv_heads
            * config.head_dim
            * dtype.size()) as u64;
        let blocks =
            ponder_kvcache::KvCacheConfig::from_memory(bytes, per_block, block_size)?.num_blocks;
        let memory = Self::new(
            Arc::clone(model.gpu()),
            shape,
            config.num_layers,
            block_size,
            blocks,
            dtype,
        )?;
        Ok((blocks, memory))
    }

    /// `num_blocks` blocks of `block_size` tokens for every one of `layers` layers.
    pub(crate) fn new(
        gpu: Arc<Gpu>,
        shape: AttentionShape,
        layers: usize,
        block_size: usize,
        num_blocks: usize,
        dtype: KvDtype,
    ) -> Result<Self> {
        let len = num_blocks * block_size * shape.num_kv_heads * shape.head_dim;
        let memory = match dtype {
            KvDtype::F32 => Memory::F32(alloc_layers(&gpu, layers, len)?),
            KvDtype::Bf16 => Memory::Bf16(alloc_layers(&gpu, layers, len)?),
        };
        let layout = KvLayout {
            block_size,
            num_kv_heads: shape.num_kv_heads,
            head_dim: shape.head_dim,
        };
        Ok(Self {
            gpu,
            layout,
            shape,
            memory,
            slots: Vec::new(),
        })
    }

    /// Layers held.
    pub(crate) fn layers(&self) -> usize {
        match &self.memory {
            Memory::F32(l) => l.k.len(),
            Memory::Bf16(l) => l.k.len(),
        }
    }

    /// Copies blocks `src → dst` in every layer (copy-on-write of a fork's partial block).
    pub(crate) fn copy_blocks(&mut self, pairs: &[(u32, u32)]) -> Result<()> {
        if pairs.is_empty() {
            return Ok(());
        }
        let (k, layout) = (&self.gpu.kernels, &self.layout);
        macro_rules! copy {
            ($l:expr) => {
                for (kc, vc) in $l.k.iter_mut().zip($l.v.iter_mut()) {
                    k.kv_copy_blocks(layout, kc, vc, pairs)
                        .map_err(|e| cuda_err("kv_copy_blocks", e))?;
                }
            };
        }
        match &mut self.memory {
            Memory::F32(l) => copy!(l),
            Memory::Bf16(l) => copy!(l),
        }
        Ok(())
    }

    /// Plans the step's attention over `seqs` (after their blocks were reserved) and keeps the
    /// slots their new tokens go to.
    pub(crate) fn begin_step(&mut self, seqs: &[StepSeq], slots: Vec<u32>) -> Result<()> {
        self.slots = slots;
        let spans: Vec<SeqSpan<'_>> = seqs
            .iter()
            .map(|s| SeqSpan {
                len: s.len,
                block_table: &s.table,
                start_pos: s.start_pos,
            })
            .collect();
        let params = AttentionParams {
            num_heads: self.shape.num_heads,
            scale: 1.0 / (self.shape.head_dim as f32).sqrt(),
        };
        let (kernels, layout) = (&self.gpu.kernels, &self.layout);
        macro_rules! plan {
            ($l:expr) => {{
                $l.plan = None;
                let (Some(k), Some(v)) = ($l.k.first(), $l.v.first()) else {
                    return Err(EngineError::LayerOutOfRange {
                        layer: 0,
                        layers: 0,
                    });
                };
                let kv = CudaPagedKv {
                    k,
                    v,
                    block_size: layout.block_size,
                    num_kv_heads: layout.num_kv_heads,
                    head_dim: layout.head_dim,
                };
                $l.plan = Some(
                    kernels
                        .plan_attention(&kv, &spans, &params, Grouping::Auto)
                        .map_err(|e| cuda_err("plan_attention", e))?,
                );
            }};
        }
        match &mut self.memory {
            Memory::F32(l) => plan!(l),
            Memory::Bf16(l) => plan!(l),
        }
        Ok(())
    }

    /// Writes the step's keys and values (`[tokens, num_kv_heads, head_dim]`, f32) of `layer`
    /// into their slots, then attends every query row (`q`, `out`: `[tokens, num_heads,
    /// head_dim]`) over its sequence's keys with the step's plan.
    pub(crate) fn attend(
        &mut self,
        layer: usize,
        q: &CudaSlice<f32>,
        k_new: &CudaSlice<f32>,
        v_new: &CudaSlice<f32>,
        out: &mut CudaSlice<f32>,
    ) -> Result<()> {
        let (kernels, layout, slots) = (&self.gpu.kernels, &self.layout, &self.slots);
        macro_rules! attend {
            ($l:expr) => {{
                let n = $l.k.len();
                let (Some(kc), Some(vc)) = ($l.k.get_mut(layer), $l.v.get_mut(layer)) else {
                    return Err(EngineError::LayerOutOfRange { layer, layers: n });
                };
                kernels
                    .kv_append(layout, kc, vc, k_new, v_new, slots)
                    .map_err(|e| cuda_err("kv_append", e))?;
                let plan = $l.plan.as_mut().ok_or(EngineError::MissingOutput {
                    what: "attention plan",
                    seq: None,
                })?;
                let kv = CudaPagedKv {
                    k: &*kc,
                    v: &*vc,
                    block_size: layout.block_size,
                    num_kv_heads: layout.num_kv_heads,
                    head_dim: layout.head_dim,
                };
                kernels
                    .run_attention(plan, &kv, q, out)
                    .map_err(|e| cuda_err("run_attention", e))?;
            }};
        }
        match &mut self.memory {
            Memory::F32(l) => attend!(l),
            Memory::Bf16(l) => attend!(l),
        }
        Ok(())
    }

    /// Block loads of the step's plan and loads saved by shared-prefix groups.
    pub(crate) fn plan_reads(&self) -> (u64, u64) {
        let stats = match &self.memory {
            Memory::F32(l) => l.plan.as_ref().map(|p| p.stats()),
            Memory::Bf16(l) => l.plan.as_ref().map(|p| p.stats()),
        };
        stats.map_or((0, 0), |s| {
            (s.kv_blocks_read as u64, s.shared_block_reads_saved as u64)
        })
    }
}
