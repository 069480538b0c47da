//! What the learned outcome verifier sees of a candidate: a fixed, named feature vector
//! computed from exactly what a verifier is given at run time (the question, the candidate's
//! text, whether it finished, its confidence summary, and the other candidates of the same
//! batch) — so training (on harness runs) and serving compute the same numbers.
//!
//! Features, by family:
//! - **agreement** with the batch: the share of candidates whose extracted answer is
//!   equivalent to this one's (majority voting's signal, per candidate);
//! - **answer form**: an answer is extracted, marked clearly (`\boxed{}`, "the answer is"),
//!   states one number, repeats a number of the question;
//! - **calculation check** ([`ponder_verifiers::calc_check`]): equalities written, false
//!   equalities, the check's score (with the question: grounding and coverage included), the
//!   answer equal to the last quantity computed, numbers used that the question does not
//!   ground, the share of the question's numbers never used, results nothing uses;
//! - **length and finish**: characters (log), whether the model ended it;
//! - **confidence** (DeepConf's trace summaries, 0 with an indicator when unknown);
//! - **embedding** (all-MiniLM-L6-v2, optional): the cosine of question and solution, and with
//!   [`FeatureSet::Embedding`] the solution's 384 embedding dimensions as well.
//!
//! This module must not know about models or files: it maps text to numbers.

use std::sync::Arc;

use ponder_verifiers::calc_check::{
    check_text, grounding, stated_number, unused_results, CalcCheck,
};
use ponder_verifiers::TraceConfidence;
use ponder_verifiers::{canonical_answer, equivalent, extract_answer, has_clear_answer};
use serde::{Deserialize, Serialize};

use super::error::Result;
use crate::router::Embedder;

/// Which features a model uses beyond the scalar ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FeatureSet {
    /// The scalar features only (no encoder needed at run time).
    #[default]
    Scalar,
    /// The scalar features and the question–solution cosine.
    Cosine,
    /// The scalar features, the cosine and the solution's embedding dimensions.
    Embedding,
}

/// The scalar features, in vector order.
pub const SCALAR_FEATURES: [&str; 19] = [
    "agreement",
    "has_answer",
    "clear_answer",
    "numeric_answer",
    "answer_in_question",
    "equalities_log",
    "false_equalities_log",
    "calc_score",
    "answer_is_last_value",
    "ungrounded_log",
    "uncovered_share",
    "unused_results_log",
    "chars_log",
    "complete",
    "has_confidence",
    "confidence_mean",
    "confidence_lowest_group",
    "confidence_bottom_10",
    "confidence_tail",
];

/// One candidate as the verifier sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CandidateView<'a> {
    /// The solution text.
    pub text: &'a str,
    /// Whether the model ended it.
    pub complete: bool,
    /// Its confidence summary, if known.
    pub confidence: Option<TraceConfidence>,
}

/// The numbers written in a text (digits with `,` thousands separators and a decimal point).
fn numbers_in(text: &str) -> Vec<f64> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let flush = |cur: &mut String, out: &mut Vec<f64>| {
        let t = cur.trim_end_matches(['.', ',']).replace(',', "");
        if let Ok(v) = t.parse::<f64>() {
            out.push(v);
        }
        cur.clear();
    };
    for c in text.chars() {
        if c.is_ascii_digit() || (!cur.is_empty() && (c == '.' || c == ',')) {
            cur.push(c);
        } else if !cur.is_empty() {
            flush(&mut cur, &mut out);
        }
    }
    if !cur.is_empty() {
        flush(&mut cur, &mut out);
    }
    out
}

fn flag(b: bool) -> f32 {
    if b {
        1.0
    } else {
        0.0
    }
}

fn log_count(n: usize) -> f32 {
    (n as f32).ln_1p()
}

/// A solution's text with every line trimmed and blank lines dropped: what a candidate's
/// whole text and the same solution cut into steps and joined again (as [`Solution::text`]
/// does) have in common, so features computed from either are the same.
///
/// [`Solution::text`]: ponder_verifiers::Solution::text
pub fn normalized_text(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The scalar features of every candidate of one batch (same question), in
/// [`SCALAR_FEATURES`] order.
pub fn scalar_features(question: &str, group: &[CandidateView<'_>]) -> Vec<Vec<f32>> {
    let texts: Vec<String> = group.iter().map(|c| normalized_text(c.text)).collect();
    let answers: Vec<Option<String>> = texts
        .iter()
        .map(|t| extract_answer(t).map(|a| canonical_answer(&a)))
        .collect();
    let question_numbers = numbers_in(question);
    let calc = CalcCheck::default();
    group
        .iter()
        .zip(&texts)
        .zip(&answers)
        .map(|((c, text), answer)| {
            let agreement = answer.as_deref().map_or(0.0, |a| {
                let same = answers
                    .iter()
                    .flatten()
                    .filter(|b| equivalent(a, b))
                    .count();
                same as f32 / group.len().max(1) as f32
            });
            let stated = answer.as_deref().and_then(stated_number);
            let stated_f64 = answer
                .as_deref()
                .and_then(|a| numbers_in(a).into_iter().next_back());
            let report = check_text(text);
            let last_value_match = match (&stated, &report.last_value) {
                (Some(s), Some(l)) => s == l,
                _ => false,
            };
            let steps = [text.clone()];
            let ground = grounding(question, std::slice::from_ref(&report));
            let uncovered_share = if ground.question_numbers == 0 {
                0.0
            } else {
                ground.uncovered as f32 / ground.question_numbers as f32
            };
            let conf = c.confidence;
            vec![
                agreement,
                flag(answer.is_some()),
                flag(has_clear_answer(text)),
                flag(stated.is_some()),
                flag(stated_f64.is_some_and(|v| question_numbers.contains(&v))),
                log_count(report.equalities.len()),
                log_count(report.false_count()),
                calc.score_solution(question, &steps, true).overall,
                flag(last_value_match),
                log_count(ground.ungrounded),
                uncovered_share,
                log_count(unused_results(
                    std::slice::from_ref(&report),
                    stated.as_ref(),
                )),
                log_count(text.chars().count()),
                flag(c.complete),
                flag(conf.is_some()),
                conf.map_or(0.0, |t| t.mean),
                conf.map_or(0.0, |t| t.lowest_group),
                conf.map_or(0.0, |t| t.bottom_10),
                conf.map_or(0.0, |t| t.tail),
            ]
        })
        .collect()
}

/// Computes a model's feature vectors: the scalar features, and the embedding features its
/// [`FeatureSet`] asks for (with the encoder it was trained with).
#[derive(Clone)]
pub struct Featurizer {
    set: FeatureSet,
    embedder: Option<Arc<Embedder>>,
}

impl std::fmt::Debug for Featurizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Featurizer")
            .field("set", &self.set)
            .field("embedder", &self.embedder.is_some())
            .finish()
    }
}

impl Featurizer {
    /// A featurizer for `set`; the embedding sets need `embedder` (without one they are the
    /// scalar set).
    pub fn new(set: FeatureSet, embedder: Option<Arc<Embedder>>) -> Self {
        let set = if embedder.is_none() {
            FeatureSet::Scalar
        } else {
            set
        };
        Self { set, embedder }
    }

    /// The feature set it computes.
    pub fn set(&self) -> FeatureSet {
        self.set
    }

    /// The names of the vector's entries, in order.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = SCALAR_FEATURES.iter().map(|s| s.to_string()).collect();
        if self.set != FeatureSet::Scalar {
            names.push("question_cosine".into());
        }
        if self.set == FeatureSet::Embedding {
            let dim = self.embedder.as_ref().map_or(0, |e| e.dim());
            names.extend((0..dim).map(|i| format!("embedding_{i}")));
        }
        names
    }

    /// The feature vectors of one batch of candidates to the same question.
    pub fn features(&self, question: &str, group: &[CandidateView<'_>]) -> Result<Vec<Vec<f32>>> {
        let mut rows = scalar_features(question, group);
        let Some(embedder) = self
            .embedder
            .as_ref()
            .filter(|_| self.set != FeatureSet::Scalar)
        else {
            return Ok(rows);
        };
        let normalized: Vec<String> = group.iter().map(|c| normalized_text(c.text)).collect();
        let mut texts: Vec<&str> = vec![question];
        texts.extend(normalized.iter().map(String::as_str));
        let mut embedded = embedder.embed(&texts)?.into_iter();
        let Some(q) = embedded.next() else {
            return Ok(rows);
        };
        for (row, e) in rows.iter_mut().zip(embedded) {
            row.push(crate::router::cosine(&q.vector, &e.vector));
            if self.set == FeatureSet::Embedding {
                row.extend_from_slice(&e.vector);
            }
        }
        Ok(rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(text: &str) -> CandidateView<'_> {
        CandidateView {
            text,
            complete: true,
            confidence: None,
        }
    }

    fn feature(row: &[f32], name: &str) -> f32 {
        let i = SCALAR_FEATURES
            .iter()
            .position(|n| *n == name)
            .unwrap_or(usize::MAX);
        row.get(i).copied().unwrap_or(f32::NAN)
    }

    #[test]
    fn agreement_is_the_share_of_the_batch_with_an_equivalent_answer() {
        let texts = [
            "5 + 7 = 12. The answer is 12.",
            "So he has 12 apples. The answer is \\boxed{12}",
            "The answer is 13.",
            "I am not sure.",
        ];
        let group: Vec<_> = texts.iter().map(|t| view(t)).collect();
        let rows = scalar_features("Tom has 5 apples and buys 7. How many?", &group);
        assert_eq!(rows.len(), 4);
        assert!(rows.iter().all(|r| r.len() == SCALAR_FEATURES.len()));
        assert_eq!(feature(&rows[0], "agreement"), 0.5);
        assert_eq!(feature(&rows[1], "agreement"), 0.5);
        assert_eq!(feature(&rows[2], "agreement"), 0.25);
        assert_eq!(feature(&rows[3], "has_answer"), 0.0);
        assert_eq!(feature(&rows[3], "agreement"), 0.0);
    }

    #[test]
    fn calculation_features_see_false_equalities_and_the_last_value() {
        let right = view("4 × 6 = 24, and 24 - 5 = 19. The answer is 19.");
        let slip = view("4 × 6 = 26, and 26 - 5 = 21. The answer is 5.");
        let rows = scalar_features("He buys 4 boxes of 6 eggs and uses 5.", &[right, slip]);
        assert_eq!(feature(&rows[0], "false_equalities_log"), 0.0);
        assert!(feature(&rows[1], "false_equalities_log") > 0.0);
        assert_eq!(feature(&rows[0], "calc_score"), 1.0);
        assert!(feature(&rows[1], "calc_score") < 1.0);
        assert_eq!(feature(&rows[0], "answer_is_last_value"), 1.0);
        assert_eq!(feature(&rows[1], "answer_is_last_value"), 0.0);
        assert_eq!(feature(&rows[0], "answer_in_question"), 0.0);
        assert_eq!(
            feature(&rows[1], "answer_in_question"),
            1.0,
            "5 is in the question"
        );
    }

    #[test]
    fn confidence_features_carry_the_summary_or_an_indicator() {
        let summary = TraceConfidence::summary(&[2.0, 4.0]);
        let with = CandidateView {
            confidence: summary,
            ..view("The answer is 3.")
        };
        let rows = scalar_features("q", &[with, view("The answer is 3.")]);
        assert_eq!(feature(&rows[0], "has_confidence"), 1.0);
        assert_eq!(feature(&rows[0], "confidence_mean"), 3.0);
        assert_eq!(feature(&rows[1], "has_confidence"), 0.0);
        assert_eq!(feature(&rows[1], "confidence_mean"), 0.0);
    }

    #[test]
    fn a_text_and_its_steps_joined_again_give_the_same_features() {
        let whole = "Step one: 2 + 2 = 4.\n\n  Step two: 4 × 3 = 12.\n\nThe answer is 12.";
        let steps = ponder_verifiers::split_steps(whole, "\n\n");
        let joined = steps.join("\n");
        assert_ne!(whole, joined);
        assert_eq!(
            scalar_features("q", &[view(whole)]),
            scalar_features("q", &[view(&joined)])
        );
    }

    #[test]
    fn numbers_are_read_with_separators_and_decimals() {
        assert_eq!(numbers_in("pay $1,200.50 for 3 items."), vec![1200.5, 3.0]);
        assert!(numbers_in("no digits").is_empty());
    }

    #[test]
    fn without_an_encoder_the_featurizer_is_scalar() {
        let f = Featurizer::new(FeatureSet::Embedding, None);
        assert_eq!(f.set(), FeatureSet::Scalar);
        assert_eq!(f.names().len(), SCALAR_FEATURES.len());
    }
}
