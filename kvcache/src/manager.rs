//! [`KvCacheManager`]: sequences, their block tables, copy-on-write forks and admission, on top
//! of the [`BlockPool`] and the [`PrefixIndex`] (the layering of vLLM's block manager and
//! mistral.rs's paged-attention cache manager, with SGLang's radix tree for prefix reuse).
//!
//! Invariants (all verified by `check_invariants`, in `invariants.rs`):
//! - a sequence's `tokens` are exactly the positions it has in the cache, so
//!   `blocks.len() == tokens.len().div_ceil(block_size)`;
//! - a block's refcount is the number of tables holding it plus one if the prefix index holds it;
//! - only a block whose refcount is 1 is ever written: a shared partial last block is copied to a
//!   private one before an append (copy-on-write), and a full block is never written again;
//! - every FULL block is offered to the prefix index the moment it fills; if its path already has
//!   a block, that one is kept and the new block stays private to its sequence;
//! - a sequence's `hint` is an index position spelling `tokens[..depth * block_size]` (or a dead
//!   node id, which is detected and replaced by a walk from the root).
//!
//! Operations that allocate are atomic: they compute what they need, evict LRU cached leaves
//! if the free list is short, and fail with `OutOfBlocks` before changing anything.

use std::collections::HashMap;

use crate::block_pool::BlockPool;
use crate::config::KvCacheConfig;
use crate::error::{KvCacheError, Result};
use crate::prefix_index::{Inserted, Position, PrefixIndex};
use crate::types::{Appended, BlockId, CopyBlock, KvCacheStats, SeqId, Slot};

/// One live sequence.
#[derive(Debug, Clone)]
pub(crate) struct Sequence {
    /// Token ids at positions `0..len`.
    pub(crate) tokens: Vec<u32>,
    /// Block `i` holds positions `i * block_size ..(i + 1) * block_size`.
    pub(crate) blocks: Vec<BlockId>,
    /// Index position reached so far and its depth in blocks (`(None, 0)` is the root).
    pub(crate) hint: (Position, usize),
}

/// Paged KV-cache bookkeeping: which block and offset holds each token of each sequence.
#[derive(Debug, Clone)]
pub struct KvCacheManager {
    pub(crate) block_size: usize,
    pub(crate) pool: BlockPool,
    pub(crate) index: PrefixIndex,
    pub(crate) seqs: HashMap<SeqId, Sequence>,
    evictions: u64,
    reused_tokens: u64,
}

impl KvCacheManager {
    /// An empty cache of `cfg.num_blocks` blocks of `cfg.block_size` tokens.
    pub fn new(cfg: KvCacheConfig) -> Result<Self> {
        cfg.validate()?;
        Ok(Self {
            block_size: cfg.block_size,
            pool: BlockPool::new(cfg.num_blocks),
            index: PrefixIndex::new(cfg.block_size),
            seqs: HashMap::new(),
            evictions: 0,
            reused_tokens: 0,
        })
    }

    /// Tokens per block.
    pub fn block_size(&self) -> usize {
        self.block_size
    }

    /// Start sequence `seq` whose prompt is `tokens`, reusing the longest prefix the prefix index
    /// holds in WHOLE blocks but never the whole prompt (at least one token is left to compute,
    /// so the caller gets logits). Returns the number of leading tokens already cached, a
    /// multiple of `block_size`; the sequence then holds those shared blocks (refcount +1 each)
    /// and its length is that count. The caller appends `tokens[returned..]` next.
    pub fn open(&mut self, seq: SeqId, tokens: &[u32]) -> Result<usize> {
        if self.seqs.contains_key(&seq) {
            return Err(KvCacheError::SequenceExists(seq));
        }
        let max_blocks = tokens.len().saturating_sub(1) / self.block_size;
        let chain = self.index.match_prefix(tokens, max_blocks);
        for &(_, block) in &chain {
            self.pool.incref(block)?;
        }
        let cached = chain.len() * self.block_size;
        let hint = (chain.last().map(|&(node, _)| node), chain.len());
        let blocks = chain.into_iter().map(|(_, block)| block).collect();
        let tokens = tokens.get(..cached).unwrap_or_default().to_vec();
        self.seqs.insert(
            seq,
            Sequence {
                tokens,
                blocks,
                hint,
            },
        );
        self.reused_tokens += cached as u64;
        Ok(cached)
    }

    /// Reserve slots for `tokens` appended to `seq`, allocating blocks as needed. If the last
    /// block is partial and shared, it is first copied to a private block (the returned
    /// `CopyBlock`). Blocks that fill are entered into the prefix index. Atomic: on
    /// `OutOfBlocks` nothing changes. Under pressure, LRU cached leaves are evicted first.
    pub fn append(&mut self, seq: SeqId, tokens: &[u32]) -> Result<Appended> {
        let s = self
            .seqs
            .get(&seq)
            .ok_or(KvCacheError::UnknownSequence(seq))?;
        if tokens.is_empty() {
            return Ok(Appended::default());
        }
        let cow = self.cow_source(s);
        let new_blocks = self.new_blocks_for(s, tokens.len());
        self.reserve(usize::from(cow.is_some()) + new_blocks)?;

        let Self {
            block_size,
            pool,
            index,
            seqs,
            ..
        } = self;
        let bs = *block_size;
        let s = seqs
            .get_mut(&seq)
            .ok_or(KvCacheError::UnknownSequence(seq))?;
        let mut out = Appended {
            slots: Vec::with_capacity(tokens.len()),
            copies: Vec::new(),
        };
        if let Some(src) = cow {
            let dst = alloc(pool)?;
            out.copies.push(CopyBlock {
                src,
                dst,
                tokens: s.tokens.len() % bs,
            });
            pool.decref(src)?;
            if let Some(last) = s.blocks.last_mut() {
                *last = dst;
            }
        }
        for &token in tokens {
            let offset = s.tokens.len() % bs;
            if offset == 0 {
                s.blocks.push(alloc(pool)?);
            }
            let block = *s.blocks.last().ok_or(KvCacheError::CorruptSequence {
                seq,
                reason: "a partial position without a block",
            })?;
            out.slots.push(Slot { block, offset });
            s.tokens.push(token);
            if offset + 1 == bs {
                publish(pool, index, s, bs)?;
            }
        }
        Ok(out)
    }

    /// `child` shares ALL of `parent`'s blocks (refcount +1 each), length and token history.
    /// Nothing is copied here; the first divergent append copies at most one partial block.
    pub fn fork(&mut self, parent: SeqId, child: SeqId) -> Result<()> {
        if self.seqs.contains_key(&child) {
            return Err(KvCacheError::SequenceExists(child));
        }
        let p = self
            .seqs
            .get(&parent)
            .ok_or(KvCacheError::UnknownSequence(parent))?
            .clone();
        for &block in &p.blocks {
            self.pool.incref(block)?;
        }
        self.seqs.insert(child, p);
        Ok(())
    }

    /// Forget `seq` (no-op if unknown) and drop its references. Its full blocks stay in the
    /// prefix index as cached (evictable) blocks; blocks nobody else holds are freed.
    pub fn release(&mut self, seq: SeqId) {
        if let Some(s) = self.seqs.remove(&seq) {
            let dropped = s
                .blocks
                .iter()
                .try_for_each(|&b| self.pool.decref(b).map(drop));
            debug_assert!(dropped.is_ok(), "release({seq}): {dropped:?}");
        }
    }

    /// Drop positions `len..` of `seq` (to roll back); frees blocks that become unused. A kept
    /// block that is still shared (or indexed) will be copied on the next append.
    pub fn truncate(&mut self, seq: SeqId, len: usize) -> Result<()> {
        let s = self
            .seqs
            .get_mut(&seq)
            .ok_or(KvCacheError::UnknownSequence(seq))?;
        if len > s.tokens.len() {
            return Err(KvCacheError::TruncateBeyondEnd {
                seq,
                len,
                seq_len: s.tokens.len(),
            });
        }
        s.tokens.truncate(len);
        let dropped = s.blocks.split_off(len.div_ceil(self.block_size));
        if s.hint.1 * self.block_size > len {
            s.hint = (None, 0);
        }
        for block in dropped {
            self.pool.decref(block)?;
        }
        Ok(())
    }

    /// The blocks holding `seq`'s positions, in order.
    pub fn block_table(&self, seq: SeqId) -> Option<&[BlockId]> {
        self.seqs.get(&seq).map(|s| s.blocks.as_slice())
    }

    /// Tokens `seq` holds in the cache (0 if unknown).
    pub fn seq_len(&self, seq: SeqId) -> usize {
        self.seqs.get(&seq).map_or(0, |s| s.tokens.len())
    }

    /// Token ids at `seq`'s positions `0..seq_len`.
    pub fn tokens(&self, seq: SeqId) -> Option<&[u32]> {
        self.seqs.get(&seq).map(|s| s.tokens.as_slice())
    }

    /// Whether `seq` is open.
    pub fn contains(&self, seq: SeqId) -> bool {
        self.seqs.contains_key(&seq)
    }

    /// Blocks that appending `n_tokens` to `seq` would allocate, a copy-on-write block included.
    /// For an unknown `seq`, the blocks a fresh sequence of `n_tokens` would need.
    pub fn blocks_needed(&self, seq: SeqId, n_tokens: usize) -> usize {
        match self.seqs.get(&seq) {
            _ if n_tokens == 0 => 0,
            None => n_tokens.div_ceil(self.block_size),
            Some(s) => usize::from(self.cow_source(s).is_some()) + self.new_blocks_for(s, n_tokens),
        }
    }

    /// Blocks allocatable right now: free plus cached blocks that eviction could reclaim.
    /// O(prefix-index size).
    pub fn available_blocks(&self) -> usize {
        self.pool.num_free() + self.evictable()
    }

    /// Occupancy and reuse counters.
    pub fn stats(&self) -> KvCacheStats {
        let cached_blocks = self
            .index
            .blocks()
            .filter(|&b| self.pool.refcount(b) == 1)
            .count();
        let free_blocks = self.pool.num_free();
        let total_blocks = self.pool.total();
        KvCacheStats {
            total_blocks,
            used_blocks: total_blocks.saturating_sub(free_blocks + cached_blocks),
            cached_blocks,
            free_blocks,
            evictions: self.evictions,
            reused_tokens: self.reused_tokens,
        }
    }

    /// Evicts every cached block that no live sequence pins (vLLM's `reset_prefix_cache`) and
    /// returns how many were freed. Blocks live sequences hold stay indexed.
    pub fn reset_prefix_cache(&mut self) -> Result<usize> {
        let pool = &self.pool;
        let evicted = self.index.evict(usize::MAX, |b| pool.refcount(b) == 1);
        for &block in &evicted {
            self.pool.decref(block)?;
            self.evictions += 1;
        }
        Ok(evicted.len())
    }

    /// The token prefix (positions `0` through the end of `block`) under which the prefix index
    /// holds `block`, or `None` if the block is not indexed. For tests and debugging.
    pub fn indexed_prefix(&self, block: BlockId) -> Option<Vec<u32>> {
        self.index.path_tokens(self.index.node_of_block(block)?)
    }

    /// The partial last block of `s` if appending must copy it first (shared or indexed).
    fn cow_source(&self, s: &Sequence) -> Option<BlockId> {
        let last = *s.blocks.last()?;
        (!s.tokens.len().is_multiple_of(self.block_size) && self.pool.refcount(last) > 1)
            .then_some(last)
    }

    /// Fresh blocks needed for `n` more positions (not counting a copy-on-write block).
    fn new_blocks_for(&self, s: &Sequence, n: usize) -> usize {
        (s.tokens.len() + n)
            .div_ceil(self.block_size)
            .saturating_sub(s.blocks.len())
    }

    fn evictable(&self) -> usize {
        let pool = &self.pool;
        self.index.evictable_count(|b| pool.refcount(b) == 1)
    }

    /// Makes `needed` blocks free, evicting LRU cached leaves if the free list is short; fails
    /// without changing anything if even eviction cannot make room.
    fn reserve(&mut self, needed: usize) -> Result<()> {
        let free = self.pool.num_free();
        if needed <= free {
            return Ok(());
        }
        let available = free + self.evictable();
        if available < needed {
            return Err(KvCacheError::OutOfBlocks {
                needed,
                free: available,
            });
        }
        let pool = &self.pool;
        let evicted = self.index.evict(needed - free, |b| pool.refcount(b) == 1);
        for block in evicted {
            self.pool.decref(block)?;
            self.evictions += 1;
        }
        Ok(())
    }
}

/// Takes a block the caller has already reserved.
fn alloc(pool: &mut BlockPool) -> Result<BlockId> {
    pool.alloc()
        .ok_or(KvCacheError::OutOfBlocks { needed: 1, free: 0 })
}

/// Enters `s`'s full blocks into the index, continuing from its hint (or the root if the hinted
/// node was evicted, re-inserting any evicted ancestors with `s`'s own blocks).
fn publish(
    pool: &mut BlockPool,
    index: &mut PrefixIndex,
    s: &mut Sequence,
    bs: usize,
) -> Result<()> {
    let full = s.tokens.len() / bs;
    let (mut at, mut depth) = s.hint;
    if depth > full || at.is_some_and(|node| !index.contains(node)) {
        (at, depth) = (None, 0);
    }
    while depth < full {
        let (Some(chunk), Some(&block)) = (
            s.tokens.get(depth * bs..(depth + 1) * bs),
            s.blocks.get(depth),
        ) else {
            break;
        };
        at = Some(match index.insert(at, chunk, block)? {
            Inserted::New(node) => {
                pool.incref(block)?;
                node
            }
            Inserted::Existing(node, _) => node,
        });
        depth += 1;
    }
    s.hint = (at, depth);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(block_size: usize, num_blocks: usize) -> Result<KvCacheManager> {
        KvCacheManager::new(KvCacheConfig {
            block_size,
            num_blocks,
        })
    }

    #[test]
    fn append_fills_blocks_in_order_and_indexes_full_ones() -> Result<()> {
        let mut kv = kv(2, 4)?;
        assert_eq!(kv.open(1, &[])?, 0);
        let a = kv.append(1, &[5, 6, 7])?;
        let slot = |block, offset| Slot { block, offset };
        assert_eq!(a.slots, vec![slot(0, 0), slot(0, 1), slot(1, 0)]);
        assert!(a.copies.is_empty());
        assert_eq!(kv.indexed_prefix(0), Some(vec![5, 6]));
        assert_eq!(kv.indexed_prefix(1), None, "partial blocks are not indexed");
        assert_eq!(kv.pool.refcount(0), 2);
        assert_eq!(kv.check_invariants(), Ok(()));
        Ok(())
    }

    #[test]
    fn blocks_needed_counts_the_copy_and_new_blocks() -> Result<()> {
        let mut kv = kv(4, 8)?;
        kv.open(1, &[])?;
        kv.append(1, &[1, 2, 3, 4, 5])?;
        assert_eq!(kv.blocks_needed(1, 3), 0);
        assert_eq!(kv.blocks_needed(1, 4), 1);
        kv.fork(1, 2)?;
        assert_eq!(
            kv.blocks_needed(1, 3),
            1,
            "shared partial block must be copied"
        );
        assert_eq!(kv.blocks_needed(1, 0), 0);
        assert_eq!(kv.blocks_needed(99, 9), 3, "unknown sequence: as if fresh");
        Ok(())
    }

    #[test]
    fn sequence_ids_are_checked() -> Result<()> {
        let mut kv = kv(4, 8)?;
        kv.open(1, &[1])?;
        assert_eq!(kv.open(1, &[1]), Err(KvCacheError::SequenceExists(1)));
        assert_eq!(kv.fork(1, 1), Err(KvCacheError::SequenceExists(1)));
        assert_eq!(kv.fork(7, 8), Err(KvCacheError::UnknownSequence(7)));
        assert_eq!(kv.append(7, &[1]), Err(KvCacheError::UnknownSequence(7)));
        assert_eq!(kv.truncate(7, 0), Err(KvCacheError::UnknownSequence(7)));
        assert_eq!(
            kv.truncate(1, 3),
            Err(KvCacheError::TruncateBeyondEnd {
                seq: 1,
                len: 3,
                seq_len: 0
            })
        );
        kv.release(7); // unknown: no-op
        assert_eq!(kv.seq_len(7), 0);
        Ok(())
    }

    #[test]
    fn a_stale_hint_is_repaired_by_a_walk_from_the_root() -> Result<()> {
        // Seq 2 duplicates seq 1's first block, so its hint points at seq 1's node; once that
        // node is evicted, seq 2's next full block re-inserts the path with its own blocks.
        let mut kv = kv(2, 4)?;
        kv.open(1, &[])?;
        kv.open(2, &[])?;
        kv.append(1, &[1, 2])?;
        kv.append(2, &[1, 2])?;
        assert_eq!(kv.indexed_prefix(1), None, "duplicate stays private");
        kv.release(1);
        assert_eq!(kv.index.evict(1, |_| true), vec![0]);
        kv.pool.decref(0)?;
        kv.append(2, &[3, 4])?;
        let table = kv
            .block_table(2)
            .map(<[BlockId]>::to_vec)
            .unwrap_or_default();
        assert_eq!(table.len(), 2);
        assert_eq!(kv.indexed_prefix(table[0]), Some(vec![1, 2]));
        assert_eq!(kv.indexed_prefix(table[1]), Some(vec![1, 2, 3, 4]));
        assert_eq!(kv.check_invariants(), Ok(()));
        Ok(())
    }
}
