//! Recording candidates: a solution a strategy considers becomes a [`Candidate`] of the
//! [`Context`] with its canonical final answer (read from its text, or forced by an answer
//! probe once per node), its score and confidence; its tree node is marked finished or
//! truncated and the candidate is reported as [`Progress`].

use ponder_verifiers::{canonical_answer, extract_answer, has_clear_answer, TraceConfidence};

use crate::context::{lock, Branch, Context, FORCED_ANSWER_TOKENS};
use crate::outcome::Candidate;
use crate::progress::Progress;
use crate::tree::NodeStatus;

impl Context {
    /// Records the solution ending at `branch` as a candidate, its answer extracted from its
    /// text; returns its index.
    pub fn add_candidate(&self, branch: &Branch, score: Option<f32>) -> usize {
        let text = self.with_tree(|t| t.text(branch.node));
        let answer = extract_answer(&text).map(|a| canonical_answer(&a));
        self.push_candidate(branch, score, text, answer)
    }

    /// The canonical final answer ([`canonical_answer`]: `45 minutes` → `45`) of the solution
    /// ending at `branch`: the one its text marks as final ([`has_clear_answer`]) or, with
    /// `force` and none marked, the one the model gives when asked ([`Context::probe_answer`],
    /// at most [`FORCED_ANSWER_TOKENS`] greedy tokens, charged as probe tokens); if the probe is
    /// refused (budget, deadline) or reads nothing, or without `force`, the answer extracted
    /// from the text. Read once per (node, `force`): asking again costs nothing, so a probe that
    /// read a sample's answer does not pay twice when the sample becomes a candidate. `branch`
    /// must not have been released.
    pub async fn final_answer(&self, branch: &Branch, force: bool) -> Option<String> {
        if let Some(known) = lock(&self.answers).get(&(branch.node, force)) {
            return known.clone();
        }
        let text = self.with_tree(|t| t.text(branch.node));
        let forced = if force && !has_clear_answer(&text) {
            self.probe_answer(branch, FORCED_ANSWER_TOKENS)
                .await
                .ok()
                .flatten()
        } else {
            None
        };
        let answer = forced
            .or_else(|| extract_answer(&text))
            .map(|a| canonical_answer(&a));
        lock(&self.answers).insert((branch.node, force), answer.clone());
        answer
    }

    /// Records the solution ending at `branch` as a candidate with one canonical answer,
    /// forced if its text marks none ([`Context::final_answer`] with `force`); returns its
    /// index.
    pub async fn add_candidate_forced(&self, branch: &Branch, score: Option<f32>) -> usize {
        let answer = self.final_answer(branch, true).await;
        let text = self.with_tree(|t| t.text(branch.node));
        self.push_candidate(branch, score, text, answer)
    }

    /// Records `branch` as a candidate whose answer is already known (from a probe, a
    /// synthesis pass); returns its index.
    pub fn add_candidate_with_answer(
        &self,
        branch: &Branch,
        score: Option<f32>,
        answer: Option<String>,
    ) -> usize {
        let text = self.with_tree(|t| t.text(branch.node));
        self.push_candidate(branch, score, text, answer)
    }

    fn push_candidate(
        &self,
        branch: &Branch,
        score: Option<f32>,
        text: String,
        answer: Option<String>,
    ) -> usize {
        self.with_tree(|t| {
            if let Some(n) = t.get_mut(branch.node) {
                n.answer = answer.clone();
                if branch.finished {
                    n.status = NodeStatus::Finished;
                } else if n.status == NodeStatus::Open {
                    n.status = NodeStatus::Truncated;
                }
                if score.is_some() {
                    n.score = score;
                }
            }
            self.report_node(t, branch.node);
        });
        let mut c = lock(&self.candidates);
        c.push(Candidate {
            node: branch.node,
            text,
            answer,
            score,
            tokens: branch.tokens,
            confidence: (!branch.confidences.is_empty()).then(|| branch.mean_confidence()),
            trace_confidence: TraceConfidence::summary(&branch.confidences),
            finished: branch.finished,
        });
        let index = c.len() - 1;
        self.report(|| {
            let (leader, leader_votes, vote_margin) = crate::progress::leader(&c);
            Progress::Candidate {
                index,
                node: branch.node,
                answer: c[index].answer.clone(),
                score,
                leader,
                leader_votes,
                vote_margin,
                candidates: c.len(),
                spent: self.usage().spent(),
                budget: self.budget().tokens,
            }
        });
        index
    }
}
