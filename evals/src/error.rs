//! The harness's error type.

/// Errors from the evaluation harness.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// Reading input or writing output failed.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    /// A dataset file cannot be read.
    #[error("dataset {path}: {reason}")]
    Dataset {
        /// The file.
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// A results directory is unusable.
    #[error("results {path}: {reason}")]
    Results {
        /// The file or directory.
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// A search failed in a way that is not a graded outcome.
    #[error("backend: {0}")]
    Backend(String),
    /// A JSONL line is not valid JSON.
    #[error("line {line}: invalid JSON: {source}")]
    Json {
        /// 1-based line number.
        line: usize,
        /// The parser's complaint.
        source: serde_json::Error,
    },
    /// A JSONL line is valid JSON but not the expected record.
    #[error("line {line}: {reason}")]
    Record {
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
}

/// The harness's result type.
pub type Result<T, E = EvalError> = std::result::Result<T, E>;
