//! Votes over answers: majority (self-consistency, Wang et al. 2022) and weighted (by a
//! verifier's score or a confidence, as in weighted best-of-N and DeepConf's confidence-weighted
//! voting).
//!
//! Answers are grouped by math equivalence ([`Answer::is_equivalent`]) of their canonical forms
//! ([`canonical_answer`]: `45 minutes` votes with `45`): each answer joins the
//! first group whose representative — the group's first member — it is equivalent to, or starts
//! a new group. Ties go to the group that appeared first, so a vote is deterministic.
//!
//! Invariants: empty answers are ignored (they are "no answer", not a candidate); weights that
//! are negative or not finite count as 0; `support ≤ total`, `0 ≤ margin ≤ 1`.
#![deny(clippy::indexing_slicing)]

use crate::canonical::canonical_answer;
use crate::equivalence::Answer;

/// The outcome of a vote.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct VoteResult {
    /// The winning answer: its group's first member, as written.
    pub answer: String,
    /// The winning group's total weight (its count, in a majority vote).
    pub support: f64,
    /// The total weight of all answers.
    pub total: f64,
    /// `(support − runner-up's weight) / total`: 1 when unanimous, 0 on a tie; 0 when `total`
    /// is 0.
    pub margin: f64,
    /// Every group's representative and weight, heaviest first (ties in order of appearance).
    pub groups: Vec<(String, f64)>,
}

/// One vote per answer. `None` when there is no non-empty answer.
///
/// ```
/// use ponder_verifiers::majority_vote;
///
/// let v = majority_vote([r"\frac{1}{2}", "0.5", "3", "1/2"]).expect("answers");
/// assert_eq!(v.answer, r"\frac{1}{2}");
/// assert_eq!((v.support, v.total), (3.0, 4.0));
/// assert_eq!(v.margin, 0.5);
/// ```
pub fn majority_vote<'a>(answers: impl IntoIterator<Item = &'a str>) -> Option<VoteResult> {
    weighted_vote(answers.into_iter().map(|a| (a, 1.0)))
}

/// Each answer votes with its weight. `None` when there is no non-empty answer.
///
/// ```
/// use ponder_verifiers::weighted_vote;
///
/// let v = weighted_vote([("2", 0.9), ("3", 0.4), ("3.0", 0.4)]).expect("answers");
/// assert_eq!(v.answer, "2");
/// assert_eq!(v.groups, vec![("2".to_string(), 0.9), ("3".to_string(), 0.8)]);
/// ```
pub fn weighted_vote<'a>(answers: impl IntoIterator<Item = (&'a str, f64)>) -> Option<VoteResult> {
    let mut groups: Vec<(Answer, String, f64)> = Vec::new();
    for (raw, weight) in answers {
        let raw = raw.trim();
        if raw.is_empty() {
            continue;
        }
        let weight = if weight.is_finite() && weight > 0.0 {
            weight
        } else {
            0.0
        };
        let answer = Answer::new(&canonical_answer(raw));
        if answer.normalized().is_empty() {
            continue;
        }
        match groups.iter_mut().find(|g| g.0.is_equivalent(&answer)) {
            Some(group) => group.2 += weight,
            None => groups.push((answer, raw.to_string(), weight)),
        }
    }
    let mut ranked: Vec<(String, f64)> = groups.into_iter().map(|(_, s, w)| (s, w)).collect();
    // A stable sort keeps first-appearance order among equal weights.
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
    let (answer, support) = ranked.first().cloned()?;
    let second = ranked.get(1).map_or(0.0, |g| g.1);
    let total: f64 = ranked.iter().map(|g| g.1).sum();
    let margin = if total > 0.0 {
        (support - second) / total
    } else {
        0.0
    };
    Some(VoteResult {
        answer,
        support,
        total,
        margin,
        groups: ranked,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_answers_no_vote() {
        assert_eq!(majority_vote([]), None);
        assert_eq!(majority_vote(["", "  "]), None);
    }

    #[test]
    fn ties_go_to_the_earliest_group() -> Result<(), &'static str> {
        let v = majority_vote(["7", "8", "8.0", "7"]).ok_or("no vote")?;
        assert_eq!(v.answer, "7");
        assert_eq!(v.margin, 0.0);
        assert_eq!(
            v.groups,
            vec![("7".to_string(), 2.0), ("8".to_string(), 2.0)]
        );
        Ok(())
    }

    #[test]
    fn unanimous_margin_is_one() -> Result<(), &'static str> {
        let v = majority_vote([r"\boxed{4}", "4", "x = 4"]).ok_or("no vote")?;
        assert_eq!((v.support, v.total, v.margin), (3.0, 3.0, 1.0));
        assert_eq!(v.answer, r"\boxed{4}");
        Ok(())
    }

    #[test]
    fn bad_weights_count_as_zero() -> Result<(), &'static str> {
        let v = weighted_vote([("1", f64::NAN), ("2", -3.0), ("3", 0.5)]).ok_or("no vote")?;
        assert_eq!(v.answer, "3");
        assert_eq!((v.support, v.total, v.margin), (0.5, 0.5, 1.0));
        let z = weighted_vote([("1", 0.0), ("2", 0.0)]).ok_or("no vote")?;
        assert_eq!((z.answer.as_str(), z.margin), ("1", 0.0));
        Ok(())
    }
}
