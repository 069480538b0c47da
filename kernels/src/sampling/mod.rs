//! Fused sampling on the CPU, the reference for `cuda/sampling.cu`: for each row of logits,
//! temperature, top-k, top-p and min-p, a draw from a seeded Philox4x32-10 counter, and what
//! strategies need to judge the token (its log-probability, the top-n log-probabilities and the
//! entropy of the model's raw distribution), in one call.
//!
//! Determinism: a row's token is a pure function of its logits, its [`SamplingConfig`], its
//! `seed` and its `offset` (the Philox counter): not of the batch, the thread count or the
//! device. The CPU here and the CUDA kernel compute the same integers at every step (`encode`
//! and `fused` say how), so they pick the same token bit for bit; logprobs and entropy agree
//! within float tolerance.
//!
//! `target_distribution` is the straightforward f64 twin (sort, truncate, normalise) the fused
//! sampler is tested against, and `fused_distribution` the exact distribution it draws from.

mod encode;
mod error;
mod fused;
mod philox;
mod reference;

pub use encode::MAX_VOCAB;
pub use error::SamplingError;
pub use philox::{draw_u64, philox4x32_10};
pub use reference::{target_distribution, Distribution};

pub(crate) use encode::RowCode;

/// Most alternatives a caller may ask for per token (OpenAI's limit, as the engine's).
pub const MAX_TOP_LOGPROBS: usize = 20;

/// How to pick a row's token. The default samples the model's distribution unchanged.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SamplingConfig {
    /// 0 is greedy (the largest logit, lowest id on ties); else finite and > 0.
    pub temperature: f64,
    /// Keep the `k` highest-ranked tokens; 0 disables.
    pub top_k: usize,
    /// Keep the smallest rank-ordered set whose mass reaches `top_p`; in (0, 1], 1 disables.
    pub top_p: f64,
    /// Drop tokens less likely than `min_p` times the most likely; in [0, 1), 0 disables.
    pub min_p: f64,
    /// Alternatives to report (at most [`MAX_TOP_LOGPROBS`]).
    pub top_logprobs: usize,
}

impl Default for SamplingConfig {
    fn default() -> Self {
        SamplingConfig {
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            top_logprobs: 0,
        }
    }
}

/// One row of a sampling call: its configuration and its place in the random stream.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SampleRequest {
    /// Truncation and temperature.
    pub config: SamplingConfig,
    /// Philox key: the sequence's seed.
    pub seed: u64,
    /// Philox counter: which draw of the sequence this is (e.g. the token's position).
    pub offset: u64,
}

/// One sampled token and what the model thought of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The token id.
    pub token: u32,
    /// Its log-probability under the model's raw distribution.
    pub logprob: f32,
    /// The highest-ranked tokens and their raw log-probabilities, best first.
    pub top_logprobs: Vec<(u32, f32)>,
    /// Entropy of the raw distribution, in nats.
    pub entropy: f32,
}

/// Checks the shape of a call and encodes every row's parameters.
pub(crate) fn validate(
    logits_len: usize,
    vocab: usize,
    rows: &[SampleRequest],
) -> Result<Vec<RowCode>, SamplingError> {
    if vocab == 0 {
        return Err(SamplingError::ZeroVocab);
    }
    if vocab > MAX_VOCAB {
        return Err(SamplingError::VocabTooLarge {
            vocab,
            max: MAX_VOCAB,
        });
    }
    let expected = rows.len().saturating_mul(vocab);
    if logits_len != expected {
        return Err(SamplingError::LogitsLen {
            got: logits_len,
            rows: rows.len(),
            vocab,
            expected,
        });
    }
    rows.iter()
        .enumerate()
        .map(|(row, r)| RowCode::new(row, &r.config, r.seed, r.offset))
        .collect()
}

/// Samples every row of `logits` (`[rows.len(), vocab]`). Fails on the first invalid
/// parameter or row (a NaN or `+inf` logit, or all `-inf`), naming the row.
pub fn sample(
    logits: &[f32],
    vocab: usize,
    rows: &[SampleRequest],
) -> Result<Vec<Sample>, SamplingError> {
    let codes = validate(logits.len(), vocab, rows)?;
    codes
        .iter()
        .zip(rows)
        .enumerate()
        .map(|(row, (code, req))| {
            fused::sample_row(
                row,
                &logits[row * vocab..][..vocab],
                code,
                req.config.top_logprobs,
            )
        })
        .collect()
}

/// The exact distribution `sample` draws one row's token from (`logits` is that row): kept
/// fixed-point weight over their total, per token.
pub fn fused_distribution(
    logits: &[f32],
    config: &SamplingConfig,
) -> Result<Vec<f64>, SamplingError> {
    validate(
        logits.len(),
        logits.len(),
        &[SampleRequest {
            config: *config,
            seed: 0,
            offset: 0,
        }],
    )?;
    fused::row_distribution(0, logits, &RowCode::new(0, config, 0, 0)?)
}
