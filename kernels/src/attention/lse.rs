//! The softmax state of one query row and head over a set of keys, and its exact merge: the
//! algebra that flash-decoding's splits, cascade attention's prefix/suffix and the CUDA
//! kernels' partials all rest on (Milakov & Gimelshein 2018, "Online normalizer calculation
//! for softmax"; FlashInfer's "attention states").
//!
//! A state over keys `K` with scores `s_t` and values `v_t` is `(m, l, acc)`: `m = max s_t`,
//! `l = sum e^(s_t - m)`, `acc = sum e^(s_t - m) v_t`. Its output is `acc / l` and its
//! log-sum-exp `m + ln l`. Merging the states of two disjoint key sets gives the state of their
//! union (up to rounding), in any grouping: `state(A) ⊕ state(B) = state(A ∪ B)`.
//!
//! Invariant: the empty state `(-inf, 0, 0)` is an exact identity of `merge` (no bit changes,
//! no `-inf - -inf` NaN), as in the CUDA twin (`cuda/common.cuh`, `merge_weights`). NaN scores
//! or values propagate to the output; they are never silently dropped.

use super::AttentionError;

/// The partial softmax of one query row and head over some keys (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct SoftmaxState {
    max: f32,
    sum: f32,
    acc: Vec<f32>,
}

impl SoftmaxState {
    /// The state over no keys: the identity of [`SoftmaxState::merge`].
    pub fn empty(head_dim: usize) -> Self {
        SoftmaxState {
            max: f32::NEG_INFINITY,
            sum: 0.0,
            acc: vec![0.0; head_dim],
        }
    }

    /// A state from its parts, as a kernel writes them (`acc` unnormalised).
    pub fn from_parts(max: f32, sum: f32, acc: Vec<f32>) -> Self {
        SoftmaxState { max, sum, acc }
    }

    /// The largest score seen (`-inf` when empty).
    pub fn max(&self) -> f32 {
        self.max
    }

    /// `sum e^(s - max)` over the keys seen.
    pub fn sum(&self) -> f32 {
        self.sum
    }

    /// `sum e^(s - max) v` over the keys seen (`head_dim` long).
    pub fn acc(&self) -> &[f32] {
        &self.acc
    }

    /// Whether no key has been folded in.
    pub fn is_empty(&self) -> bool {
        self.max == f32::NEG_INFINITY && self.sum == 0.0
    }

    /// Folds in one key with score `score` and value `value` (`head_dim` long).
    pub fn push(&mut self, score: f32, value: &[f32]) -> Result<(), AttentionError> {
        self.check(value.len())?;
        if score == f32::NEG_INFINITY {
            // e^-inf = 0: the key carries no weight (and `-inf - -inf` must not make a NaN).
            return Ok(());
        }
        let m_new = self.max.max(score);
        let a = self.weight(m_new);
        let p = (score - m_new).exp();
        self.max = m_new;
        self.sum = self.sum * a + p;
        for (acc, &v) in self.acc.iter_mut().zip(value) {
            *acc = *acc * a + p * v;
        }
        Ok(())
    }

    /// Merges `other` (the state of a disjoint set of keys) into `self`:
    /// `M = max(m1, m2)`, `a = e^(m1 - M)`, `b = e^(m2 - M)` (0 for an empty side),
    /// `l = l1 a + l2 b`, `acc = acc1 a + acc2 b`.
    pub fn merge(&mut self, other: &SoftmaxState) -> Result<(), AttentionError> {
        self.check(other.acc.len())?;
        let m_new = self.max.max(other.max);
        let (a, b) = (self.weight(m_new), other.weight(m_new));
        self.max = m_new;
        self.sum = self.sum * a + other.sum * b;
        for (acc, &o) in self.acc.iter_mut().zip(&other.acc) {
            *acc = *acc * a + o * b;
        }
        Ok(())
    }

    /// `ln sum e^s` over the keys seen: `max + ln(sum)`; `-inf` when empty.
    pub fn lse(&self) -> f32 {
        if self.is_empty() {
            f32::NEG_INFINITY
        } else {
            self.max + self.sum.ln()
        }
    }

    /// The attention output `acc / sum` into `out` (`head_dim` long). An empty state has no
    /// output: it writes NaN (0 / 0), as the kernels would.
    pub fn write_output(&self, out: &mut [f32]) -> Result<(), AttentionError> {
        self.check(out.len())?;
        for (o, &a) in out.iter_mut().zip(&self.acc) {
            *o = a / self.sum;
        }
        Ok(())
    }

    /// `e^(max - m_new)`, or 0 when this state is empty.
    fn weight(&self, m_new: f32) -> f32 {
        if self.max == f32::NEG_INFINITY {
            0.0
        } else {
            (self.max - m_new).exp()
        }
    }

    fn check(&self, got: usize) -> Result<(), AttentionError> {
        if got == self.acc.len() {
            Ok(())
        } else {
            Err(AttentionError::StateHeadDim {
                expected: self.acc.len(),
                got,
            })
        }
    }
}
