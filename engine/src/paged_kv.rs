//! The paged KV store: keys and values in fixed-size blocks shared between sequences, attended
//! block by block with the shared-prefix kernel.
//!
//! Bookkeeping (block pool, radix prefix index, copy-on-write) is `ponder-kvcache`'s; this
//! module owns only the f32 memory the blocks name and the glue to the attention kernel. Memory
//! layout per layer: `[num_blocks, block_size, num_kv_heads, head_dim]`, keys and values apart.
//! A fork costs nothing here; the first divergent append copies at most one partial block.
//!
//! The memory is on the host (f32, attended by the CPU kernel) or, for a model on a CUDA
//! device ([`PagedKvStore::for_model`], feature `cuda`), in device buffers of the model's
//! element type (`cuda::DeviceKv`), driven by the same bookkeeping.

use std::collections::HashMap;

use ponder_kernels::attention::{paged_attention, AttentionParams, PagedKv, SeqQueries};
use ponder_kvcache::{KvCacheConfig, KvCacheError, KvCacheManager, KvCacheStats, Slot};

use super::attention::AttentionShape;
use super::config::ModelConfig;
use super::cuda::{DeviceKv, DeviceSlice, StepSeq};
use super::error::{EngineError, Result};
use super::kv::{KvStore, LayerChunk, SeqId};
use super::model::{Model, SeqChunk};

/// Where the blocks' keys and values live.
#[derive(Debug)]
enum Memory {
    /// Host f32, `[layer][num_blocks * block_floats]`.
    Host {
        keys: Vec<Vec<f32>>,
        values: Vec<Vec<f32>>,
    },
    /// Device buffers of a CUDA model (uninhabited in a build without feature `cuda`); boxed,
    /// as their per-layer handles are large beside the host variant.
    Cuda(Box<DeviceKv>),
}

/// Block memory plus its bookkeeping.
#[derive(Debug)]
pub struct PagedKvStore {
    cache: KvCacheManager,
    shape: AttentionShape,
    /// Floats in one block of one layer (keys or values).
    block_floats: usize,
    memory: Memory,
    /// Slots reserved by the current step, per sequence, in token order.
    step_slots: HashMap<SeqId, Vec<Slot>>,
    blocks_read: u64,
    block_reads_saved: u64,
}

/// Bytes one block costs across all layers (keys and values, f32).
pub fn bytes_per_block(config: &ModelConfig, block_size: usize) -> u64 {
    (2 * config.num_layers
        * block_size
        * config.num_kv_heads
        * config.head_dim
        * std::mem::size_of::<f32>()) as u64
}

impl PagedKvStore {
    /// A store of `num_blocks` blocks of `block_size` tokens for `config`'s model.
    pub fn new(config: &ModelConfig, block_size: usize, num_blocks: usize) -> Result<Self> {
        let cache = KvCacheManager::new(KvCacheConfig {
            block_size,
            num_blocks,
        })?;
        let block_floats = block_size * config.num_kv_heads * config.head_dim;
        // One zeroed allocation per layer. Under the binary's allocator (mimalloc) a large
        // zeroed allocation is written through at once, so the whole pool is resident from the
        // start (as a GPU server's preallocated pool is) and no request pays first-touch page
        // faults; the cost is the zeroing, once per store (~0.4 s of system time per GiB on
        // the dev VM).
        let layer = || vec![0f32; num_blocks * block_floats];
        Ok(Self {
            cache,
            shape: AttentionShape {
                num_heads: config.num_heads,
                num_kv_heads: config.num_kv_heads,
                head_dim: config.head_dim,
            },
            block_floats,
            memory: Memory::Host {
                keys: (0..config.num_layers).map(|_| layer()).collect(),
                values: (0..config.num_layers).map(|_| layer()).collect(),
            },
            step_slots: HashMap::new(),
            blocks_read: 0,
            block_reads_saved: 0,
        })
    }

    /// As many blocks as fit in `bytes`.
    pub fn with_memory(config: &ModelConfig, bytes: u64, block_size: usize) -> Result<Self> {
        let cfg =
            KvCacheConfig::from_memory(bytes, bytes_per_block(config, block_size), block_size)?;
        Self::new(config, block_size, cfg.num_blocks)
    }

    /// A store of about `bytes` of blocks where `model` runs: host memory for a CPU model (as
    /// [`PagedKvStore::with_memory`]), device memory of the model's element type for a CUDA one.
    pub fn for_model(model: &Model, bytes: u64, block_size: usize) -> Result<Self> {
        if let Some(cuda) = model.cuda_model() {
            let config = model.config();
            let shape = model.attention_shape();
            let (num_blocks, memory) = DeviceKv::for_model(cuda, config, shape, bytes, block_size)?;
            let cache = KvCacheManager::new(KvCacheConfig {
                block_size,
                num_blocks,
            })?;
            return Ok(Self {
                cache,
                shape,
                block_floats: block_size * config.num_kv_heads * config.head_dim,
                memory: Memory::Cuda(Box::new(memory)),
                step_slots: HashMap::new(),
                blocks_read: 0,
                block_reads_saved: 0,
            });
        }
        Self::with_memory(model.config(), bytes, block_size)
    }

    /// Starts `seq` for `prompt`, reusing cached prompt blocks; returns how many leading tokens
    /// are already cached (the caller computes `prompt[returned..]` from that position).
    pub fn open(&mut self, seq: SeqId, prompt: &[u32]) -> Result<usize> {
        self.cache.open(seq, prompt).map_err(EngineError::from)
    }

    /// Bookkeeping counters.
    pub fn stats(&self) -> KvCacheStats {
        self.cache.stats()
    }

    /// Key/value blocks the attention kernel loaded, and loads saved by sharing, since creation.
    pub fn attention_reads(&self) -> (u64, u64) {
        (self.blocks_read, self.block_reads_saved)
    }

    /// Blocks appending `n_tokens` to `seq` would allocate.
    pub fn blocks_needed(&self, seq: SeqId, n_tokens: usize) -> usize {
        self.cache.blocks_needed(seq, n_tokens)
    }

    /// Blocks allocatable now (free plus evictable cached blocks).
    pub fn available_blocks(&self) -> usize {
        self.cache.available_blocks()
    }

    /// Layers the memory holds.
    fn cache_layers(&self) -> usize {
        match &self.memory {
            Memory::Host { keys, .. } => keys.len(),
            Memory::Cuda(dev) => dev.layers(),
        }
    }

    /// Tokens per block.
    pub fn block_size(&self) -> usize {
        self.cache.block_size()
    }

    fn copy_block(&mut self, src: u32, dst: u32, tokens: usize) -> Result<()> {
        match &mut self.memory {
            Memory::Host { keys, values } => {
                let n = tokens * self.shape.num_kv_heads * self.shape.head_dim;
                let (s, d) = (
                    src as usize * self.block_floats,
                    dst as usize * self.block_floats,
                );
                for layer in keys.iter_mut().chain(values.iter_mut()) {
                    layer.copy_within(s..s + n, d);
                }
                Ok(())
            }
            Memory::Cuda(dev) => dev.copy_blocks(&[(src, dst)]),
        }
    }

    /// Writes token-major rows (`[len, nkv, d]`) into the given slots of `layer_mem`.
    fn write_rows(
        layer_mem: &mut [f32],
        token_floats: usize,
        block_size: usize,
        slots: &[Slot],
        rows: &[f32],
    ) -> Result<()> {
        if rows.len() != slots.len() * token_floats {
            return Err(EngineError::SizeMismatch {
                what: "floats of keys for the reserved slots",
                expected: slots.len() * token_floats,
                got: rows.len(),
            });
        }
        for (slot, row) in slots.iter().zip(rows.chunks_exact(token_floats)) {
            let at = (slot.block as usize * block_size + slot.offset) * token_floats;
            layer_mem[at..at + token_floats].copy_from_slice(row);
        }
        Ok(())
    }
}

impl KvStore for PagedKvStore {
    fn seq_len(&self, seq: SeqId) -> usize {
        self.cache.seq_len(seq)
    }

    fn begin_step(&mut self, chunks: &[SeqChunk<'_>]) -> Result<()> {
        self.step_slots.clear();
        for chunk in chunks {
            if self.cache.block_table(chunk.seq).is_none() {
                self.cache.open(chunk.seq, &[])?;
            }
            let appended = self.cache.append(chunk.seq, chunk.tokens)?;
            for c in appended.copies {
                self.copy_block(c.src, c.dst, c.tokens)?;
            }
            self.step_slots.insert(chunk.seq, appended.slots);
        }
        if let Memory::Cuda(dev) = &mut self.memory {
            let block_size = self.cache.block_size();
            let mut seqs = Vec::with_capacity(chunks.len());
            let mut slots = Vec::new();
            for chunk in chunks {
                let table = self
                    .cache
                    .block_table(chunk.seq)
                    .ok_or(KvCacheError::UnknownSequence(chunk.seq))?;
                seqs.push(StepSeq {
                    len: chunk.tokens.len(),
                    table: table.to_vec(),
                    start_pos: chunk.start_pos,
                });
                let reserved = self
                    .step_slots
                    .get(&chunk.seq)
                    .map(Vec::as_slice)
                    .unwrap_or_default();
                slots.extend(
                    reserved
                        .iter()
                        .map(|s| (s.block as usize * block_size + s.offset) as u32),
                );
            }
            dev.begin_step(&seqs, slots)?;
            let (read, saved) = dev.plan_reads();
            let layers = self.cache_layers() as u64;
            self.blocks_read += read * layers;
            self.block_reads_saved += saved * layers;
        }
        Ok(())
    }

    fn attend(
        &mut self,
        layer: usize,
        chunks: &[LayerChunk<'_>],
        shape: &AttentionShape,
    ) -> Result<Vec<f32>> {
        let (keys, values) = match &mut self.memory {
            Memory::Host { keys, values } => (keys, values),
            Memory::Cuda(_) => {
                return Err(EngineError::StoreOnOtherDevice {
                    store: "CUDA device",
                })
            }
        };
        if layer >= keys.len() {
            return Err(EngineError::LayerOutOfRange {
                layer,
                layers: keys.len(),
            });
        }
        let block_size = self.cache.block_size();
        let token_floats = shape.num_kv_heads * shape.head_dim;
        for c in chunks {
            let slots = self
                .step_slots
                .get(&c.seq)
                .ok_or(EngineError::MissingOutput {
                    what: "reserved slots",
                    seq: Some(c.seq),
                })?;
            Self::write_rows(&mut keys[layer], token_floats, block_size, slots, c.k)?;
            Self::write_rows(&mut values[layer], token_floats, block_size, slots, c.v)?;
        }
        let mut seqs = Vec::with_capacity(chunks.len());
        for c in chunks {
            let block_table = self
                .cache
                .block_table(c.seq)
                .ok_or(KvCacheError::UnknownSequence(c.seq))?;
            seqs.push(SeqQueries {
                q: c.q,
                block_table,
                start_pos: c.start_pos,
            });
        }
        let mut out = vec![0f32; chunks.iter().map(|c| c.q.len()).sum()];
        let kv = PagedKv {
            k: &keys[layer],
            v: &values[layer],
            block_size,
            num_kv_heads: shape.num_kv_heads,
            head_dim: shape.head_dim,
        };
        let params = AttentionParams {
            num_heads: shape.num_heads,
            scale: 1.0 / (shape.head_dim as f32).sqrt(),
        };
        let stats = paged_attention(&kv, &seqs, &params, &mut out)?;
        self.blocks_read += stats.kv_blocks_read as u64;
        self.block_reads_saved += stats.shared_block_reads_saved as u64;
        Ok(out)
    }

    fn attend_cuda(
        &mut self,
        layer: usize,
        q: &DeviceSlice,
        k: &DeviceSlice,
        v: &DeviceSlice,
        out: &mut DeviceSlice,
    ) -> Result<()> {
        match &mut self.memory {
            Memory::Cuda(dev) => dev.attend(layer, q, k, v, out),
            Memory::Host { .. } => Err(EngineError::StoreOnOtherDevice { store: "host" }),
        }
    }

    fn truncate(&mut self, seq: SeqId, len: usize) -> Result<()> {
        self.step_slots.remove(&seq);
        if self.cache.block_table(seq).is_some() {
            self.cache.truncate(seq, len)?;
        }
        Ok(())
    }

    fn fork(&mut self, parent: SeqId, child: SeqId) -> Result<()> {
        self.cache.fork(parent, child).map_err(EngineError::from)
    }

    fn release(&mut self, seq: SeqId) {
        self.step_slots.remove(&seq);
        self.cache.release(seq);
    }
}
