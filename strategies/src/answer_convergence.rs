//! Answer convergence: stop thinking once the answer has stopped changing.
//!
//! **Method** (after Fu et al. 2025, Dynasor-CoT "probe-in-the-middle", and Liu et al. 2025 on
//! answer convergence): one solution is generated step by step; at every step end a cheap probe
//! forks the sequence, appends "…the final answer is \boxed{", decodes greedily to the closing
//! brace and throws the fork away (its KV is shared, so a probe costs its own few tokens). When
//! `patience` consecutive probes give equivalent answers, generation stops and that answer is
//! returned; otherwise the solution runs to its end and its own answer counts.
//!
//! **Parameters** ([`AnswerConvergenceParams`]): `patience` (3), `probe_tokens` (12),
//! `min_steps` before probing (1), `steps`, `decoding`.
//!
//! **Budget.** One step call plus one probe per step; probes are counted in
//! `usage.probe_tokens`. Saves the rest of a long solution once the answer has settled.

use async_trait::async_trait;
use ponder_verifiers::equivalent;
use serde::{Deserialize, Serialize};

use crate::context::Context;
use crate::error::Result;
use crate::outcome::Selection;
use crate::params::{positive, Decoding, Steps};
use crate::strategy::Strategy;
use crate::tree::NodeStatus;

/// Parameters of `answer_convergence`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AnswerConvergenceParams {
    /// Consecutive agreeing probes that end the search.
    pub patience: usize,
    /// Most tokens a probe may decode.
    pub probe_tokens: usize,
    /// Steps before the first probe.
    pub min_steps: usize,
    /// Step settings.
    pub steps: Steps,
    /// Sampling.
    pub decoding: Decoding,
}

impl Default for AnswerConvergenceParams {
    fn default() -> Self {
        Self {
            patience: 3,
            probe_tokens: 12,
            min_steps: 1,
            steps: Steps {
                max_steps: 24,
                ..Steps::default()
            },
            decoding: Decoding::default(),
        }
    }
}

/// Generate step by step, probing the answer; stop when it converges.
#[derive(Debug, Clone)]
pub struct AnswerConvergence {
    params: AnswerConvergenceParams,
}

impl AnswerConvergence {
    /// Validates `params`.
    pub fn new(params: AnswerConvergenceParams) -> Result<Self> {
        positive("answer_convergence", "patience", params.patience)?;
        positive("answer_convergence", "probe_tokens", params.probe_tokens)?;
        params.steps.validate("answer_convergence")?;
        params.decoding.validate("answer_convergence")?;
        Ok(Self { params })
    }
}

#[async_trait]
impl Strategy for AnswerConvergence {
    fn name(&self) -> &str {
        "answer_convergence"
    }

    async fn search(&self, ctx: &Context) -> Result<Selection> {
        let mut branch = ctx.open().await?;
        let spec = self.params.steps.spec(&self.params.decoding);
        let mut streak: Option<(String, usize)> = None;
        for step in 0..self.params.steps.max_steps {
            branch = ctx
                .extend(vec![(branch, 0)], &spec)
                .await?
                .pop()
                .ok_or_else(|| {
                    crate::error::StrategyError::Generator("extend returned nothing".into())
                })?;
            if branch.finished || branch.last_stop != Some(crate::generator::StopKind::Stop) {
                let i = ctx.add_candidate(&branch, None);
                return Ok(Selection {
                    answer: ctx.candidates()[i].answer.clone(),
                    candidate: Some(i),
                    support: None,
                });
            }
            if step + 1 < self.params.min_steps {
                continue;
            }
            let probe = ctx.probe_answer(&branch, self.params.probe_tokens).await?;
            ctx.with_tree(|t| t.note(branch.node, "probe", probe.clone().unwrap_or_default()));
            streak = match (streak, probe) {
                (Some((a, n)), Some(p)) if equivalent(&a, &p) => Some((a, n + 1)),
                (_, Some(p)) => Some((p, 1)),
                (_, None) => None,
            };
            if let Some((answer, n)) = &streak {
                if *n >= self.params.patience {
                    ctx.with_tree(|t| t.note(branch.node, "converged", true));
                    let i = ctx.add_candidate_with_answer(&branch, None, Some(answer.clone()));
                    ctx.with_tree(|t| t.set_status(branch.node, NodeStatus::Finished));
                    return Ok(Selection {
                        answer: Some(answer.clone()),
                        candidate: Some(i),
                        support: None,
                    });
                }
            }
        }
        // Out of steps: the last probe (if any) is the answer.
        let answer = streak.map(|(a, _)| a);
        let i = ctx.add_candidate_with_answer(&branch, None, answer.clone());
        Ok(Selection {
            answer,
            candidate: Some(i),
            support: None,
        })
    }
}
