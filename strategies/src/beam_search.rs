//! Step-level beam search and DVTS (diverse verifier tree search), PRM-guided, as the HF
//! search-and-learn recipe runs them.
//!
//! **Method.** Solutions grow one step at a time (a step ends at the delimiter, `"\n\n"` by
//! default, or at `max_step_tokens`). *Beam search* (Snell et al. 2024, "Scaling LLM Test-Time
//! Compute Optimally…"; Beeching et al. 2024, search-and-learn): every step samples N next
//! steps spread over the live beams (`N / beams` each, the first `N % beams` beams one more),
//! scores all N in one verifier submission, and keeps the `width` (M) best partial solutions
//! whose texts differ (a duplicate beam is pruned, the next best distinct one kept). A child
//! the model ended (end-of-sequence) is a complete solution; a step cut at `max_step_tokens` is
//! not — it stays a partial beam and competes like any other. The search stops once N
//! solutions are complete. *DVTS*: N is split into `N / width` independent subtrees (the first
//! `N % width` subtrees expand one child more, so every step still scores N); each subtree
//! expands its single beam into `width` children and keeps the best, and ends as soon as its
//! best child has finished. The subtrees advance together: each step is one engine call and
//! one verifier submission for every live subtree (the engine runs them in the same batches;
//! an ended subtree drops out), so a seed replays the same tree, node numbers included.
//!
//! The last of `max_steps` iterations is the *roll-out*: the survivors' children are generated
//! to the end of the solution (no delimiter, up to `rollout_tokens`), so the candidates are
//! finished solutions rather than truncated partial ones. Every finished child is a candidate;
//! a roll-out cut by its token cap is an unfinished one (chosen only when nothing finished).
//!
//! **Composition.** With `early_stop` set, DeepConf's online rule runs *inside* the search: a
//! beam whose lowest sliding-window group confidence falls below the threshold is pruned before
//! it is scored or kept (strategies share one tree and one stop rule, not black-box calls).
//!
//! **Parameters** ([`BeamParams`]): `n` (8), `width` (M: beam width, or DVTS's expansion per
//! subtree; 2 / 4), `steps` (delimiter, `max_step_tokens` 192, `max_steps` 10),
//! `rollout_tokens` (512), `score_by` (`prm_last`), `weighted_vote` (false for beam, true for
//! DVTS), `early_stop` (off), `decoding`.
//!
//! **Budget.** Each step is one batched engine call for every beam of every live subtree,
//! forked from the beams' cached prefixes, plus one verifier submission for all the children.
//! A short budget gives each child an equal share of what is left; when it runs out, the best
//! finished (or, failing that, best partial) solution is the answer.

use async_trait::async_trait;
use ponder_verifiers::lowest_group_confidence;
use serde::{Deserialize, Serialize};

use crate::context::{Branch, Context};
use crate::error::{Result, StrategyError};
use crate::outcome::{Candidate, Selection};
use crate::params::{in_range, positive, Decoding, ScoreBy, Steps};
use crate::select::{select_among, select_best_score, select_by_vote};
use crate::strategy::Strategy;

/// DeepConf-style online stop rule used inside a search.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfidenceStop {
    /// Sliding-window size in tokens.
    pub window: usize,
    /// Prune a branch once any window's mean token confidence is below this.
    pub threshold: f32,
}

impl ConfidenceStop {
    /// Whether `branch` has fallen below the threshold.
    pub fn should_stop(&self, branch: &Branch) -> bool {
        lowest_window(&branch.confidences, self.window).is_some_and(|c| c < self.threshold)
    }

    fn validate(&self, strategy: &str) -> Result<()> {
        positive(strategy, "early_stop.window", self.window)?;
        in_range(
            strategy,
            "early_stop.threshold",
            self.threshold as f64,
            0.0,
            1e6,
        )
    }
}

/// Lowest sliding-window group confidence, once at least one full window exists (an online
/// stop rule must not fire on a trace's first few tokens).
pub(crate) fn lowest_window(confidences: &[f32], window: usize) -> Option<f32> {
    if confidences.len() < window {
        return None;
    }
    lowest_group_confidence(confidences, window)
}

/// Parameters of `beam_search` and `dvts`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BeamParams {
    /// Candidates scored per step (N).
    pub n: usize,
    /// Beam search: beams kept (M). DVTS: children per subtree per step.
    pub width: usize,
    /// Step settings.
    pub steps: Steps,
    /// Most tokens of the final roll-out to the end of the solution.
    pub rollout_tokens: usize,
    /// What to rank partial solutions by.
    pub score_by: ScoreBy,
    /// Choose the final answer by score-weighted vote rather than the single best score.
    pub weighted_vote: bool,
    /// Optional DeepConf stop rule applied to every beam.
    pub early_stop: Option<ConfidenceStop>,
    /// Sampling.
    pub decoding: Decoding,
}

impl Default for BeamParams {
    fn default() -> Self {
        Self {
            n: 8,
            width: 2,
            steps: Steps::default(),
            rollout_tokens: 512,
            score_by: ScoreBy::PrmLast,
            weighted_vote: false,
            early_stop: None,
            decoding: Decoding::default(),
        }
    }
}

/// Parameters of `dvts` (same fields as beam search; different defaults).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct DvtsParams(pub BeamParams);

impl Default for DvtsParams {
    fn default() -> Self {
        Self(BeamParams {
            width: 4,
            weighted_vote: true,
            ..BeamParams::default()
        })
    }
}

/// Beam search or DVTS.
#[derive(Debug, Clone)]
pub struct BeamSearch {
    params: BeamParams,
    name: &'static str,
    /// Independent subtrees (1 for beam search).
    groups: usize,
    /// Beams kept per subtree.
    keep: usize,
}

impl BeamSearch {
    fn validate(params: &BeamParams, name: &str) -> Result<()> {
        positive(name, "n", params.n)?;
        positive(name, "width", params.width)?;
        if params.width > params.n {
            return Err(StrategyError::invalid(
                name,
                "width",
                format!("must be at most n ({}), got {}", params.n, params.width),
            ));
        }
        positive(name, "rollout_tokens", params.rollout_tokens)?;
        params.steps.validate(name)?;
        params.decoding.validate(name)?;
        if let Some(stop) = &params.early_stop {
            stop.validate(name)?;
        }
        Ok(())
    }

    /// Beam search keeping `width` beams; every step samples `n` children spread over them.
    pub fn beam(params: BeamParams) -> Result<Self> {
        Self::validate(&params, "beam_search")?;
        let keep = params.width;
        Ok(Self {
            params,
            name: "beam_search",
            groups: 1,
            keep,
        })
    }

    /// DVTS: `n / width` subtrees, each expanding `width` children (the first `n % width`
    /// one more) and keeping the best.
    pub fn dvts(params: DvtsParams) -> Result<Self> {
        let params = params.0;
        Self::validate(&params, "dvts")?;
        let groups = params.n / params.width;
        Ok(Self {
            params,
            name: "dvts",
            groups,
            keep: 1,
        })
    }

    /// Children subtree `g` samples per step: `n` spread evenly over the subtrees.
    fn children_of(&self, g: usize) -> usize {
        self.params.n / self.groups + usize::from(g < self.params.n % self.groups)
    }
}

#[async_trait]
impl Strategy for BeamSearch {
    fn name(&self) -> &str {
        self.name
    }

    async fn search(&self, ctx: &Context) -> Result<Selection> {
        let p = &self.params;
        let root = ctx.open().await?;
        let step = p.steps.spec(&p.decoding);
        let rollout = p.decoding.whole(p.rollout_tokens);
        // Every subtree starts from a fork of the prompt; an empty subtree has ended.
        let mut groups = (0..self.groups)
            .map(|_| Ok(vec![ctx.fork(&root)?]))
            .collect::<Result<Vec<Vec<Branch>>>>()?;
        ctx.release(&root);
        let mut complete = 0usize;
        for depth in 0..p.steps.max_steps {
            // Beam search stops once N solutions are complete (DVTS subtrees end on their own).
            if groups.iter().all(Vec::is_empty) || (self.groups == 1 && complete >= p.n) {
                break;
            }
            let last = depth + 1 == p.steps.max_steps;
            let mut requests = Vec::with_capacity(p.n);
            let mut owner = Vec::with_capacity(p.n);
            for (g, beams) in groups.iter().enumerate() {
                if beams.is_empty() {
                    continue;
                }
                let children = self.children_of(g);
                let (per, extra) = (children / beams.len(), children % beams.len());
                for (i, beam) in beams.iter().enumerate() {
                    for e in 0..per + usize::from(i < extra) {
                        // Distinct draws per (subtree, child): no two openings alike.
                        requests.push((ctx.fork(beam)?, ((g as u64) << 32) | e as u64));
                        owner.push(g);
                    }
                    ctx.release(beam);
                }
            }
            let spec = if last { &rollout } else { &step };
            let mut kids = Vec::with_capacity(requests.len());
            let mut kid_group = Vec::with_capacity(requests.len());
            for (child, g) in ctx.extend(requests, spec).await?.into_iter().zip(owner) {
                ctx.with_tree(|t| t.note(child.node, "group", g));
                if p.early_stop.is_some_and(|s| s.should_stop(&child)) {
                    ctx.prune(&child);
                } else {
                    kids.push(child);
                    kid_group.push(g);
                }
            }
            let scores = ctx.score_batch(&kids, p.score_by).await?;
            let mut ranked: Vec<(usize, f32, Branch)> = kid_group
                .into_iter()
                .zip(scores)
                .zip(kids)
                .map(|((g, s), b)| (g, s, b))
                .collect();
            ranked.sort_by(|a, b| {
                a.0.cmp(&b.0)
                    .then(b.1.total_cmp(&a.1))
                    .then(a.2.node.cmp(&b.2.node))
            });
            for (g, beams) in groups.iter_mut().enumerate() {
                let mine: Vec<(f32, Branch)> = ranked
                    .iter()
                    .filter(|(o, _, _)| *o == g)
                    .map(|(_, s, b)| (*s, b.clone()))
                    .collect();
                // DVTS: the subtree ends when its best child has finished.
                let best_finished = mine.first().is_some_and(|(_, b)| b.finished);
                let mut partial = Vec::new();
                for (score, child) in mine {
                    if child.finished || last {
                        complete += usize::from(child.finished);
                        ctx.add_candidate(&child, Some(score));
                        ctx.release(&child);
                    } else {
                        partial.push(child);
                    }
                }
                if self.keep == 1 && best_finished {
                    for b in &partial {
                        ctx.prune(b);
                    }
                    partial.clear();
                }
                *beams = self.keep_best(ctx, partial);
            }
        }
        for b in groups.iter().flatten() {
            ctx.prune(b);
        }
        Ok(self.select(&ctx.candidates()))
    }

    fn select(&self, candidates: &[Candidate]) -> Selection {
        // Prefer finished solutions; partial ones only if nothing finished.
        let weighted = self.params.weighted_vote;
        select_among(
            candidates,
            |c| c.finished,
            |pool| {
                if weighted {
                    select_by_vote(pool, true)
                } else {
                    select_best_score(pool)
                }
            },
        )
    }
}

impl BeamSearch {
    /// Keeps the `keep` best partial solutions (given best first) whose texts differ; prunes
    /// the rest, duplicates included.
    fn keep_best(&self, ctx: &Context, ranked: Vec<Branch>) -> Vec<Branch> {
        let mut kept: Vec<Branch> = Vec::new();
        let mut texts: Vec<String> = Vec::new();
        for branch in ranked {
            let text = ctx.with_tree(|t| t.text(branch.node));
            if kept.len() < self.keep && !texts.contains(&text) {
                texts.push(text);
                kept.push(branch);
            } else {
                if texts.contains(&text) {
                    ctx.with_tree(|t| t.note(branch.node, "duplicate", true));
                }
                ctx.prune(&branch);
            }
        }
        kept
    }
}
