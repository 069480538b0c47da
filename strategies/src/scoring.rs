//! Scoring solutions: the verifier's (a PRM's steps aggregated, an outcome score) or the
//! model's own confidence, one submission per batch, its worst case reserved against the budget
//! before the call and what it computed charged as verifier tokens after; each scored node gets
//! its score in the tree.

use ponder_verifiers::{Solution, TraceConfidence, VerifierError};

use crate::budget::Charge;
use crate::context::{Branch, Context};
use crate::error::{GeneratorError, Result, StrategyError};
use crate::params::ScoreBy;

/// What a scoring call holds: a tree search's solutions (partial ones among them), or
/// solutions generated whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Solutions {
    Partial,
    Whole,
}

impl Context {
    /// Scores the solution ending at `branch`: [`Context::score_batch`] of one.
    pub async fn score(&self, branch: &Branch, by: ScoreBy) -> Result<f32> {
        let scores = self.score_batch(std::slice::from_ref(branch), by).await?;
        scores.into_iter().next().ok_or_else(|| {
            GeneratorError::Missing {
                what: "verifier score",
            }
            .into()
        })
    }

    /// Scores the solutions ending at `branches`, each step being a node of the tree: with the
    /// verifier, all of them in one submission ([`ponder_verifiers::Verifier::score_batch`], which a PRM runs as
    /// one engine batch), each aggregated as `by` says; by confidence (`exp` of the mean token
    /// logprob along the path) when `by` is [`ScoreBy::Confidence`] or no verifier is
    /// configured. Every branch's node gets its score.
    ///
    /// A model-backed verifier's worst case ([`ponder_verifiers::Verifier::cost_bound`], summed over the batch) is
    /// reserved before the call and what it computed ([`ponder_verifiers::Scores::cost`]) is
    /// charged as verifier tokens after it, so scoring can never take the search past its
    /// budget. `usage.verifier_calls` counts solutions scored.
    ///
    /// These are a tree search's solutions, partial ones among them: a verifier that judges
    /// finished candidates only ([`ponder_verifiers::Verifier::scores_partial`] false) is
    /// refused ([`VerifierError::InvalidRequest`]) before it is called.
    pub async fn score_batch(&self, branches: &[Branch], by: ScoreBy) -> Result<Vec<f32>> {
        let steps = self.with_tree(|t| branches.iter().map(|b| t.steps(b.node)).collect());
        self.score_steps(branches, steps, by, Solutions::Partial)
            .await
    }

    /// Like [`Context::score_batch`], for solutions the search will not extend (roll-outs to
    /// the end, final candidates), so an outcome verifier may score them too.
    pub async fn score_whole(&self, branches: &[Branch], by: ScoreBy) -> Result<Vec<f32>> {
        let steps = self.with_tree(|t| branches.iter().map(|b| t.steps(b.node)).collect());
        self.score_steps(branches, steps, by, Solutions::Whole)
            .await
    }

    /// Like [`Context::score_batch`], for solutions generated whole (one tree node holding
    /// many steps): each solution's text is cut at every `delimiter` into the steps a
    /// PRM scores one by one ([`ponder_verifiers::split_steps`]), so `prm_min`, `prm_prod`
    /// and `prm_last` see every step.
    pub async fn score_split(
        &self,
        branches: &[Branch],
        by: ScoreBy,
        delimiter: &str,
    ) -> Result<Vec<f32>> {
        let steps = self.with_tree(|t| {
            branches
                .iter()
                .map(|b| ponder_verifiers::split_steps(&t.text(b.node), delimiter))
                .collect()
        });
        self.score_steps(branches, steps, by, Solutions::Whole)
            .await
    }

    async fn score_steps(
        &self,
        branches: &[Branch],
        steps: Vec<Vec<String>>,
        by: ScoreBy,
        kind: Solutions,
    ) -> Result<Vec<f32>> {
        self.check()?;
        let scores: Vec<f32> = match self.verifier() {
            Some(v) if by != ScoreBy::Confidence && !branches.is_empty() => {
                if kind == Solutions::Partial && !v.scores_partial() {
                    return Err(StrategyError::Verifier(VerifierError::InvalidRequest {
                        verifier: v.name().to_string(),
                        reason: "it judges finished candidates only, and this strategy scores \
                                 partial solutions step by step: run a strategy that scores \
                                 whole candidates (best_of_n, weighted_best_of_n, ab_mcts, \
                                 revision) or start the server with another --verifier"
                            .into(),
                    }));
                }
                let solutions: Vec<Solution<'_>> = branches
                    .iter()
                    .zip(&steps)
                    .map(|(b, s)| Solution {
                        problem: &self.problem.question,
                        steps: s,
                        complete: b.finished,
                        confidence: TraceConfidence::summary(&b.confidences),
                    })
                    .collect();
                let bound: u64 = solutions.iter().map(|s| v.cost_bound(s)).sum();
                let reservation = self.meter.reserve(bound)?;
                for _ in &solutions {
                    self.meter.count_verifier_call();
                }
                let result = tokio::select! {
                    r = v.score_batch(&solutions) => r.map_err(StrategyError::from),
                    _ = self.cancel.cancelled() => Err(StrategyError::Cancelled),
                    e = self.meter.deadline_passed() => Err(e),
                };
                let result = result.map_err(|e| self.interrupted(e));
                let cost = result
                    .as_ref()
                    .map_or(0, |s| s.iter().map(|x| x.cost).sum());
                self.meter.settle(
                    reservation,
                    crate::generator::Cost {
                        prefill_computed: cost,
                        ..Default::default()
                    },
                    Charge::Verifier,
                );
                let all = result?;
                if all.len() != branches.len() {
                    return Err(StrategyError::from(GeneratorError::CountMismatch {
                        what: "verifier scores for solutions",
                        expected: branches.len(),
                        got: all.len(),
                    }));
                }
                all.into_iter()
                    .map(|scores| {
                        by.aggregation()
                            .and_then(|agg| agg.apply(&scores.steps))
                            .unwrap_or(scores.overall)
                    })
                    .collect()
            }
            _ => branches
                .iter()
                .map(|b| b.mean_logprob().exp() as f32)
                .collect(),
        };
        self.with_tree(|t| {
            for (b, s) in branches.iter().zip(&scores) {
                t.set_score(b.node, *s);
                self.report_node(t, b.node);
            }
        });
        Ok(scores)
    }
}
