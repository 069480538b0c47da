//! The strategy engine's errors. Three of them are *interruptions* rather than failures
//! (budget spent, deadline passed, cancelled): the driver turns those into an [`Outcome`] with
//! the best answer so far; every other error is returned to the caller.
//!
//! [`Outcome`]: crate::Outcome

use thiserror::Error;

/// Result alias for this crate.
pub type Result<T, E = StrategyError> = std::result::Result<T, E>;

/// What can stop a strategy.
#[derive(Debug, Error)]
pub enum StrategyError {
    /// The budget meter refused a call: spending it would pass the hard cap.
    #[error("budget exhausted: {spent} of {budget} tokens spent, the next call needs {needed}")]
    BudgetExhausted {
        /// Tokens the request may spend.
        budget: u64,
        /// Tokens spent so far.
        spent: u64,
        /// Tokens the refused call would have needed at least.
        needed: u64,
    },
    /// The budget ran out before any candidate answer existed.
    #[error("budget_tokens {budget} is too small to produce any answer (spent {spent}); the prompt alone needs {prompt_tokens} tokens")]
    BudgetTooSmall {
        /// Tokens the request may spend.
        budget: u64,
        /// Tokens spent before giving up.
        spent: u64,
        /// Tokens of the rendered prompt.
        prompt_tokens: u64,
    },
    /// The request's deadline passed.
    #[error("deadline of {deadline_ms} ms passed")]
    DeadlineExceeded {
        /// The deadline the request set.
        deadline_ms: u64,
    },
    /// The caller cancelled the search.
    #[error("cancelled")]
    Cancelled,
    /// No strategy is registered under this name.
    #[error("unknown strategy {name:?}; valid strategies: {}", valid.join(", "))]
    UnknownStrategy {
        /// The name asked for.
        name: String,
        /// Every registered name.
        valid: Vec<String>,
    },
    /// A strategy parameter is out of range or malformed.
    #[error("invalid parameter {field} for strategy {strategy}: {reason}")]
    InvalidParameter {
        /// The strategy being configured.
        strategy: String,
        /// The offending parameter.
        field: String,
        /// What is wrong and what is allowed.
        reason: String,
    },
    /// The request needs more than the server can ever hold at once (the KV pool for its
    /// fan-out): retrying it unchanged cannot succeed, a smaller one can.
    #[error("request exceeds the server's capacity: {0}")]
    Capacity(String),
    /// The generator (the engine behind the port) failed.
    #[error("generator: {0}")]
    Generator(String),
    /// A verifier failed.
    #[error("verifier: {0}")]
    Verifier(#[from] ponder_verifiers::VerifierError),
}

impl StrategyError {
    /// Whether this error interrupts a search (budget, deadline, cancel) rather than failing it.
    pub fn is_interruption(&self) -> bool {
        matches!(
            self,
            Self::BudgetExhausted { .. } | Self::DeadlineExceeded { .. } | Self::Cancelled
        )
    }

    /// Shorthand for [`StrategyError::InvalidParameter`].
    pub fn invalid(strategy: &str, field: &str, reason: impl Into<String>) -> Self {
        Self::InvalidParameter {
            strategy: strategy.into(),
            field: field.into(),
            reason: reason.into(),
        }
    }
}
