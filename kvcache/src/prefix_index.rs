//! [`PrefixIndex`]: a radix tree over block-sized token chunks mapping prompt prefixes to full
//! KV blocks, with LRU eviction of unreferenced leaves (SGLang's RadixCache, vLLM's prefix cache).
//!
//! Each node stands for one FULL block: its key is that block's `block_size` token ids and its
//! parent is the node of the previous block, so the path from the root to a node spells the
//! tokens `0..depth * block_size` whose K/V the node's chain of blocks holds.
//!
//! Invariants (checked by [`PrefixIndex::check`]):
//! - every node is reachable from the root; parent and child links agree; depth = parent's + 1;
//! - every key is exactly `block_size` tokens; a block appears in at most one node;
//! - node ids are never reused, so a stale `NodeId` held by a caller is detectably dead;
//! - eviction removes only leaves whose block the caller reports unreferenced, oldest tick first,
//!   so a node is never removed before its children.
//!
//! The index owns one reference on each block it holds, but the refcounts themselves live in
//! the block pool; callers pass a `is_unreferenced(block)` predicate ("only the index holds it").

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};

use crate::error::{KvCacheError, Result};
use crate::types::BlockId;

/// Identifies a node; never reused after the node is evicted.
pub(crate) type NodeId = u64;

/// A position in the tree: `None` is the root (the empty prefix), `Some(id)` a node.
pub(crate) type Position = Option<NodeId>;

#[derive(Debug, Clone)]
struct Node {
    parent: Position,
    key: Box<[u32]>,
    block: BlockId,
    /// Number of blocks on the path from the root, this one included (>= 1).
    depth: usize,
    children: HashMap<Box<[u32]>, NodeId>,
    /// Logical clock tick of the last insert or prefix match through this node.
    last_used: u64,
}

/// Outcome of [`PrefixIndex::insert`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Inserted {
    /// A new node now holds the block; the caller must add the index's reference to it.
    New(NodeId),
    /// The path already had a node (holding the returned block); nothing was inserted.
    Existing(NodeId, BlockId),
}

/// Radix tree of full blocks keyed by token chunks.
#[derive(Debug, Clone)]
pub(crate) struct PrefixIndex {
    block_size: usize,
    root_children: HashMap<Box<[u32]>, NodeId>,
    nodes: HashMap<NodeId, Node>,
    by_block: HashMap<BlockId, NodeId>,
    next_id: NodeId,
    clock: u64,
}

impl PrefixIndex {
    /// An empty index over chunks of `block_size` tokens.
    pub(crate) fn new(block_size: usize) -> Self {
        Self {
            block_size,
            root_children: HashMap::new(),
            nodes: HashMap::new(),
            by_block: HashMap::new(),
            next_id: 0,
            clock: 0,
        }
    }

    /// Nodes (equivalently, blocks) in the index.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether `node` is still in the index.
    pub(crate) fn contains(&self, node: NodeId) -> bool {
        self.nodes.contains_key(&node)
    }

    /// Whether `block` is held by some node.
    pub(crate) fn contains_block(&self, block: BlockId) -> bool {
        self.by_block.contains_key(&block)
    }

    /// The node holding `block`, if any.
    pub(crate) fn node_of_block(&self, block: BlockId) -> Option<NodeId> {
        self.by_block.get(&block).copied()
    }

    /// Every block held by the index (in no particular order).
    pub(crate) fn blocks(&self) -> impl Iterator<Item = BlockId> + '_ {
        self.by_block.keys().copied()
    }

    fn children(&self, at: Position) -> Option<&HashMap<Box<[u32]>, NodeId>> {
        match at {
            None => Some(&self.root_children),
            Some(id) => self.nodes.get(&id).map(|n| &n.children),
        }
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// The child of `at` keyed by `chunk`, if present.
    pub(crate) fn child(&self, at: Position, chunk: &[u32]) -> Option<NodeId> {
        self.children(at)?.get(chunk).copied()
    }

    /// Walks `tokens` chunk by chunk from the root, at most `max_blocks` deep, and returns the
    /// matched `(node, block)` chain. Matched nodes are marked used now (LRU).
    pub(crate) fn match_prefix(
        &mut self,
        tokens: &[u32],
        max_blocks: usize,
    ) -> Vec<(NodeId, BlockId)> {
        let mut chain = Vec::new();
        let mut at: Position = None;
        for chunk in tokens.chunks_exact(self.block_size).take(max_blocks) {
            let Some(id) = self.child(at, chunk) else {
                break;
            };
            let Some(node) = self.nodes.get(&id) else {
                break;
            };
            chain.push((id, node.block));
            at = Some(id);
        }
        if !chain.is_empty() {
            let now = self.tick();
            for (id, _) in &chain {
                if let Some(node) = self.nodes.get_mut(id) {
                    node.last_used = now;
                }
            }
        }
        chain
    }

    /// Puts `block` under `parent` keyed by `chunk`, unless that path already has a node (then
    /// the existing node wins and is marked used). The caller adds the index's reference on `New`.
    pub(crate) fn insert(
        &mut self,
        parent: Position,
        chunk: &[u32],
        block: BlockId,
    ) -> Result<Inserted> {
        if chunk.len() != self.block_size {
            return Err(KvCacheError::InvalidBlock {
                block,
                reason: "index key is not one block long",
            });
        }
        let now = self.tick();
        if let Some(id) = self.child(parent, chunk) {
            let node = self.nodes.get_mut(&id).ok_or(KvCacheError::InvalidBlock {
                block,
                reason: "dangling index child",
            })?;
            node.last_used = now;
            return Ok(Inserted::Existing(id, node.block));
        }
        if self.by_block.contains_key(&block) {
            return Err(KvCacheError::InvalidBlock {
                block,
                reason: "block already indexed elsewhere",
            });
        }
        let id = self.next_id;
        let (depth, siblings) = match parent {
            None => (1, &mut self.root_children),
            Some(p) => {
                let node = self.nodes.get_mut(&p).ok_or(KvCacheError::InvalidBlock {
                    block,
                    reason: "insert under a dead node",
                })?;
                (node.depth + 1, &mut node.children)
            }
        };
        siblings.insert(chunk.into(), id);
        self.next_id += 1;
        self.by_block.insert(block, id);
        let node = Node {
            parent,
            key: chunk.into(),
            block,
            depth,
            children: HashMap::new(),
            last_used: now,
        };
        self.nodes.insert(id, node);
        Ok(Inserted::New(id))
    }

    /// `node`'s parent position and key (its block's tokens), if the node is alive.
    pub(crate) fn parent_and_key(&self, node: NodeId) -> Option<(Position, &[u32])> {
        self.nodes.get(&node).map(|n| (n.parent, &*n.key))
    }

    /// The tokens spelled by the path from the root to `node` (`depth * block_size` of them).
    pub(crate) fn path_tokens(&self, node: NodeId) -> Option<Vec<u32>> {
        let mut chunks = Vec::new();
        let mut at = Some(node);
        while let Some(id) = at {
            let n = self.nodes.get(&id)?;
            chunks.push(&n.key);
            at = n.parent;
        }
        Some(
            chunks
                .iter()
                .rev()
                .flat_map(|k| k.iter().copied())
                .collect(),
        )
    }

    /// How many blocks repeated leaf eviction could free: nodes none of whose subtree (itself
    /// included) holds a referenced block.
    pub(crate) fn evictable_count(&self, is_unreferenced: impl Fn(BlockId) -> bool) -> usize {
        let mut pinned: HashSet<NodeId> = HashSet::new();
        for (&id, node) in &self.nodes {
            if is_unreferenced(node.block) {
                continue;
            }
            let mut at = Some(id);
            while let Some(cur) = at {
                if !pinned.insert(cur) {
                    break;
                }
                at = self.nodes.get(&cur).and_then(|n| n.parent);
            }
        }
        self.nodes.len() - pinned.len()
    }

    /// Evicts up to `want` unreferenced leaves, least recently used first; a parent left
    /// childless becomes a candidate in turn. Returns the evicted blocks, whose index reference
    /// the caller must now drop.
    pub(crate) fn evict(
        &mut self,
        want: usize,
        is_unreferenced: impl Fn(BlockId) -> bool,
    ) -> Vec<BlockId> {
        let mut heap: BinaryHeap<Reverse<(u64, NodeId)>> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.children.is_empty() && is_unreferenced(n.block))
            .map(|(&id, n)| Reverse((n.last_used, id)))
            .collect();
        let mut evicted = Vec::with_capacity(want.min(self.nodes.len()));
        while evicted.len() < want {
            let Some(Reverse((_, id))) = heap.pop() else {
                break;
            };
            let Some(node) = self.nodes.remove(&id) else {
                continue;
            };
            self.by_block.remove(&node.block);
            evicted.push(node.block);
            let parent = match node.parent {
                None => {
                    self.root_children.remove(&node.key);
                    continue;
                }
                Some(p) => p,
            };
            if let Some(pn) = self.nodes.get_mut(&parent) {
                pn.children.remove(&node.key);
                if pn.children.is_empty() && is_unreferenced(pn.block) {
                    heap.push(Reverse((pn.last_used, parent)));
                }
            }
        }
        evicted
    }

    /// Verifies the structural invariants in the module doc, describing the first violation.
    pub(crate) fn check(&self) -> std::result::Result<(), String> {
        let mut reached = 0usize;
        let mut stack: Vec<(Position, usize)> = vec![(None, 0)];
        while let Some((at, depth)) = stack.pop() {
            let children = self
                .children(at)
                .ok_or_else(|| format!("dead node {at:?} is linked"))?;
            for (key, &id) in children {
                let node = self
                    .nodes
                    .get(&id)
                    .ok_or_else(|| format!("child {id} of {at:?} is dead"))?;
                if node.parent != at || node.key != *key || node.depth != depth + 1 {
                    return Err(format!(
                        "node {id}: parent/key/depth disagree with its parent {at:?}"
                    ));
                }
                if node.key.len() != self.block_size {
                    return Err(format!("node {id}: key of {} tokens", node.key.len()));
                }
                if self.by_block.get(&node.block) != Some(&id) {
                    return Err(format!(
                        "node {id}: block {} not mapped back to it",
                        node.block
                    ));
                }
                if node.last_used > self.clock {
                    return Err(format!(
                        "node {id}: tick {} is in the future",
                        node.last_used
                    ));
                }
                reached += 1;
                stack.push((Some(id), node.depth));
            }
        }
        if reached != self.nodes.len() || self.by_block.len() != self.nodes.len() {
            return Err(format!(
                "{} nodes, {} reachable from the root, {} blocks mapped",
                self.nodes.len(),
                reached,
                self.by_block.len()
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new_id(r: Result<Inserted>) -> NodeId {
        match r {
            Ok(Inserted::New(id)) => id,
            other => panic!("expected a new node, got {other:?}"),
        }
    }

    /// Index over blocks of 2 tokens holding the paths [1,2][3,4] (blocks 10, 11) and [1,2][5,6]
    /// (block 12).
    fn fork_tree() -> (PrefixIndex, [NodeId; 3]) {
        let mut ix = PrefixIndex::new(2);
        let a = new_id(ix.insert(None, &[1, 2], 10));
        let b = new_id(ix.insert(Some(a), &[3, 4], 11));
        let c = new_id(ix.insert(Some(a), &[5, 6], 12));
        (ix, [a, b, c])
    }

    #[test]
    fn match_prefix_follows_whole_chunks_and_respects_the_cap() {
        let (mut ix, [a, b, _]) = fork_tree();
        assert_eq!(ix.match_prefix(&[1, 2, 3, 4, 9], 9), vec![(a, 10), (b, 11)]);
        assert_eq!(ix.match_prefix(&[1, 2, 3, 4], 1), vec![(a, 10)]);
        assert_eq!(
            ix.match_prefix(&[1, 2, 3], 9),
            vec![(a, 10)],
            "partial chunk never matches"
        );
        assert_eq!(ix.match_prefix(&[7, 7, 3, 4], 9), vec![]);
        assert_eq!(ix.path_tokens(b), Some(vec![1, 2, 3, 4]));
        assert_eq!(ix.check(), Ok(()));
    }

    #[test]
    fn insert_keeps_the_existing_block_on_a_duplicate_path() -> Result<()> {
        let (mut ix, [a, b, _]) = fork_tree();
        assert_eq!(ix.insert(Some(a), &[3, 4], 99)?, Inserted::Existing(b, 11));
        assert!(!ix.contains_block(99));
        assert!(
            ix.insert(Some(a), &[7, 8], 11).is_err(),
            "a block lives in one node only"
        );
        assert!(
            ix.insert(Some(a), &[7], 13).is_err(),
            "keys are whole blocks"
        );
        assert_eq!(ix.len(), 3);
        assert_eq!(ix.check(), Ok(()));
        Ok(())
    }

    #[test]
    fn evicts_lru_leaves_first_and_never_a_parent_before_its_children() {
        let (mut ix, [a, b, c]) = fork_tree();
        ix.match_prefix(&[1, 2, 3, 4], 9); // b (and a) are now more recent than c
        assert_eq!(ix.evict(1, |_| true), vec![12]);
        assert!(!ix.contains(c) && ix.contains(b));
        assert_eq!(ix.evict(5, |_| true), vec![11, 10]);
        assert!(!ix.contains(a) && ix.len() == 0);
        assert_eq!(ix.check(), Ok(()));
    }

    #[test]
    fn referenced_blocks_pin_their_ancestors() {
        let (mut ix, [a, b, _]) = fork_tree();
        let referenced = |blk: BlockId| blk != 11;
        assert_eq!(
            ix.evictable_count(referenced),
            1,
            "only block 12's leaf can go"
        );
        assert_eq!(ix.evict(3, referenced), vec![12]);
        assert!(ix.contains(a) && ix.contains(b));
        assert_eq!(ix.evictable_count(referenced), 0);
        assert_eq!(ix.check(), Ok(()));
    }

    #[test]
    fn node_ids_are_never_reused() {
        let mut ix = PrefixIndex::new(1);
        let a = new_id(ix.insert(None, &[1], 0));
        ix.evict(1, |_| true);
        let b = new_id(ix.insert(None, &[1], 0));
        assert_ne!(a, b);
        assert!(!ix.contains(a));
    }
}
