//! The KV store port of the forward pass, and its simplest implementation.
//!
//! The forward pass never owns KV memory. Once per call it tells the store which tokens are
//! being appended ([`KvStore::begin_step`]); then, layer by layer, it hands the store the new
//! queries, keys and values ([`LayerChunk`]) and the store writes the keys/values and returns
//! attention outputs ([`KvStore::attend`]). Attention belongs to the store because the memory
//! layout decides the algorithm: [`ContiguousKvStore`] keeps one growing tensor per sequence
//! and layer and attends with candle ops (the reference path, bit-compatible with
//! candle-transformers); the paged store attends over block tables with the shared-prefix kernel.

use std::collections::HashMap;

use candle_core::Tensor;

use super::attention::{contiguous_attention, AttentionShape};
use super::cuda::DeviceSlice;
use super::error::{EngineError, Result};
use super::model::SeqChunk;

/// Identifies one sequence (one branch of one request) in a KV store: the block manager's id,
/// one name for both.
pub use ponder_kvcache::SeqId;

/// One sequence's new positions in one layer, after RoPE, token-major.
#[derive(Debug, Clone, Copy)]
pub struct LayerChunk<'a> {
    /// The sequence.
    pub seq: SeqId,
    /// Position of the first new token.
    pub start_pos: usize,
    /// New tokens.
    pub len: usize,
    /// Queries `[len, num_heads, head_dim]`.
    pub q: &'a [f32],
    /// Keys `[len, num_kv_heads, head_dim]`.
    pub k: &'a [f32],
    /// Values `[len, num_kv_heads, head_dim]`.
    pub v: &'a [f32],
}

/// Where the forward pass keeps keys and values, and how it attends over them.
///
/// Required: every method. A forward call is `begin_step` once, then `attend` once per layer in
/// order; on any error the model calls `truncate(seq, start_pos)` for each sequence of the call.
pub trait KvStore {
    /// Positions stored (or reserved by the current step) for `seq`; 0 for an unknown sequence.
    fn seq_len(&self, seq: SeqId) -> usize;

    /// Reserves room for every chunk's tokens before layer 0 runs.
    fn begin_step(&mut self, chunks: &[SeqChunk<'_>]) -> Result<()>;

    /// Stores the chunks' keys and values for `layer` and returns the attention output of
    /// every chunk's queries over all of its positions, packed `[total len, num_heads * head_dim]`
    /// in chunk order.
    fn attend(
        &mut self,
        layer: usize,
        chunks: &[LayerChunk<'_>],
        shape: &AttentionShape,
    ) -> Result<Vec<f32>>;

    /// Drops positions `len..` of `seq` in every layer (rolls back a failed step).
    fn truncate(&mut self, seq: SeqId, len: usize) -> Result<()>;

    /// Makes `child` a copy of `parent`'s positions (cheap where the store shares memory).
    fn fork(&mut self, parent: SeqId, child: SeqId) -> Result<()>;

    /// Forgets `seq` and frees its memory.
    fn release(&mut self, seq: SeqId);

    /// [`KvStore::attend`] on a CUDA device: stores `k` and `v` (`[tokens, num_kv_heads,
    /// head_dim]`, f32, the step's tokens in batch order) for `layer` and writes every token's
    /// attention output into `out` (`[tokens, num_heads, head_dim]`). Provided: an error, for
    /// stores whose memory is on the host. In a build without feature `cuda` the buffer type
    /// is uninhabited, so this cannot be called.
    fn attend_cuda(
        &mut self,
        layer: usize,
        q: &DeviceSlice,
        k: &DeviceSlice,
        v: &DeviceSlice,
        out: &mut DeviceSlice,
    ) -> Result<()> {
        let _ = (layer, q, k, v, out);
        Err(EngineError::StoreOnOtherDevice { store: "host" })
    }
}

/// One `(keys, values)` tensor pair per layer per sequence.
#[derive(Debug, Default)]
pub struct ContiguousKvStore {
    num_layers: usize,
    seqs: HashMap<SeqId, Vec<Option<(Tensor, Tensor)>>>,
}

impl ContiguousKvStore {
    /// An empty store for a model with `num_layers` layers.
    pub fn new(num_layers: usize) -> Self {
        Self {
            num_layers,
            seqs: HashMap::new(),
        }
    }

    fn layer_len(entry: &Option<(Tensor, Tensor)>) -> usize {
        entry
            .as_ref()
            .map_or(0, |(k, _)| k.dims().get(1).copied().unwrap_or(0))
    }

    fn append(
        &mut self,
        layer: usize,
        seq: SeqId,
        k: &Tensor,
        v: &Tensor,
    ) -> Result<(Tensor, Tensor)> {
        if layer >= self.num_layers {
            return Err(EngineError::LayerOutOfRange {
                layer,
                layers: self.num_layers,
            });
        }
        let num_layers = self.num_layers;
        let layers = self
            .seqs
            .entry(seq)
            .or_insert_with(|| vec![None; num_layers]);
        let (k_all, v_all) = match &layers[layer] {
            None => (k.clone(), v.clone()),
            Some((k0, v0)) => (Tensor::cat(&[k0, k], 1)?, Tensor::cat(&[v0, v], 1)?),
        };
        layers[layer] = Some((k_all.clone(), v_all.clone()));
        Ok((k_all, v_all))
    }
}

impl KvStore for ContiguousKvStore {
    fn seq_len(&self, seq: SeqId) -> usize {
        // A position counts once every layer holds it.
        self.seqs.get(&seq).map_or(0, |layers| {
            layers.iter().map(Self::layer_len).min().unwrap_or(0)
        })
    }

    fn begin_step(&mut self, _chunks: &[SeqChunk<'_>]) -> Result<()> {
        Ok(())
    }

    fn attend(
        &mut self,
        layer: usize,
        chunks: &[LayerChunk<'_>],
        shape: &AttentionShape,
    ) -> Result<Vec<f32>> {
        let device = candle_core::Device::Cpu;
        let heads_major = |rows: &[f32], len: usize, heads: usize| -> Result<Tensor> {
            Ok(
                Tensor::from_slice(rows, (len, heads, shape.head_dim), &device)?
                    .transpose(0, 1)?
                    .contiguous()?,
            )
        };
        let mut out = Vec::new();
        for c in chunks {
            let q = heads_major(c.q, c.len, shape.num_heads)?;
            let k = heads_major(c.k, c.len, shape.num_kv_heads)?;
            let v = heads_major(c.v, c.len, shape.num_kv_heads)?;
            let (k_all, v_all) = self.append(layer, c.seq, &k, &v)?;
            let y: Vec<f32> = contiguous_attention(shape, &q, &k_all, &v_all, c.start_pos)?
                .flatten_all()?
                .to_vec1()?;
            out.extend(y);
        }
        Ok(out)
    }

    fn truncate(&mut self, seq: SeqId, len: usize) -> Result<()> {
        if let Some(layers) = self.seqs.get_mut(&seq) {
            for entry in layers.iter_mut() {
                if let Some((k, v)) = entry {
                    let n = k.dims().get(1).copied().unwrap_or(0);
                    if len == 0 {
                        *entry = None;
                    } else if n > len {
                        *entry = Some((k.narrow(1, 0, len)?, v.narrow(1, 0, len)?));
                    }
                }
            }
        }
        Ok(())
    }

    fn fork(&mut self, parent: SeqId, child: SeqId) -> Result<()> {
        let layers = self
            .seqs
            .get(&parent)
            .cloned()
            .ok_or(ponder_kvcache::KvCacheError::UnknownSequence(parent))?;
        // candle tensors are immutable and reference counted: this shares, not copies.
        self.seqs.insert(child, layers);
        Ok(())
    }

    fn release(&mut self, seq: SeqId) {
        self.seqs.remove(&seq);
    }
}
