//! The step-score cache of a PRM: the score of a step, keyed by a fingerprint of everything the
//! PRM read up to it (problem and steps `1..=k`).
//!
//! A search scores the same prefixes again and again (every beam re-scores its path; siblings
//! share their parents' steps); a PRM's step score depends only on that prefix, so a hit costs
//! nothing and only new steps go to the model. Bounded: past its capacity the oldest entries
//! are forgotten (insertion order), so memory stays flat over a long-running server.
//!
//! It holds scores, not KV, so it is not one of the engine's retained sequences: the KV a new
//! step is computed on is the engine's own, a parked scored sequence in the scheduler's one
//! retained store (`scheduler/retain.rs`), released by that store's rules.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

/// Scores by prefix fingerprint, at most `capacity` of them.
#[derive(Debug)]
pub(crate) struct StepCache {
    inner: Mutex<Inner>,
    capacity: usize,
}

#[derive(Debug, Default)]
struct Inner {
    scores: HashMap<u64, f32>,
    order: VecDeque<u64>,
}

impl StepCache {
    /// An empty cache holding at most `capacity` scores (0 disables it).
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            inner: Mutex::new(Inner::default()),
            capacity,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // Plain map updates: a panic elsewhere cannot leave them half-done.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The cached score of the prefix `key`.
    pub(crate) fn get(&self, key: u64) -> Option<f32> {
        self.lock().scores.get(&key).copied()
    }

    /// Remembers `score` for the prefix `key`.
    pub(crate) fn insert(&self, key: u64, score: f32) {
        if self.capacity == 0 {
            return;
        }
        let mut inner = self.lock();
        if inner.scores.insert(key, score).is_none() {
            inner.order.push_back(key);
        }
        while inner.order.len() > self.capacity {
            if let Some(old) = inner.order.pop_front() {
                inner.scores.remove(&old);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forgets_the_oldest_past_capacity() {
        let c = StepCache::new(2);
        c.insert(1, 0.1);
        c.insert(2, 0.2);
        c.insert(1, 0.15);
        c.insert(3, 0.3);
        assert_eq!(c.get(1), None);
        assert_eq!(c.get(2), Some(0.2));
        assert_eq!(c.get(3), Some(0.3));
        let off = StepCache::new(0);
        off.insert(1, 0.5);
        assert_eq!(off.get(1), None);
    }
}
