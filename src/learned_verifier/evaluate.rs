//! How good a verifier's scores are on labelled candidate sets: the AUROC of right vs wrong
//! candidates, and the accuracy of what each selection rule picks over the same candidates —
//! majority vote, the score-weighted vote, the top-scored candidate, and the oracle (some
//! candidate right) — each with a seeded 95% bootstrap interval, plus the paired interval of
//! (weighted − majority) per problem.
//!
//! Votes count the answers as the search recorded them (what `ponder-eval report` counts);
//! a problem whose candidates all lack an answer counts as wrong for every rule but the oracle.

use ponder_verifiers::metrics::{auroc, bootstrap_ci, mean};
use ponder_verifiers::{equivalent, majority_vote, weighted_vote};
use serde::{Deserialize, Serialize};

use super::data::CandidateGroup;

/// Bootstrap resamples behind every interval.
const RESAMPLES: usize = 2000;

/// A share with its 95% interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rate {
    /// Problems counted right.
    pub correct: usize,
    /// Problems.
    pub of: usize,
    /// `correct / of`.
    pub rate: f64,
    /// Percentile-bootstrap 95% interval.
    pub ci95: (f64, f64),
}

impl Rate {
    fn of(bits: &[f64], seed: u64) -> Self {
        Self {
            correct: bits.iter().filter(|b| **b > 0.5).count(),
            of: bits.len(),
            rate: mean(bits),
            ci95: bootstrap_ci(bits, 0.95, RESAMPLES, seed),
        }
    }
}

/// A paired difference of two rules over the same problems.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Difference {
    /// Mean difference (in accuracy points as a share: 0.08 = 8 points).
    pub mean: f64,
    /// Paired percentile-bootstrap 95% interval.
    pub ci95: (f64, f64),
}

/// A verifier's evaluation on a candidate set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    /// The candidate set (path as given).
    pub data: String,
    /// Problems.
    pub problems: usize,
    /// Candidates.
    pub candidates: usize,
    /// Candidates whose answer is right.
    pub positives: usize,
    /// AUROC of the scores, right vs wrong candidates (`None` without both kinds).
    pub auroc: Option<f64>,
    /// Majority vote over the recorded answers.
    pub majority: Rate,
    /// The answer with the largest summed score.
    pub weighted: Rate,
    /// The single top-scored candidate's answer.
    pub top1: Rate,
    /// Some candidate right (pass@N).
    pub oracle: Rate,
    /// Weighted vote minus majority vote, per problem.
    pub weighted_minus_majority: Difference,
    /// Weighted accuracy as a share of the oracle's (0 when the oracle is 0).
    pub weighted_share_of_oracle: f64,
}

impl Evaluation {
    /// The share of the gap between the majority vote and the oracle that the weighted vote
    /// closes, `(weighted − majority) / (oracle − majority)` (negative when it picks fewer
    /// right than the majority); `None` when the oracle is no better than the majority.
    pub fn gap_closed(&self) -> Option<f64> {
        self.gap_closed_by(self.weighted.rate)
    }

    /// The share of that gap a selection rule of accuracy `rate` closes (top-1, say).
    pub fn gap_closed_by(&self, rate: f64) -> Option<f64> {
        let gap = self.oracle.rate - self.majority.rate;
        (gap > 0.0).then(|| (rate - self.majority.rate) / gap)
    }
}

/// Evaluates `scores` (one per candidate of each group, in order) on `groups`.
pub fn evaluate(groups: &[CandidateGroup], scores: &[Vec<f32>], data: &str) -> Evaluation {
    let mut scored = Vec::new();
    let (mut maj, mut wtd, mut top, mut ora) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let bit = |b: bool| f64::from(u8::from(b));
    for (g, s) in groups.iter().zip(scores) {
        let right = |a: &str| equivalent(&g.gold, a);
        for (c, score) in g.candidates.iter().zip(s) {
            scored.push((f64::from(*score), c.correct));
        }
        let answers = g.candidates.iter().filter_map(|c| c.answer.as_deref());
        maj.push(bit(majority_vote(answers).is_some_and(|v| right(&v.answer))));
        let votes = g
            .candidates
            .iter()
            .zip(s)
            .filter_map(|(c, s)| Some((c.answer.as_deref()?, f64::from(*s))));
        wtd.push(bit(weighted_vote(votes).is_some_and(|v| right(&v.answer))));
        let best = g.candidates.iter().zip(s).fold(
            None::<(&super::data::LabelledCandidate, f32)>,
            |best, (c, s)| match best {
                Some((_, b)) if b >= *s => best,
                _ => Some((c, *s)),
            },
        );
        top.push(bit(best.is_some_and(|(c, _)| c.correct)));
        ora.push(bit(g.candidates.iter().any(|c| c.correct)));
    }
    let diff: Vec<f64> = wtd.iter().zip(&maj).map(|(w, m)| w - m).collect();
    let oracle = Rate::of(&ora, 3);
    let weighted = Rate::of(&wtd, 1);
    Evaluation {
        data: data.to_string(),
        problems: groups.len(),
        candidates: scored.len(),
        positives: scored.iter().filter(|s| s.1).count(),
        auroc: auroc(&scored),
        majority: Rate::of(&maj, 0),
        weighted_share_of_oracle: if oracle.rate > 0.0 {
            weighted.rate / oracle.rate
        } else {
            0.0
        },
        weighted,
        top1: Rate::of(&top, 2),
        oracle,
        weighted_minus_majority: Difference {
            mean: mean(&diff),
            ci95: bootstrap_ci(&diff, 0.95, RESAMPLES, 4),
        },
    }
}

/// The evaluation as a short Markdown table.
pub fn markdown(e: &Evaluation) -> String {
    let pct = |x: f64| format!("{:.1}", 100.0 * x);
    let row = |name: &str, r: &Rate| {
        format!(
            "| {name} | {}/{} | {} [{}, {}] |\n",
            r.correct,
            r.of,
            pct(r.rate),
            pct(r.ci95.0),
            pct(r.ci95.1)
        )
    };
    let mut s = format!(
        "{} problems, {} candidates ({} right); AUROC {}\n\n| selection | right | % [95% CI] |\n|---|---:|---:|\n",
        e.problems,
        e.candidates,
        e.positives,
        e.auroc.map_or("n/a".into(), |a| format!("{a:.3}"))
    );
    s += &row("majority vote", &e.majority);
    s += &row("verifier-weighted vote", &e.weighted);
    s += &row("top-1 by score", &e.top1);
    s += &row("oracle (pass@N)", &e.oracle);
    s += &format!(
        "\nweighted − majority: {} points [{}, {}]; weighted / oracle: {:.2}; gap closed: {}\n",
        pct(e.weighted_minus_majority.mean),
        pct(e.weighted_minus_majority.ci95.0),
        pct(e.weighted_minus_majority.ci95.1),
        e.weighted_share_of_oracle,
        e.gap_closed().map_or("n/a".into(), |g| format!("{g:.2}"))
    );
    s
}

#[cfg(test)]
mod tests {
    use super::super::data::{LabelledCandidate, Split};
    use super::*;

    fn group(gold: &str, answers: &[&str]) -> CandidateGroup {
        CandidateGroup {
            problem_id: "p".into(),
            question: "q".into(),
            gold: gold.into(),
            split: Split::HeldOut,
            candidates: answers
                .iter()
                .map(|a| LabelledCandidate {
                    text: format!("The answer is {a}."),
                    answer: Some(a.to_string()),
                    correct: equivalent(gold, a),
                    tokens: 10,
                    finished: true,
                    trace_confidence: None,
                })
                .collect(),
        }
    }

    #[test]
    fn selection_rules_count_what_they_pick() {
        // Problem 1: majority wrong (3 × "5"), scores favour the lone right "7".
        // Problem 2: all right. Problem 3: none right.
        let groups = vec![
            group("7", &["5", "5", "5", "7"]),
            group("2", &["2", "2"]),
            group("9", &["1", "3"]),
        ];
        let scores = vec![vec![0.1, 0.1, 0.1, 0.9], vec![0.5, 0.5], vec![0.2, 0.8]];
        let e = evaluate(&groups, &scores, "t");
        assert_eq!((e.problems, e.candidates, e.positives), (3, 8, 3));
        assert_eq!(e.majority.correct, 1);
        assert_eq!(e.weighted.correct, 2, "0.9 > 0.3 for the lone right answer");
        assert_eq!(e.top1.correct, 2);
        assert_eq!(e.oracle.correct, 2);
        assert!((e.weighted_minus_majority.mean - 1.0 / 3.0).abs() < 1e-12);
        assert!((e.weighted_share_of_oracle - 1.0).abs() < 1e-12);
        // Right candidates: 0.9, 0.5, 0.5; wrong: 0.1 ×3, 0.2, 0.8 → 13 of 15 pairs.
        assert!((e.auroc.unwrap_or(0.0) - 13.0 / 15.0).abs() < 1e-12);
        assert!(markdown(&e).contains("| verifier-weighted vote | 2/3 |"));
        // Majority 1/3, oracle 2/3, weighted 2/3: the whole gap.
        assert!((e.gap_closed().unwrap_or(0.0) - 1.0).abs() < 1e-12);
        assert!(markdown(&e).contains("gap closed: 1.00"));
        let all_right = evaluate(&groups[1..2], &scores[1..2], "t");
        assert_eq!(all_right.gap_closed(), None, "no gap to close");
    }
}
