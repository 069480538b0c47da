//! The learned verifier's errors: every one that comes from a file names the file.

use std::path::PathBuf;

/// What can go wrong loading, training, evaluating or running the learned outcome verifier.
#[derive(Debug, thiserror::Error)]
pub enum LearnedVerifierError {
    /// A file cannot be read.
    #[error("cannot read {path}: {reason}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        reason: String,
    },
    /// A file exists but is not what the verifier expects.
    #[error("{path} is not a valid {what}: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What it should have been (a model file, a candidate set…).
        what: &'static str,
        /// What is wrong with it (with the line number for JSONL).
        reason: String,
    },
    /// A file cannot be written.
    #[error("cannot write {path}: {reason}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        reason: String,
    },
    /// Training data that must not be trained on (held-out groups) or cannot train a model.
    #[error("cannot train: {0}")]
    Training(String),
    /// The tensor library failed while fitting.
    #[error("fitting the model: {0}")]
    Fit(#[from] candle_core::Error),
    /// The sentence encoder failed.
    #[error(transparent)]
    Embedder(#[from] crate::router::RouterError),
    /// The generator failed while reading hidden states (the hidden-state head).
    #[error("reading hidden states: {0}")]
    Engine(#[from] ponder_engine::EngineError),
    /// A fitted file was fitted with another model than the one it would be applied to.
    #[error("{path} was fitted with {fitted}, not {served}: refit it on this model's outputs")]
    ForeignModel {
        /// The file.
        path: PathBuf,
        /// The model it was fitted with.
        fitted: String,
        /// The model it would be applied to.
        served: String,
    },
}

/// The learned verifier's result type.
pub type Result<T> = std::result::Result<T, LearnedVerifierError>;

impl LearnedVerifierError {
    pub(crate) fn read(path: impl Into<PathBuf>, e: impl std::fmt::Display) -> Self {
        Self::Read {
            path: path.into(),
            reason: e.to_string(),
        }
    }

    pub(crate) fn write(path: impl Into<PathBuf>, e: impl std::fmt::Display) -> Self {
        Self::Write {
            path: path.into(),
            reason: e.to_string(),
        }
    }
}
