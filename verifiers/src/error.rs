//! The crate's error type.
//!
//! A verifier fails only when the machinery behind it fails (a reward model's port is down, a
//! request was cancelled). Bad *solutions* — empty, no answer, an answer that does not parse — are
//! never errors: they score as "no answer" so that one odd branch cannot kill a search.

/// Errors a verifier can return.
#[derive(Debug, thiserror::Error)]
pub enum VerifierError {
    /// The backend a verifier relies on (a model port, a remote judge) failed.
    #[error("verifier `{verifier}`: backend failed: {message}")]
    Backend {
        /// The verifier's name.
        verifier: String,
        /// What the backend said.
        message: String,
    },
    /// The backend a verifier relies on could not be reached at all (every attempt failed):
    /// an outage, which the server reports as a bad gateway, not as its own failure.
    #[error("verifier `{verifier}`: backend unavailable: {message}")]
    Unavailable {
        /// The verifier's name.
        verifier: String,
        /// What the last attempt met.
        message: String,
    },
    /// The caller asked for something the verifier cannot do (a configuration mistake, not a
    /// bad solution).
    #[error("verifier `{verifier}`: invalid request: {reason}")]
    InvalidRequest {
        /// The verifier's name.
        verifier: String,
        /// Why the request is invalid.
        reason: String,
    },
    /// The work was cancelled before it finished.
    #[error("verifier `{verifier}`: cancelled")]
    Cancelled {
        /// The verifier's name.
        verifier: String,
    },
}

/// The crate's result type.
pub type Result<T, E = VerifierError> = std::result::Result<T, E>;
