//! Progress a running search reports while it runs: a [`Progress`] event after every settled
//! generation step and every new candidate (the leading answer, its vote margin, the spend), sent
//! to an optional [`ProgressSender`] that [`Context::with_progress`] installs. The service
//! streams these to clients; nothing in a strategy depends on anyone listening.
//!
//! [`Context::with_progress`]: crate::Context::with_progress

use serde::Serialize;
use tokio::sync::mpsc::UnboundedSender;

use crate::outcome::Candidate;

/// Where progress events go (an unbounded channel: sending never blocks a search).
pub type ProgressSender = UnboundedSender<Progress>;

/// One progress event.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Progress {
    /// A batch of branches was extended by one step and its cost settled.
    Step {
        /// Branches extended in the batch.
        branches: usize,
        /// Tokens generated so far.
        generated_tokens: u64,
        /// Tokens charged against the budget so far.
        spent: u64,
        /// The budget.
        budget: u64,
    },
    /// A candidate solution was recorded.
    Candidate {
        /// Its index among the candidates.
        index: usize,
        /// Its extracted answer.
        answer: Option<String>,
        /// Its score, if scored.
        score: Option<f32>,
        /// The answer most candidates agree on so far.
        leader: Option<String>,
        /// Candidates voting for the leader.
        leader_votes: usize,
        /// (leader votes − runner-up votes) / candidates with an answer; 0 without answers.
        vote_margin: f64,
        /// Candidates so far.
        candidates: usize,
        /// Tokens charged against the budget so far.
        spent: u64,
        /// The budget.
        budget: u64,
    },
}

/// The leading answer among `candidates`, its votes and its vote margin (ties go to the answer
/// found first).
pub(crate) fn leader(candidates: &[Candidate]) -> (Option<String>, usize, f64) {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for a in candidates.iter().filter_map(|c| c.answer.as_deref()) {
        match counts.iter_mut().find(|(x, _)| *x == a) {
            Some((_, n)) => *n += 1,
            None => counts.push((a, 1)),
        }
    }
    let voters: usize = counts.iter().map(|(_, n)| n).sum();
    let mut best: Option<(&str, usize)> = None;
    let mut second = 0;
    for &(a, n) in &counts {
        match best {
            Some((_, b)) if n <= b => second = second.max(n),
            _ => {
                second = best.map_or(0, |(_, b)| b).max(second);
                best = Some((a, n));
            }
        }
    }
    match best {
        Some((a, n)) => (Some(a.to_string()), n, (n - second) as f64 / voters as f64),
        None => (None, 0, 0.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(answer: Option<&str>) -> Candidate {
        Candidate { node: 0, text: String::new(), answer: answer.map(String::from), score: None, tokens: 0, confidence: None, finished: true }
    }

    #[test]
    fn leader_counts_votes_and_margin() {
        let cs = [cand(Some("5")), cand(Some("4")), cand(Some("5")), cand(None)];
        let (l, votes, margin) = leader(&cs);
        assert_eq!(l.as_deref(), Some("5"));
        assert_eq!(votes, 2);
        assert!((margin - 1.0 / 3.0).abs() < 1e-9);
        assert_eq!(leader(&[cand(None)]), (None, 0, 0.0));
    }
}
