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
    /// fan-out): retrying it unchanged cannot succeed, a smaller one can. The engine's own
    /// error (which resource, how much) is the source.
    #[error("request exceeds the server's capacity: {0}")]
    Capacity(Box<dyn std::error::Error + Send + Sync>),
    /// The generator (the engine or backend behind the port) failed; the variant says how.
    #[error("generator: {0}")]
    Generator(#[from] GeneratorError),
    /// A verifier failed.
    #[error("verifier: {0}")]
    Verifier(#[from] ponder_verifiers::VerifierError),
}

/// How the generator behind the [`Generator`](crate::Generator) port failed. Each variant is a
/// decision a caller makes (the HTTP API maps variant to status: [`Self::Unavailable`] is a
/// 502, [`Self::Refused`] the backend's 4xx, the caller's mistakes a 400, the rest a 500); the
/// text is for people and no caller reads it.
#[derive(Debug, Error)]
pub enum GeneratorError {
    /// No backend could serve the call: every attempt failed (unreachable, 5xx, throttled).
    /// The same request may succeed later.
    #[error("backend unavailable: {attempts} attempts failed; last: {last}")]
    Unavailable {
        /// Attempts made (the first plus the retries).
        attempts: usize,
        /// The last attempt's failure (backend URL and what happened).
        last: String,
    },
    /// A backend refused the request (a 4xx other than 429): another backend would refuse it
    /// too, so it is not retried. The HTTP API answers with the same status.
    #[error("backend {backend} refused the request (HTTP {status}): {body}")]
    Refused {
        /// The backend's base URL.
        backend: String,
        /// The HTTP status the backend sent (`400`).
        status: u16,
        /// The start of the backend's answer, any API key redacted.
        body: String,
    },
    /// A backend answered 2xx with a body that is not a completion.
    #[error("backend response without {missing}: {shown}")]
    MalformedResponse {
        /// The field that is missing (`choices[0].text`).
        missing: &'static str,
        /// The start of the response.
        shown: String,
    },
    /// The prompt cannot be opened (empty, or longer than the model's context).
    #[error("invalid prompt: {0}")]
    InvalidPrompt(String),
    /// A request field this generator cannot honour (a `logit_bias` token outside its
    /// vocabulary); the field is named.
    #[error("invalid {field}: {reason}")]
    InvalidRequest {
        /// The request field.
        field: &'static str,
        /// What is wrong, with the limit.
        reason: String,
    },
    /// A call this generator does not implement (it serves strategies only).
    #[error("this generator does not support {0}")]
    Unsupported(&'static str),
    /// A handle this generator never issued, or one already released (a caller bug).
    #[error("unknown sequence {0}")]
    UnknownSequence(u64),
    /// The engine behind the port stopped (its thread ended): nothing more will run.
    #[error("the executor stopped")]
    Stopped,
    /// The engine cancelled a sequence the generator was waiting on.
    #[error("the executor cancelled a sequence")]
    SequenceCancelled,
    /// The engine failed (tokenizing, templating, a forward pass); its typed error is the
    /// source.
    #[error(transparent)]
    Engine(Box<dyn std::error::Error + Send + Sync>),
    /// A component returned no result where one was owed (an extension per request, a score
    /// per candidate): a broken contract between components, reported instead of panicking.
    #[error("missing {what} (a broken contract between components)")]
    Missing {
        /// What was missing.
        what: &'static str,
    },
    /// A component returned a different number of results than it was asked for.
    #[error("{what}: {expected} asked, {got} returned")]
    CountMismatch {
        /// What was counted.
        what: &'static str,
        /// How many were asked for.
        expected: usize,
        /// How many came back.
        got: usize,
    },
    /// A helper the search relies on (the router, the judge model, the search's own task)
    /// failed; its error is the source.
    #[error("{helper} failed: {source}")]
    Helper {
        /// Which helper (`router`, `judge`, `search task`).
        helper: &'static str,
        /// Its error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
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
