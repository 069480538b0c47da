//! [`BlockPool`]: a fixed set of physical KV blocks with per-block refcounts and an O(1) free list.
//!
//! The pool knows nothing of tokens, sequences or the prefix index; it only counts references.
//! Invariants (checked by [`BlockPool::check`]):
//! - a block is on the free list exactly when its refcount is 0, and appears there at most once;
//! - `alloc` hands out a block with refcount 1 and never hands out a block that is referenced;
//! - refcounts never underflow: `decref` of a free block is an error, not a wrap.
//!
//! The free list is a LIFO stack (as in vLLM's `BlockAllocator`): alloc and free are O(1) and a
//! fresh pool hands out ids in ascending order, which keeps tests and traces readable.

use crate::error::{KvCacheError, Result};
use crate::types::BlockId;

/// Fixed-size pool of refcounted blocks.
#[derive(Debug, Clone)]
pub(crate) struct BlockPool {
    refcounts: Vec<u32>,
    /// Free block ids; the next allocation pops from the end.
    free: Vec<BlockId>,
}

impl BlockPool {
    /// A pool of `num_blocks` free blocks. The caller validated `num_blocks <= u32::MAX`.
    pub(crate) fn new(num_blocks: usize) -> Self {
        let top = BlockId::try_from(num_blocks).unwrap_or(BlockId::MAX);
        Self {
            refcounts: vec![0; num_blocks],
            free: (0..top).rev().collect(),
        }
    }

    /// Blocks in the pool.
    pub(crate) fn total(&self) -> usize {
        self.refcounts.len()
    }

    /// Blocks on the free list.
    pub(crate) fn num_free(&self) -> usize {
        self.free.len()
    }

    /// References held on `block` (0 if free or out of range).
    pub(crate) fn refcount(&self, block: BlockId) -> u32 {
        self.refcounts.get(block as usize).copied().unwrap_or(0)
    }

    /// Takes a free block and gives it refcount 1, or `None` if the free list is empty.
    pub(crate) fn alloc(&mut self) -> Option<BlockId> {
        let block = self.free.pop()?;
        if let Some(rc) = self.refcounts.get_mut(block as usize) {
            *rc = 1;
        }
        Some(block)
    }

    /// Adds one reference to an allocated block.
    pub(crate) fn incref(&mut self, block: BlockId) -> Result<()> {
        let rc = self.slot(block)?;
        if *rc == 0 {
            return Err(KvCacheError::InvalidBlock {
                block,
                reason: "incref of a free block",
            });
        }
        *rc = rc.checked_add(1).ok_or(KvCacheError::InvalidBlock {
            block,
            reason: "refcount overflow",
        })?;
        Ok(())
    }

    /// Drops one reference; returns `true` when that was the last one and the block is free again.
    pub(crate) fn decref(&mut self, block: BlockId) -> Result<bool> {
        let rc = self.slot(block)?;
        if *rc == 0 {
            return Err(KvCacheError::InvalidBlock {
                block,
                reason: "decref of a free block",
            });
        }
        *rc -= 1;
        let freed = *rc == 0;
        if freed {
            self.free.push(block);
        }
        Ok(freed)
    }

    fn slot(&mut self, block: BlockId) -> Result<&mut u32> {
        self.refcounts
            .get_mut(block as usize)
            .ok_or(KvCacheError::InvalidBlock {
                block,
                reason: "block id out of range",
            })
    }

    /// Verifies the module invariants, describing the first violation.
    pub(crate) fn check(&self) -> std::result::Result<(), String> {
        let mut on_free_list = vec![false; self.refcounts.len()];
        for &block in &self.free {
            let seen = on_free_list
                .get_mut(block as usize)
                .ok_or_else(|| format!("free list holds out-of-range block {block}"))?;
            if *seen {
                return Err(format!("block {block} is on the free list twice"));
            }
            *seen = true;
        }
        for (block, (&rc, &free)) in self.refcounts.iter().zip(&on_free_list).enumerate() {
            if free != (rc == 0) {
                return Err(format!(
                    "block {block}: refcount {rc} but on free list = {free}"
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashSet;

    #[test]
    fn fresh_pool_hands_out_ascending_ids_then_runs_dry() {
        let mut pool = BlockPool::new(3);
        assert_eq!(
            (pool.alloc(), pool.alloc(), pool.alloc()),
            (Some(0), Some(1), Some(2))
        );
        assert_eq!(pool.alloc(), None);
        assert_eq!(pool.num_free(), 0);
        assert!(pool.check().is_ok());
    }

    #[test]
    fn block_is_freed_only_by_its_last_reference() -> Result<()> {
        let mut pool = BlockPool::new(2);
        let b = pool
            .alloc()
            .ok_or(KvCacheError::OutOfBlocks { needed: 1, free: 0 })?;
        pool.incref(b)?;
        assert_eq!(pool.refcount(b), 2);
        assert!(!pool.decref(b)?);
        assert_eq!(pool.num_free(), 1);
        assert!(pool.decref(b)?);
        assert_eq!(pool.num_free(), 2);
        assert!(pool.check().is_ok());
        Ok(())
    }

    #[test]
    fn underflow_and_bad_ids_are_errors_not_wraps() {
        let mut pool = BlockPool::new(2);
        assert!(matches!(
            pool.decref(0),
            Err(KvCacheError::InvalidBlock { block: 0, .. })
        ));
        assert!(matches!(
            pool.incref(1),
            Err(KvCacheError::InvalidBlock { block: 1, .. })
        ));
        assert!(matches!(
            pool.decref(7),
            Err(KvCacheError::InvalidBlock { block: 7, .. })
        ));
        assert_eq!(pool.refcount(0), 0);
        assert_eq!(pool.num_free(), 2);
        assert!(pool.check().is_ok());
    }

    #[derive(Debug, Clone)]
    enum Op {
        Alloc,
        Incref(usize),
        Decref(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => Just(Op::Alloc),
            1 => any::<usize>().prop_map(Op::Incref),
            3 => any::<usize>().prop_map(Op::Decref),
        ]
    }

    proptest! {
        /// Against a model refcount map: a referenced block is never handed out again, and the
        /// free list always holds exactly the unreferenced blocks.
        #[test]
        fn never_hands_out_a_block_twice(n in 1usize..24, ops in prop::collection::vec(op(), 0..300)) {
            let mut pool = BlockPool::new(n);
            let mut model: Vec<(BlockId, u32)> = Vec::new();
            for op in ops {
                match op {
                    Op::Alloc => match pool.alloc() {
                        Some(b) => {
                            prop_assert!(model.iter().all(|&(m, _)| m != b), "block {} handed out twice", b);
                            model.push((b, 1));
                        }
                        None => prop_assert_eq!(model.len(), n),
                    },
                    Op::Incref(i) if !model.is_empty() => {
                        let k = i % model.len();
                        prop_assert!(pool.incref(model[k].0).is_ok());
                        model[k].1 += 1;
                    }
                    Op::Decref(i) if !model.is_empty() => {
                        let k = i % model.len();
                        let freed = pool.decref(model[k].0);
                        model[k].1 -= 1;
                        prop_assert_eq!(freed, Ok(model[k].1 == 0));
                        if model[k].1 == 0 {
                            model.swap_remove(k);
                        }
                    }
                    Op::Incref(_) | Op::Decref(_) => {}
                }
                prop_assert_eq!(pool.num_free(), n - model.len());
                for &(b, rc) in &model {
                    prop_assert_eq!(pool.refcount(b), rc);
                }
                prop_assert_eq!(pool.check(), Ok(()));
            }
        }

        /// Allocating everything, freeing it all in any order, then allocating again returns
        /// every block exactly once each time.
        #[test]
        fn free_list_returns_everything(n in 1usize..64, seed in any::<u64>()) {
            let mut pool = BlockPool::new(n);
            for _round in 0..2 {
                let mut got: Vec<BlockId> = std::iter::from_fn(|| pool.alloc()).collect();
                prop_assert_eq!(got.len(), n);
                prop_assert_eq!(got.iter().collect::<HashSet<_>>().len(), n);
                prop_assert_eq!(pool.num_free(), 0);
                // A seeded shuffle of the release order.
                let mut s = seed | 1;
                for i in (1..got.len()).rev() {
                    s ^= s << 13; s ^= s >> 7; s ^= s << 17;
                    got.swap(i, (s % (i as u64 + 1)) as usize);
                }
                for b in got {
                    prop_assert_eq!(pool.decref(b), Ok(true));
                }
                prop_assert_eq!(pool.num_free(), n);
                prop_assert_eq!(pool.check(), Ok(()));
            }
        }
    }
}
