//! [`TokenTree`]: the positions one search has had the engine compute, at token granularity —
//! what [`super::LocalGenerator`] charges prefill against and how it tells a first computation
//! from a recomputation.
//!
//! A position is named by a chain hash of every token up to it (hash of position k =
//! hash(hash of position k-1, token k)), so two sequences share a position exactly when they
//! share the whole prefix up to it, as in a radix tree. The set lives and dies with its
//! generator (one per search), so its size is bounded by the search's own tree.

use std::collections::HashSet;
use std::hash::{Hash, Hasher};

/// Positions computed for one search.
#[derive(Debug, Default)]
pub(super) struct TokenTree {
    positions: HashSet<u64>,
}

fn chain(tokens: &[u32]) -> impl Iterator<Item = u64> + '_ {
    tokens.iter().scan(0u64, |prev, token| {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (*prev, token).hash(&mut h);
        *prev = h.finish();
        Some(*prev)
    })
}

impl TokenTree {
    /// Leading positions of `tokens` this search has computed (what it is not charged again).
    pub(super) fn known(&self, tokens: &[u32]) -> usize {
        chain(tokens)
            .take_while(|h| self.positions.contains(h))
            .count()
    }

    /// Records every position of `tokens` as this search's (served from the cache up to
    /// `from`, computed from there); returns how many of the computed ones the search had
    /// computed before: recomputations.
    pub(super) fn record(&mut self, tokens: &[u32], from: usize) -> u64 {
        chain(tokens)
            .enumerate()
            .filter(|&(i, h)| !self.positions.insert(h) && i >= from)
            .count() as u64
    }

    /// Positions recorded.
    pub(super) fn len(&self) -> usize {
        self.positions.len()
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::TokenTree;

    #[test]
    fn positions_are_shared_by_whole_prefix_only() {
        let mut tree = TokenTree::default();
        let a: Vec<u32> = (0..40).collect();
        assert_eq!(tree.known(&a), 0);
        assert_eq!(tree.record(&a[..39], 16), 0, "nothing computed before");
        assert_eq!(
            tree.known(&a),
            39,
            "token granularity: no partial block is lost"
        );
        // Computing the tail again is a recomputation; the first new position is not.
        assert_eq!(tree.record(&a[..39], 30), 9);
        assert_eq!(tree.record(&a, 39), 0);
        // A sibling sharing the first 20 tokens knows those 20.
        let mut b = a[..20].to_vec();
        b.extend(100..130);
        assert_eq!(tree.known(&b), 20);
        // The same tokens after a different first token are different positions.
        let mut c = vec![1000];
        c.extend(1..40);
        assert_eq!(tree.known(&c), 0);
        assert_eq!(tree.len(), 40);
    }
}
