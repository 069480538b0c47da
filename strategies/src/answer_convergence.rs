//! Answer convergence: stop thinking once the answer has stopped changing.
//!
//! **Method** (after Fu et al. 2025, Dynasor-CoT "probe-in-the-middle", and Liu et al. 2025 on
//! answer convergence): one solution is generated step by step; at every step end (from
//! `min_steps` on) a cheap probe forks the sequence, appends "…**Final Answer**: \boxed{",
//! decodes greedily until the box's braces balance (so `\frac{1}{2}` is read whole) and throws
//! the fork away (its KV is shared, so a probe costs its own few tokens). The probe of step
//! `k` is submitted together with step `k + 1`, so the two run in the same engine batches.
//! When `patience` consecutive probes give equivalent answers, generation stops and that
//! answer is returned (the step generated alongside the last probe is kept in the tree but
//! not used). A step cut at `max_step_tokens` is only a step: generation goes on. The solution
//! ends early only when the model ends it (its own `\boxed{}` answer counts); out of steps, a
//! last probe is read and the latest probe answer is returned.
//!
//! **Chains** (`n`, default 1 as in the papers): `n` such chains run at once, each with its own
//! seed and its own convergence test, their steps and probes sharing the engine's batches;
//! the answer is the majority vote over the chains' answers (self-consistency over early-stopped
//! chains, as Dynasor applies its certainty probe to each of several samples). Under a budget
//! that binds, concurrent chains' shares of what is left depend on which has settled, so with
//! `n` > 1 a replay can cut the last steps at other lengths; one chain replays exactly.
//!
//! **Parameters** ([`AnswerConvergenceParams`]): `n` (1), `patience` (3), `probe_tokens` (12),
//! `min_steps` before probing (1; the first probe follows the first step at the earliest),
//! `steps` (`max_steps` 24), `decoding`.
//!
//! **Budget.** One step call plus one probe per step and chain, overlapped; probes are counted
//! in `usage.probe_tokens`. Saves the rest of a long solution once the answer has settled.

use async_trait::async_trait;
use ponder_verifiers::equivalent;
use serde::{Deserialize, Serialize};

use crate::context::{Branch, Context};
use crate::error::Result;
use crate::outcome::{Candidate, Selection};
use crate::params::{positive, Decoding, Steps};
use crate::select::select_by_vote;
use crate::strategy::Strategy;
use crate::tree::NodeStatus;

/// Parameters of `answer_convergence`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AnswerConvergenceParams {
    /// Chains run at once; their answers are voted on.
    pub n: usize,
    /// Consecutive agreeing probes that end the search.
    pub patience: usize,
    /// Most tokens a probe may decode.
    pub probe_tokens: usize,
    /// Steps before the first probe (at least one is always generated first).
    pub min_steps: usize,
    /// Step settings.
    pub steps: Steps,
    /// Sampling.
    pub decoding: Decoding,
}

impl Default for AnswerConvergenceParams {
    fn default() -> Self {
        Self {
            n: 1,
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
        positive("answer_convergence", "n", params.n)?;
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
        let p = &self.params;
        let root = ctx.open().await?;
        // The chains' first steps are one call: the prompt is computed once for all of them.
        let mut first = Vec::with_capacity(p.n);
        for c in 0..p.n as u64 {
            first.push((ctx.fork(&root)?, c));
        }
        let started = ctx.extend(first, &p.steps.spec(&p.decoding)).await;
        ctx.release(&root);
        let chains = started?
            .into_iter()
            .enumerate()
            .map(|(c, branch)| self.chain(ctx, branch, c as u64));
        let ended = futures_util::future::join_all(chains).await;
        let mut picks = Vec::with_capacity(ended.len());
        for chain in ended {
            picks.push(chain?);
        }
        match picks.as_slice() {
            [one] => Ok(one.clone()),
            _ => Ok(self.select(&ctx.candidates())),
        }
    }

    /// Majority vote over every chain's answer: a converged chain's probe answer counts as
    /// fully as the answer of a chain the model ended.
    fn select(&self, candidates: &[Candidate]) -> Selection {
        let all: Vec<Candidate> = candidates
            .iter()
            .map(|c| Candidate {
                finished: true,
                ..c.clone()
            })
            .collect();
        select_by_vote(&all, false)
    }
}

impl AnswerConvergence {
    /// One chain from its first step `branch`, drawing with `draw`: its answer, recorded as a
    /// candidate.
    async fn chain(&self, ctx: &Context, mut branch: Branch, draw: u64) -> Result<Selection> {
        let p = &self.params;
        let spec = p.steps.spec(&p.decoding);
        let mut streak: Option<(String, usize)> = None;
        if branch.finished {
            return Ok(ended_by_model(ctx, &branch));
        }
        for step in 1..p.steps.max_steps {
            // Probe where the branch stands now, submitted with its next step.
            let probe = if step >= p.min_steps {
                Some(ctx.probe_fork(&branch)?)
            } else {
                None
            };
            let before = branch.clone();
            let (next, probed) = tokio::join!(ctx.extend(vec![(branch, draw)], &spec), async {
                match probe {
                    Some(fork) => ctx.probe_read(fork, p.probe_tokens).await.map(Some),
                    None => Ok(None),
                }
            });
            if let Some(answer) = probed? {
                if let Some(done) = self.observe(ctx, &before, answer, &mut streak) {
                    for b in next.iter().flatten() {
                        ctx.release(b);
                    }
                    return Ok(done);
                }
            }
            let next = match next {
                Ok(next) => next,
                Err(e) => {
                    // Interrupted: what the probes said so far is the anytime answer.
                    if before.node != crate::tree::SearchTree::ROOT {
                        let answer = streak.as_ref().map(|(a, _)| a.clone());
                        ctx.add_candidate_with_answer(&before, None, answer);
                    }
                    return Err(e);
                }
            };
            branch =
                next.into_iter()
                    .next()
                    .ok_or_else(|| crate::error::GeneratorError::Missing {
                        what: "extension of a chain",
                    })?;
            if branch.finished {
                return Ok(ended_by_model(ctx, &branch));
            }
        }
        // Out of steps: a last probe, and the latest probe answer is the answer.
        let answer = ctx.probe_answer(&branch, p.probe_tokens).await?;
        if let Some(done) = self.observe(ctx, &branch, answer, &mut streak) {
            return Ok(done);
        }
        let answer = streak.map(|(a, _)| a);
        let i = ctx.add_candidate_with_answer(&branch, None, answer.clone());
        Ok(Selection {
            answer,
            candidate: Some(i),
            support: None,
        })
    }

    /// Records the probe of `at`; once `patience` probes agree, `at` is the converged answer.
    fn observe(
        &self,
        ctx: &Context,
        at: &Branch,
        probe: Option<String>,
        streak: &mut Option<(String, usize)>,
    ) -> Option<Selection> {
        ctx.with_tree(|t| t.note(at.node, "probe", probe.clone().unwrap_or_default()));
        *streak = match (streak.take(), probe) {
            (Some((a, n)), Some(p)) if equivalent(&a, &p) => Some((a, n + 1)),
            (_, Some(p)) => Some((p, 1)),
            (_, None) => None,
        };
        let (answer, n) = streak.as_ref()?;
        if *n < self.params.patience {
            return None;
        }
        ctx.with_tree(|t| t.note(at.node, "converged", true));
        let i = ctx.add_candidate_with_answer(at, None, Some(answer.clone()));
        ctx.with_tree(|t| t.set_status(at.node, NodeStatus::Finished));
        Some(Selection {
            answer: Some(answer.clone()),
            candidate: Some(i),
            support: None,
        })
    }
}

/// A chain the model ended itself: its own answer, recorded as a candidate.
fn ended_by_model(ctx: &Context, branch: &Branch) -> Selection {
    let i = ctx.add_candidate(branch, None);
    Selection {
        answer: ctx.candidates().get(i).and_then(|c| c.answer.clone()),
        candidate: Some(i),
        support: None,
    }
}
