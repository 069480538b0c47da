//! What turns the engine's reading at a step tag into P(step is good).
//!
//! Two heads, after the two families of published PRMs:
//! - [`RewardHead`]: Qwen2.5-Math-PRM's `Qwen2ForProcessRewardModel` head, `score.0`
//!   (Linear hidden→hidden) → ReLU → `score.2` (Linear hidden→2) on the final-normed hidden
//!   state, P(good) = softmax(logits)[1];
//! - token logits (Math-Shepherd): the language-model logits of a "good" and a "bad" token
//!   (`+`, `-`) at the tag, P(good) = softmax([good, bad])[0].

use std::collections::HashMap;
use std::path::Path;

use candle_core::{Device, Module, Tensor};
use candle_nn::Linear;
use ponder_verifiers::prm::good_probability;

use ponder_engine::batching::ScoreOutput;
use ponder_engine::{EngineError, Result};

/// Tensor-name prefix of a reward model's score head.
pub(crate) const SCORE_HEAD_PREFIX: &str = "score.";

/// How a PRM turns its reading at a tag into a probability.
#[derive(Debug, Clone)]
pub enum PrmHead {
    /// A classification head on the hidden state (Qwen2.5-Math-PRM).
    Reward(RewardHead),
    /// The logits of two tokens (Math-Shepherd).
    TokenLogits {
        /// Token id whose logit says "good" (`+`).
        good: u32,
        /// Token id whose logit says "bad" (`-`).
        bad: u32,
    },
}

impl PrmHead {
    /// What the engine must read at each tag for this head.
    pub(crate) fn output(&self) -> ScoreOutput {
        match self {
            Self::Reward(_) => ScoreOutput::Hidden,
            Self::TokenLogits { good, bad } => ScoreOutput::TokenLogits(vec![*good, *bad]),
        }
    }

    /// P(good) for each reading (hidden states, or `[good, bad]` logits).
    pub(crate) fn probabilities(&self, readings: &[Vec<f32>]) -> Result<Vec<f32>> {
        match self {
            Self::Reward(head) => head.probabilities(readings),
            Self::TokenLogits { .. } => readings
                .iter()
                .map(|r| match r.as_slice() {
                    [good, bad] => Ok(good_probability(*good, *bad)),
                    other => Err(EngineError::SizeMismatch {
                        what: "logits at a step tag",
                        expected: 2,
                        got: other.len(),
                    }),
                })
                .collect(),
        }
    }
}

/// `score.0` → ReLU → `score.2`, read as a two-class softmax (class 1 = good).
#[derive(Debug, Clone)]
pub struct RewardHead {
    hidden: Linear,
    out: Linear,
    hidden_size: usize,
    device: Device,
}

impl RewardHead {
    /// The head from a checkpoint's extra tensors (`score.0.weight`, `score.0.bias`,
    /// `score.2.weight`, `score.2.bias`), checked against the decoder's `hidden_size`.
    pub fn from_tensors(
        tensors: &HashMap<String, Tensor>,
        path: &Path,
        hidden_size: usize,
    ) -> Result<Self> {
        let get = |name: &str, shape: &[usize]| -> Result<Tensor> {
            let t = tensors.get(name).ok_or_else(|| EngineError::MissingField {
                path: path.to_path_buf(),
                what: format!("reward head tensor {name}"),
            })?;
            if t.dims() != shape {
                return Err(EngineError::CorruptModel {
                    path: path.to_path_buf(),
                    reason: format!("{name} has shape {:?}, expected {shape:?}", t.dims()),
                });
            }
            Ok(t.clone())
        };
        let h = hidden_size;
        let device = get("score.0.weight", &[h, h])?.device().clone();
        Ok(Self {
            hidden: Linear::new(
                get("score.0.weight", &[h, h])?,
                Some(get("score.0.bias", &[h])?),
            ),
            out: Linear::new(
                get("score.2.weight", &[2, h])?,
                Some(get("score.2.bias", &[2])?),
            ),
            hidden_size,
            device,
        })
    }

    /// P(good) for each final-normed hidden state.
    pub fn probabilities(&self, hidden: &[Vec<f32>]) -> Result<Vec<f32>> {
        if hidden.is_empty() {
            return Ok(Vec::new());
        }
        if let Some(bad) = hidden.iter().find(|h| h.len() != self.hidden_size) {
            return Err(EngineError::SizeMismatch {
                what: "hidden-state floats for the reward head",
                expected: self.hidden_size,
                got: bad.len(),
            });
        }
        let flat: Vec<f32> = hidden.iter().flatten().copied().collect();
        let x = Tensor::from_vec(flat, (hidden.len(), self.hidden_size), &self.device)?;
        let logits: Vec<Vec<f32>> = self
            .out
            .forward(&self.hidden.forward(&x)?.relu()?)?
            .to_vec2()?;
        Ok(logits
            .iter()
            .map(|l| {
                if let [bad, good] = l.as_slice() {
                    good_probability(*good, *bad)
                } else {
                    0.0
                }
            })
            .collect())
    }
}
