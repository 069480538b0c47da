//! Ponder's verifiers: the `Verifier` trait, answer extraction and math equivalence, confidence
//! scores and vote aggregation.
//!
//! Pure logic: no model runtime, no HTTP. Model-based verifiers (PRMs) reach the engine through
//! a port the service implements.
//!
//! - [`calc_check`]: [`CalcCheck`], the exact check of the arithmetic a solution writes.
//! - [`canonical`]: [`canonical_answer`] (one number per numeric answer, units dropped) and
//!   [`has_clear_answer`].
//! - [`verifier`]: the [`Verifier`] trait, [`FnVerifier`], step-score [`Aggregation`].
//! - [`math_verifier`]: [`MathAnswerVerifier`], the rule-based grader as a verifier.
//! - [`extract`]: [`extract_answer`] from a model's output.
//! - [`normalize`] and [`latex`]: [`normalize_answer`] and the LaTeX expression parser.
//! - [`equivalence`]: [`equivalent`], [`grade`], and the prepared [`Answer`].
//! - [`vote`]: [`majority_vote`], [`weighted_vote`].
//! - [`prm`]: the PRM protocol — step segmentation, [`PrmFormat`], Yes/No and two-class
//!   probabilities, [`AnswerState`] (when a solution scores as "no answer").
//! - [`confidence`]: DeepConf token/group/tail confidence, entropy, self-certainty.
//! - [`reasoning`]: [`ReasoningParser`], where a thinking model's `<think>` block ends and its
//!   answer begins, whole or streamed.
//! - [`metrics`]: how well scores separate right from wrong (AUROC), bootstrap CIs.

pub mod calc_check;
pub mod canonical;
pub mod confidence;
pub mod equivalence;
mod error;
pub mod extract;
pub mod latex;
pub mod math_verifier;
pub mod metrics;
pub mod normalize;
pub mod prm;
pub mod reasoning;
pub mod verifier;
pub mod vote;

pub use calc_check::CalcCheck;
pub use canonical::{canonical_answer, has_clear_answer};
pub use confidence::{
    bottom_percent_confidence, entropy, group_confidences, lowest_group_confidence, mean_logprob,
    self_certainty, step_confidences, tail_confidence, token_confidence, token_self_certainty,
    TraceConfidence,
};
pub use equivalence::{equivalent, grade, Answer, Grade};
pub use error::{Result, VerifierError};
pub use extract::extract_answer;
pub use math_verifier::MathAnswerVerifier;
pub use normalize::normalize_answer;
pub use prm::{split_steps, AnswerState, PrmFormat};
pub use reasoning::{ReasoningChoice, ReasoningParser, ReasoningParserError, ReasoningStream};
pub use verifier::{Aggregation, FnVerifier, Scores, Solution, Verifier, NO_ANSWER_SCORE};
pub use vote::{majority_vote, weighted_vote, VoteResult};
