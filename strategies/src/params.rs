//! Parameters shared by several strategies: sampling settings, step settings, what to select
//! by, and the validation helpers every strategy's `validate` uses.

use ponder_verifiers::Aggregation;
use serde::{Deserialize, Serialize};

use crate::context::StepSpec;
use crate::error::{Result, StrategyError};
use crate::generator::Sampling;

/// Sampling settings of a strategy's generations.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Decoding {
    /// Softmax temperature (0 = greedy).
    pub temperature: f64,
    /// Nucleus mass.
    pub top_p: f64,
    /// Top-k cut (0 = off).
    pub top_k: usize,
    /// Min-p cut (0 = off).
    pub min_p: f64,
    /// Alternatives per token for confidence scores.
    pub top_logprobs: usize,
}

impl Default for Decoding {
    fn default() -> Self {
        Self {
            temperature: 0.8,
            top_p: 0.95,
            top_k: 0,
            min_p: 0.0,
            top_logprobs: 5,
        }
    }
}

impl Decoding {
    /// The generator's sampling settings (the seed is set per branch by the context).
    pub fn sampling(&self) -> Sampling {
        Sampling {
            temperature: self.temperature,
            top_p: self.top_p,
            top_k: self.top_k,
            min_p: self.min_p,
            seed: 0,
            top_logprobs: self.top_logprobs,
        }
    }

    /// Checks ranges.
    pub fn validate(&self, strategy: &str) -> Result<()> {
        // [0, 2], as OpenAI's API and vLLM (0.32.0 refuses more) take it.
        if !(self.temperature.is_finite() && self.temperature >= 0.0 && self.temperature <= 2.0) {
            return Err(StrategyError::invalid(
                strategy,
                "temperature",
                format!("must be in [0, 2], got {}", self.temperature),
            ));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(StrategyError::invalid(
                strategy,
                "top_p",
                format!("must be in (0, 1], got {}", self.top_p),
            ));
        }
        if !(0.0..1.0).contains(&self.min_p) {
            return Err(StrategyError::invalid(
                strategy,
                "min_p",
                format!("must be in [0, 1), got {}", self.min_p),
            ));
        }
        if self.top_logprobs > 20 {
            return Err(StrategyError::invalid(
                strategy,
                "top_logprobs",
                format!("must be at most 20, got {}", self.top_logprobs),
            ));
        }
        Ok(())
    }

    /// A whole-solution spec: no stop strings, `max_tokens` per solution.
    pub fn whole(&self, max_tokens: usize) -> StepSpec {
        StepSpec {
            max_tokens,
            stop: Vec::new(),
            sampling: self.sampling(),
        }
    }
}

/// Step settings of step-level searches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Steps {
    /// Text that ends a step.
    pub delimiter: String,
    /// Most tokens per step.
    pub max_step_tokens: usize,
    /// Most steps per solution.
    pub max_steps: usize,
}

impl Default for Steps {
    fn default() -> Self {
        Self {
            delimiter: "\n\n".into(),
            max_step_tokens: 192,
            max_steps: 10,
        }
    }
}

impl Steps {
    /// Checks ranges.
    pub fn validate(&self, strategy: &str) -> Result<()> {
        if self.delimiter.is_empty() {
            return Err(StrategyError::invalid(
                strategy,
                "steps.delimiter",
                "must not be empty (e.g. \"\\n\\n\")",
            ));
        }
        positive(strategy, "steps.max_step_tokens", self.max_step_tokens)?;
        positive(strategy, "steps.max_steps", self.max_steps)
    }

    /// A one-step spec with `decoding`.
    pub fn spec(&self, decoding: &Decoding) -> StepSpec {
        StepSpec {
            max_tokens: self.max_step_tokens,
            stop: vec![self.delimiter.clone()],
            sampling: decoding.sampling(),
        }
    }
}

/// What best-of-N style strategies rank solutions by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScoreBy {
    /// PRM score of the last step.
    PrmLast,
    /// Lowest PRM step score.
    PrmMin,
    /// Product of PRM step scores.
    PrmProd,
    /// The verifier's overall (outcome) score.
    Orm,
    /// The model's own confidence (`exp` of the mean token logprob); needs no verifier.
    Confidence,
}

impl ScoreBy {
    /// The step aggregation this corresponds to (`None`: overall score or confidence).
    pub fn aggregation(self) -> Option<Aggregation> {
        match self {
            Self::PrmLast => Some(Aggregation::Last),
            Self::PrmMin => Some(Aggregation::Min),
            Self::PrmProd => Some(Aggregation::Product),
            Self::Orm | Self::Confidence => None,
        }
    }
}

/// Fails unless `value > 0`.
pub fn positive(strategy: &str, field: &str, value: usize) -> Result<()> {
    if value == 0 {
        return Err(StrategyError::invalid(
            strategy,
            field,
            "must be at least 1",
        ));
    }
    Ok(())
}

/// Fails unless `lo <= value <= hi`.
pub fn in_range(strategy: &str, field: &str, value: f64, lo: f64, hi: f64) -> Result<()> {
    if !(value.is_finite() && value >= lo && value <= hi) {
        return Err(StrategyError::invalid(
            strategy,
            field,
            format!("must be in [{lo}, {hi}], got {value}"),
        ));
    }
    Ok(())
}
