//! Progress a running search reports while it runs: a [`Progress`] event after every settled
//! generation step and every new candidate (the leading answer, its vote margin, the spend), and
//! one whenever a search-tree node is added, scored or changes status (so a client can draw the
//! tree as it grows), sent to an optional [`ProgressSender`] that [`Context::with_progress`]
//! installs. The service streams these to clients; nothing in a strategy depends on anyone
//! listening.
//!
//! [`Context::with_progress`]: crate::Context::with_progress

use serde::Serialize;
use tokio::sync::mpsc::UnboundedSender;

use crate::outcome::Candidate;
use crate::tree::{Node, NodeId, NodeStatus};

/// Where progress events go (an unbounded channel: sending never blocks a search).
pub type ProgressSender = UnboundedSender<Progress>;

/// One progress event.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
        /// The tree node where it ends.
        #[cfg_attr(feature = "openapi", schema(value_type = usize))]
        node: NodeId,
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
    /// A tree node was added, scored or changed status. Several events may name one node: the
    /// latest is current. (Text and notes stay in the outcome's `tree`.)
    Node {
        /// The node's id.
        #[cfg_attr(feature = "openapi", schema(value_type = usize))]
        id: NodeId,
        /// Its parent (`None` only for the root, which is never reported).
        #[cfg_attr(feature = "openapi", schema(value_type = Option<usize>))]
        parent: Option<NodeId>,
        /// Depth in steps.
        depth: usize,
        /// Tokens generated for this step.
        tokens: usize,
        /// Its score, if scored.
        score: Option<f32>,
        /// Its status.
        status: NodeStatus,
        /// Tokens charged against the budget so far.
        spent: u64,
        /// The budget.
        budget: u64,
    },
}

impl Progress {
    /// The [`Progress::Node`] event for `node`'s current state.
    pub(crate) fn node(node: &Node, spent: u64, budget: u64) -> Self {
        Progress::Node {
            id: node.id,
            parent: node.parent,
            depth: node.depth,
            tokens: node.tokens,
            score: node.score,
            status: node.status,
            spent,
            budget,
        }
    }
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
        Candidate {
            node: 0,
            text: String::new(),
            answer: answer.map(String::from),
            score: None,
            tokens: 0,
            confidence: None,
            trace_confidence: None,
            finished: true,
        }
    }

    #[test]
    fn leader_counts_votes_and_margin() {
        let cs = [
            cand(Some("5")),
            cand(Some("4")),
            cand(Some("5")),
            cand(None),
        ];
        let (l, votes, margin) = leader(&cs);
        assert_eq!(l.as_deref(), Some("5"));
        assert_eq!(votes, 2);
        assert!((margin - 1.0 / 3.0).abs() < 1e-9);
        assert_eq!(leader(&[cand(None)]), (None, 0, 0.0));
    }

    #[tokio::test]
    async fn node_events_replay_the_tree_as_it_grows() {
        use std::collections::BTreeMap;
        use std::sync::Arc;

        use crate::fake::FakeGenerator;
        use crate::{Budget, Context, Problem, Registry, SearchTree};

        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let beam = Registry::with_builtins()
            .build("beam_search", serde_json::json!({"n": 4, "width": 2}))
            .expect("beam");
        let ctx = Context::new(
            Arc::new(FakeGenerator::arithmetic()),
            Problem::new("What is 2+3?"),
            Budget::tokens(4000),
        )
        .with_seed(1)
        .with_progress(tx);
        let outcome = crate::run(beam.as_ref(), ctx).await.expect("search");
        let mut latest = BTreeMap::new();
        while let Ok(p) = rx.try_recv() {
            if let Progress::Node {
                id,
                parent,
                depth,
                tokens,
                score,
                status,
                spent,
                budget,
            } = p
            {
                assert!(spent <= budget && id != SearchTree::ROOT);
                let parent_known =
                    parent.is_some_and(|p| p == SearchTree::ROOT || latest.contains_key(&p));
                assert!(
                    parent_known,
                    "node {id} reported before its parent {parent:?}"
                );
                latest.insert(id, (parent, depth, tokens, score, status));
            }
        }
        let nodes: Vec<_> = outcome
            .tree
            .nodes()
            .filter(|n| n.id != SearchTree::ROOT)
            .collect();
        assert_eq!(latest.len(), nodes.len());
        for n in nodes {
            assert_eq!(
                latest[&n.id],
                (n.parent, n.depth, n.tokens, n.score, n.status),
                "node {}",
                n.id
            );
        }
        assert!(
            latest.values().any(|n| n.4 == NodeStatus::Pruned)
                && latest.values().any(|n| n.4 == NodeStatus::Finished)
        );
    }
}
