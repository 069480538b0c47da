//! The KV store port of the forward pass, and its simplest implementation.
//!
//! The forward pass never owns KV memory: it asks a [`KvStore`] to append the keys and values
//! of new positions and to hand back everything a sequence may attend to. That is the seam the
//! paged, radix-indexed store plugs into (a sequence there is a block table; `append` writes
//! into its last blocks and `read` gathers them). [`ContiguousKvStore`] keeps one growing tensor
//! per sequence and layer: correct, simple, and the reference the paged store is tested against.

use std::collections::HashMap;

use candle_core::Tensor;

use super::error::{EngineError, Result};

/// Identifies one sequence (one branch of one request) in a KV store.
pub type SeqId = u64;

/// Where the forward pass keeps keys and values.
///
/// Tensors are `[kv_heads, positions, head_dim]`. Required: [`seq_len`](KvStore::seq_len),
/// [`append`](KvStore::append), [`truncate`](KvStore::truncate), [`fork`](KvStore::fork) and
/// [`release`](KvStore::release).
pub trait KvStore {
    /// Positions stored for `seq` in every layer (0 for an unknown sequence).
    fn seq_len(&self, seq: SeqId) -> usize;

    /// Appends `k`, `v` at the end of `seq` in `layer` and returns the sequence's whole keys and
    /// values in that layer, new positions included.
    fn append(&mut self, layer: usize, seq: SeqId, k: &Tensor, v: &Tensor) -> Result<(Tensor, Tensor)>;

    /// Drops positions `len..` of `seq` in every layer (used to roll back a failed step).
    fn truncate(&mut self, seq: SeqId, len: usize) -> Result<()>;

    /// Makes `child` a copy of `parent`'s positions (cheap where the store shares memory).
    fn fork(&mut self, parent: SeqId, child: SeqId) -> Result<()>;

    /// Forgets `seq` and frees its memory.
    fn release(&mut self, seq: SeqId);
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
        Self { num_layers, seqs: HashMap::new() }
    }

    fn layer_len(entry: &Option<(Tensor, Tensor)>) -> usize {
        entry.as_ref().map_or(0, |(k, _)| k.dims().get(1).copied().unwrap_or(0))
    }
}

impl KvStore for ContiguousKvStore {
    fn seq_len(&self, seq: SeqId) -> usize {
        // A position counts once every layer holds it.
        self.seqs.get(&seq).map_or(0, |layers| layers.iter().map(Self::layer_len).min().unwrap_or(0))
    }

    fn append(&mut self, layer: usize, seq: SeqId, k: &Tensor, v: &Tensor) -> Result<(Tensor, Tensor)> {
        if layer >= self.num_layers {
            return Err(EngineError::Kv(format!("layer {layer} out of range (model has {})", self.num_layers)));
        }
        let num_layers = self.num_layers;
        let layers = self.seqs.entry(seq).or_insert_with(|| vec![None; num_layers]);
        let (k_all, v_all) = match &layers[layer] {
            None => (k.clone(), v.clone()),
            Some((k0, v0)) => (Tensor::cat(&[k0, k], 1)?, Tensor::cat(&[v0, v], 1)?),
        };
        layers[layer] = Some((k_all.clone(), v_all.clone()));
        Ok((k_all, v_all))
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
            .ok_or_else(|| EngineError::Kv(format!("fork from unknown sequence {parent}")))?;
        // candle tensors are immutable and reference counted: this shares, not copies.
        self.seqs.insert(child, layers);
        Ok(())
    }

    fn release(&mut self, seq: SeqId) {
        self.seqs.remove(&seq);
    }
}
