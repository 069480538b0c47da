//! The sampler's error type: every variant names the row and the argument at fault.
//!
//! Invariant: `sample` (and its CUDA launcher) validates shapes and parameters before sampling
//! any row, and reports a NaN or `+inf` logit (or a row with no finite logit) as an error for
//! that row rather than drawing from a meaningless distribution. `-inf` logits are allowed:
//! they mask tokens.

/// Errors from validating a sampling call, or from a row's logits.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SamplingError {
    /// `vocab` is zero.
    #[error("`vocab` must be positive")]
    ZeroVocab,
    /// `vocab` is larger than the sampler's integer masses allow.
    #[error("`vocab` = {vocab} exceeds the sampler's limit of {max}")]
    VocabTooLarge {
        /// The vocabulary size supplied.
        vocab: usize,
        /// The largest supported.
        max: usize,
    },
    /// `logits` is not `rows x vocab`.
    #[error("`logits` has {got} elements; {rows} rows x vocab {vocab} need {expected}")]
    LogitsLen {
        /// The length supplied.
        got: usize,
        /// Rows requested.
        rows: usize,
        /// Vocabulary size.
        vocab: usize,
        /// Elements required.
        expected: usize,
    },
    /// A parameter is out of its range.
    #[error("`rows[{row}].config.{field}` = {value}: {reason}")]
    Param {
        /// The row.
        row: usize,
        /// `temperature`, `top_p`, `min_p` or `top_logprobs`.
        field: &'static str,
        /// The value supplied.
        value: f64,
        /// The range it must lie in.
        reason: &'static str,
    },
    /// A logit is NaN or `+inf`: the distribution is undefined.
    #[error("`logits` row {row}, token {index}: {value} is not a finite logit (or -inf)")]
    NonFiniteLogit {
        /// The row.
        row: usize,
        /// The first such token id.
        index: usize,
        /// The value found.
        value: f32,
    },
    /// Every logit of a row is `-inf`: nothing can be sampled.
    #[error("`logits` row {row} masks every token (all -inf)")]
    AllMasked {
        /// The row.
        row: usize,
    },
}
