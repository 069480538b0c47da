//! The CUDA backend in a build without feature `cuda`: the names the engine calls (`Gpu`,
//! `CudaModel`, `DeviceKv`, the device buffer type of `KvStore::attend_cuda`), with no way to make one.
//!
//! Following candle's dummy CUDA backend, this keeps the engine's call sites free of feature
//! gates: they match on `Backend::Cuda(model)` as in a CUDA build, and the
//! compiler knows the arm cannot run. [`Gpu::open`] is the only entry, and it returns
//! [`EngineError::CudaNotBuilt`]; every other method takes an uninhabited value.

use std::convert::Infallible;
use std::sync::Arc;

use candle_core::Tensor;

use crate::attention::AttentionShape;
use crate::config::ModelConfig;
use crate::device::WeightDtype;
use crate::error::{EngineError, Result};
use crate::kv::KvStore;
use crate::model::{Readout, SeqChunk};
use crate::weights::ModelWeights;

/// A device buffer of `f32` (cudarc's `CudaSlice<f32>` in a CUDA build): uninhabited here.
pub(crate) type DeviceSlice = Infallible;

/// A CUDA device: none can be opened in this build.
#[derive(Debug)]
pub(crate) enum Gpu {}

impl Gpu {
    /// Always [`EngineError::CudaNotBuilt`].
    pub(crate) fn open(ordinal: usize) -> Result<Arc<Self>> {
        Err(EngineError::CudaNotBuilt {
            device: format!("cuda:{ordinal}"),
        })
    }

    pub(crate) fn ordinal(&self) -> usize {
        match *self {}
    }
}

/// A model on a CUDA device: none exists in this build.
#[derive(Debug)]
pub(crate) enum CudaModel {}

impl CudaModel {
    pub(crate) fn upload(
        gpu: Arc<Gpu>,
        _config: &ModelConfig,
        _weights: &ModelWeights,
        _dtype: WeightDtype,
    ) -> Result<Self> {
        match *gpu {}
    }

    pub(crate) fn random(
        gpu: Arc<Gpu>,
        _config: &ModelConfig,
        _dtype: WeightDtype,
        _seed: u64,
    ) -> Result<Self> {
        match *gpu {}
    }

    pub(crate) fn gpu(&self) -> &Arc<Gpu> {
        match *self {}
    }

    pub(crate) fn has_lm_head(&self) -> bool {
        match *self {}
    }

    pub(crate) fn forward_readouts(
        &self,
        _batch: &[SeqChunk<'_>],
        _kv: &mut dyn KvStore,
        _readouts: &[Readout],
    ) -> Result<Vec<Option<Tensor>>> {
        match *self {}
    }
}

/// One query sequence of a step, as the device plan needs it: the paged store builds it in
/// every build, only the CUDA backend reads it.
#[derive(Debug, Clone)]
#[allow(dead_code)]
pub(crate) struct StepSeq {
    /// New tokens (query rows).
    pub(crate) len: usize,
    /// Its block table after this step's append.
    pub(crate) table: Vec<u32>,
    /// Position of its first new token.
    pub(crate) start_pos: usize,
}

/// Device KV memory: none exists in this build.
#[derive(Debug)]
pub(crate) enum DeviceKv {}

impl DeviceKv {
    pub(crate) fn for_model(
        model: &CudaModel,
        _config: &ModelConfig,
        _shape: AttentionShape,
        _bytes: u64,
        _block_size: usize,
    ) -> Result<(usize, Self)> {
        match *model {}
    }

    pub(crate) fn layers(&self) -> usize {
        match *self {}
    }

    pub(crate) fn copy_blocks(&mut self, _pairs: &[(u32, u32)]) -> Result<()> {
        match *self {}
    }

    pub(crate) fn begin_step(&mut self, _seqs: &[StepSeq], _slots: Vec<u32>) -> Result<()> {
        match *self {}
    }

    pub(crate) fn attend(
        &mut self,
        _layer: usize,
        _q: &DeviceSlice,
        _k_new: &DeviceSlice,
        _v_new: &DeviceSlice,
        _out: &mut DeviceSlice,
    ) -> Result<()> {
        match *self {}
    }

    pub(crate) fn plan_reads(&self) -> (u64, u64) {
        match *self {}
    }
}
