//! The router's errors: every one that comes from a file names the file.

use std::path::PathBuf;

/// What can go wrong loading, training or running the router.
#[derive(Debug, thiserror::Error)]
pub enum RouterError {
    /// A file the router needs does not exist or cannot be read.
    #[error("cannot read {path}: {reason}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        reason: String,
    },
    /// A file exists but is not what the router expects.
    #[error("{path} is not a valid {what}: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What it should have been (a router file, a labelled query set…).
        what: &'static str,
        /// What is wrong with it.
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
    /// The sentence encoder failed (weights, tokenizer or forward pass).
    #[error("embedder ({dir}): {reason}")]
    Embedder {
        /// The model directory.
        dir: PathBuf,
        /// What failed.
        reason: String,
    },
    /// The query to route is empty or whitespace.
    #[error("invalid query: must not be empty")]
    EmptyQuery,
    /// Training data cannot train a classifier.
    #[error("cannot train: {0}")]
    Training(String),
}

/// The router's result type.
pub type Result<T> = std::result::Result<T, RouterError>;

impl RouterError {
    pub(crate) fn read(path: impl Into<PathBuf>, e: impl std::fmt::Display) -> Self {
        Self::Read {
            path: path.into(),
            reason: e.to_string(),
        }
    }

    pub(crate) fn corrupt(
        path: impl Into<PathBuf>,
        what: &'static str,
        e: impl std::fmt::Display,
    ) -> Self {
        Self::Corrupt {
            path: path.into(),
            what,
            reason: e.to_string(),
        }
    }
}
