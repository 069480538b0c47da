//! `KvCacheManager::check_invariants`: an independent recount of the whole state, used by the
//! seeded random-operation tests after every step and cheap enough for debug builds (linear in
//! blocks, index nodes and held tokens).
//!
//! It trusts nothing the manager caches: refcounts are recomputed from the block tables and the
//! index, and each sequence's tokens are walked through the radix tree. What it checks:
//! - the pool's free list and the index's tree are internally consistent;
//! - each block's refcount == (tables holding it) + (1 if indexed); so no block is both free and
//!   referenced, and no refcount underflowed;
//! - `free + used + cached == total`;
//! - each sequence holds `len.div_ceil(block_size)` distinct blocks;
//! - every block sits at the same depth in all tables holding it, and its holders agree on the
//!   tokens of the positions they share;
//! - every indexed block a sequence holds is indexed under exactly that sequence's tokens;
//! - each sequence's index hint, if still alive, spells a prefix of its tokens.

use std::collections::{HashMap, HashSet};

use crate::manager::{KvCacheManager, Sequence};
use crate::prefix_index::Position;
use crate::types::{BlockId, SeqId};

/// Per block: its depth and the longest token run any holder has in it.
type Holders<'a> = HashMap<BlockId, (usize, &'a [u32])>;

impl KvCacheManager {
    /// Checks every invariant, returning a description of the first violation.
    pub fn check_invariants(&self) -> Result<(), String> {
        self.pool.check()?;
        self.index.check()?;
        let total = self.pool.total();

        let mut expected = vec![0u32; total];
        for block in self.index.blocks() {
            *expected
                .get_mut(block as usize)
                .ok_or_else(|| format!("index holds bad block {block}"))? += 1;
        }
        let mut holders = Holders::new();
        let mut seq_ids: Vec<_> = self.seqs.keys().copied().collect();
        seq_ids.sort_unstable();
        for id in seq_ids {
            let Some(s) = self.seqs.get(&id) else {
                continue;
            };
            for &block in &s.blocks {
                *expected
                    .get_mut(block as usize)
                    .ok_or_else(|| format!("seq {id} holds bad block {block}"))? += 1;
            }
            self.check_sequence(id, s, &mut holders)?;
        }
        for (block, &want) in expected.iter().enumerate() {
            let have = self.pool.refcount(block as BlockId);
            if have != want {
                return Err(format!(
                    "block {block}: refcount {have}, but {want} holders"
                ));
            }
        }
        let st = self.stats();
        if st.free_blocks + st.used_blocks + st.cached_blocks != total || st.total_blocks != total {
            return Err(format!("stats do not add up: {st:?}"));
        }
        let used = expected
            .iter()
            .enumerate()
            .filter(|&(b, &rc)| rc > u32::from(self.index.contains_block(b as BlockId)))
            .count();
        if used != st.used_blocks {
            return Err(format!(
                "{used} blocks held by sequences, stats say {}",
                st.used_blocks
            ));
        }
        Ok(())
    }

    /// One sequence's table, its agreement with other holders, its index path and its hint.
    fn check_sequence<'a>(
        &self,
        id: SeqId,
        s: &'a Sequence,
        holders: &mut Holders<'a>,
    ) -> Result<(), String> {
        let bs = self.block_size;
        let len = s.tokens.len();
        if s.blocks.len() != len.div_ceil(bs) {
            return Err(format!(
                "seq {id}: {len} tokens in {} blocks of {bs}",
                s.blocks.len()
            ));
        }
        let mut seen = HashSet::with_capacity(s.blocks.len());
        // The index position spelling tokens[..depth * bs], while the tree has that path.
        let mut walk: Option<Position> = Some(None);
        for ((depth, &block), run) in s.blocks.iter().enumerate().zip(s.tokens.chunks(bs)) {
            if !seen.insert(block) {
                return Err(format!("seq {id} holds block {block} twice"));
            }
            match holders.get(&block) {
                Some(&(d, _)) if d != depth => {
                    return Err(format!("block {block} at depth {d} and {depth} (seq {id})"));
                }
                Some(&(_, other)) if !(run.starts_with(other) || other.starts_with(run)) => {
                    return Err(format!(
                        "seq {id} disagrees with another holder of block {block}"
                    ));
                }
                Some(&(_, other)) if other.len() >= run.len() => {}
                _ => {
                    holders.insert(block, (depth, run));
                }
            }
            let parent = walk;
            walk = walk.and_then(|at| self.index.child(at, run).map(Some));
            if let Some(node) = self.index.node_of_block(block) {
                let (node_parent, key) = self.index.parent_and_key(node).unwrap_or((None, &[]));
                if Some(node_parent) != parent || !key.starts_with(run) {
                    return Err(format!(
                        "seq {id}: block {block} is indexed under other tokens"
                    ));
                }
            }
        }
        let (hint, depth) = s.hint;
        if depth * bs > len {
            return Err(format!(
                "seq {id}: hint depth {depth} beyond its {len} tokens"
            ));
        }
        let hinted = match hint {
            None if depth == 0 => Some(Vec::new()),
            None => return Err(format!("seq {id}: root hint with depth {depth}")),
            Some(node) => self.index.path_tokens(node),
        };
        if hinted.is_some_and(|path| path[..] != s.tokens[..depth * bs]) {
            return Err(format!(
                "seq {id}: hint spells other tokens than its prefix"
            ));
        }
        Ok(())
    }
}
