//! Step-level beam search and DVTS (diverse verifier tree search), PRM-guided.
//!
//! **Method.** Solutions grow one step at a time (a step ends at the delimiter, `"\n\n"` by
//! default). *Beam search* (Snell et al. 2024, "Scaling LLM Test-Time Compute Optimally…";
//! HF search-and-learn): keep the `width` (M) best partial solutions by PRM score and expand each
//! into `n / width` sampled next steps, so every step scores N candidates. *DVTS* (Beeching et
//! al. 2024): split N into `n / width` independent subtrees; each expands its single beam into
//! `width` children and keeps only the best — greedy per subtree, diverse across subtrees.
//! Both are one algorithm here with (groups, keep, expand) = (1, M, N/M) or (N/M, 1, M).
//!
//! **Composition.** With `early_stop` set, DeepConf's online rule runs *inside* the search: a
//! beam whose lowest sliding-window group confidence falls below the threshold is pruned before
//! it is scored or kept (strategies share one tree and one stop rule, not black-box calls).
//!
//! **Parameters** ([`BeamParams`]): `n` (8), `width` (M: beam width, or DVTS's expansion per
//! subtree; 2 / 4), `steps` (delimiter, `max_step_tokens`, `max_steps`), `score_by`
//! (`prm_last`), `weighted_vote` (false for beam, true for DVTS), `early_stop`, `decoding`.
//!
//! **Budget.** Each step is one batched engine call for every beam of every subtree: the beams'
//! shared prefixes are cached, so a step costs only its new tokens plus one PRM call per
//! candidate. A short budget gives each candidate an equal share of what is left; when it runs
//! out, the best finished (or, failing that, best partial) solution is the answer.

use async_trait::async_trait;
use ponder_verifiers::lowest_group_confidence;
use serde::{Deserialize, Serialize};

use crate::context::{Branch, Context};
use crate::error::{Result, StrategyError};
use crate::outcome::{Candidate, Selection};
use crate::params::{in_range, positive, Decoding, ScoreBy, Steps};
use crate::select::{select_among, select_best_score, select_by_vote};
use crate::strategy::Strategy;
use crate::tree::NodeStatus;

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
    groups: usize,
    keep: usize,
    expand: usize,
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
        params.steps.validate(name)?;
        params.decoding.validate(name)?;
        if let Some(stop) = &params.early_stop {
            stop.validate(name)?;
        }
        Ok(())
    }

    /// Beam search keeping `width` beams, each expanded `n / width` times per step.
    pub fn beam(params: BeamParams) -> Result<Self> {
        Self::validate(&params, "beam_search")?;
        let (keep, expand) = (params.width, params.n / params.width);
        Ok(Self {
            params,
            name: "beam_search",
            groups: 1,
            keep,
            expand,
        })
    }

    /// DVTS: `n / width` subtrees, each expanding `width` children and keeping the best.
    pub fn dvts(params: DvtsParams) -> Result<Self> {
        let params = params.0;
        Self::validate(&params, "dvts")?;
        let (groups, expand) = (params.n / params.width, params.width);
        Ok(Self {
            params,
            name: "dvts",
            groups,
            keep: 1,
            expand,
        })
    }
}

#[async_trait]
impl Strategy for BeamSearch {
    fn name(&self) -> &str {
        self.name
    }

    async fn search(&self, ctx: &Context) -> Result<Selection> {
        let root = ctx.open().await?;
        let spec = self.params.steps.spec(&self.params.decoding);
        // Every subtree starts with `keep` copies of the prompt.
        let mut active: Vec<(usize, Branch)> = Vec::new();
        for g in 0..self.groups {
            for _ in 0..self.keep {
                active.push((g, ctx.fork(&root)?));
            }
        }
        ctx.release(&root);
        for _ in 0..self.params.steps.max_steps {
            if active.is_empty() {
                break;
            }
            let mut requests = Vec::with_capacity(active.len() * self.expand);
            let mut groups = Vec::with_capacity(active.len() * self.expand);
            for (i, (g, beam)) in active.iter().enumerate() {
                for e in 0..self.expand {
                    requests.push((ctx.fork(beam)?, (i * self.expand + e) as u64));
                    groups.push(*g);
                }
                ctx.release(beam);
            }
            let children = ctx.extend(requests, &spec).await?;
            let mut scored: Vec<(usize, f32, Branch)> = Vec::with_capacity(children.len());
            for (g, child) in groups.into_iter().zip(children) {
                ctx.with_tree(|t| t.note(child.node, "group", g));
                if self
                    .params
                    .early_stop
                    .is_some_and(|s| s.should_stop(&child))
                {
                    ctx.prune(&child);
                    continue;
                }
                let score = ctx.score(&child, self.params.score_by).await?;
                let stuck = child.last_stop != Some(crate::generator::StopKind::Stop);
                if child.finished || stuck {
                    // Ended by the model, or by the step cap with no delimiter: a solution.
                    ctx.add_candidate(&child, Some(score));
                    ctx.release(&child);
                } else {
                    scored.push((g, score, child));
                }
            }
            active = self.keep_best(ctx, scored);
        }
        for (_, beam) in &active {
            ctx.with_tree(|t| t.set_status(beam.node, NodeStatus::Truncated));
            let score = ctx.with_tree(|t| t.get(beam.node).and_then(|n| n.score));
            ctx.add_candidate(beam, score);
            ctx.release(beam);
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
    /// Keeps the `keep` best-scored beams of each subtree (ties: earlier node), prunes the rest.
    fn keep_best(
        &self,
        ctx: &Context,
        mut scored: Vec<(usize, f32, Branch)>,
    ) -> Vec<(usize, Branch)> {
        scored.sort_by(|a, b| {
            a.0.cmp(&b.0)
                .then(b.1.total_cmp(&a.1))
                .then(a.2.node.cmp(&b.2.node))
        });
        let mut kept = Vec::new();
        let mut per_group = vec![0usize; self.groups];
        for (g, _, branch) in scored {
            if per_group[g] < self.keep {
                per_group[g] += 1;
                kept.push((g, branch));
            } else {
                ctx.prune(&branch);
            }
        }
        kept
    }
}
