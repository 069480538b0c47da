//! A*-decoding: best-first search over partial solutions.
//!
//! **Method** (after Chatziveroglou 2025, "A*-Decoding: Token-Efficient Inference Scaling"):
//! states are partial solutions (a path of steps); expanding a state samples `expansions`
//! next steps. Each state has `f = g + w·h`: `g` is the cost so far, the sum over its steps of
//! `−ln(PRM step score)`, and `h = −ln(PRM score of its last step)` estimates the cost to go
//! (a low-scored last step predicts more trouble ahead). The open set is popped in increasing
//! `f` (ties: earlier node). With `heuristic_weight = 0` the search is uniform-cost, the
//! heuristic is trivially admissible and the first complete state popped is optimal for `g`;
//! the search then stops there (`stop_at_first`).
//!
//! **Parameters** ([`AStarParams`]): `expansions` per pop (3), `max_expansions` (16 pops),
//! `heuristic_weight` (1.0), `stop_at_first` (true), `steps`, `score_by` (`prm_last`),
//! `decoding`.
//!
//! **Budget.** Each pop is one batched call of `expansions` sibling steps forked from the
//! popped state's cached prefix, plus one verifier call per child. The expansion cap bounds
//! the search; the token budget bounds it harder (best complete state so far on interruption).

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::context::{Branch, Context};
use crate::error::Result;
use crate::outcome::{Candidate, Selection};
use crate::params::{in_range, positive, Decoding, ScoreBy, Steps};
use crate::select::select_best_score;
use crate::strategy::Strategy;

/// Parameters of `a_star`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AStarParams {
    /// Children sampled per expansion.
    pub expansions: usize,
    /// Most states expanded.
    pub max_expansions: usize,
    /// Weight `w` of the heuristic in `f = g + w·h`.
    pub heuristic_weight: f64,
    /// Stop at the first complete state popped.
    pub stop_at_first: bool,
    /// Step settings.
    pub steps: Steps,
    /// Step score source.
    pub score_by: ScoreBy,
    /// Sampling.
    pub decoding: Decoding,
}

impl Default for AStarParams {
    fn default() -> Self {
        Self {
            expansions: 3,
            max_expansions: 16,
            heuristic_weight: 1.0,
            stop_at_first: true,
            steps: Steps::default(),
            score_by: ScoreBy::PrmLast,
            decoding: Decoding::default(),
        }
    }
}

/// A state in the open set, ordered so the max-heap pops the lowest `f` (then lowest node).
#[derive(Debug)]
struct Open {
    f: f64,
    g: f64,
    branch: Branch,
    depth: usize,
}

impl PartialEq for Open {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Open {}
impl PartialOrd for Open {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Open {
    fn cmp(&self, o: &Self) -> Ordering {
        o.f.total_cmp(&self.f)
            .then(o.branch.node.cmp(&self.branch.node))
    }
}

/// Step cost: `−ln(score)`, with scores clamped away from zero.
fn step_cost(score: f32) -> f64 {
    -(score.clamp(1e-6, 1.0) as f64).ln()
}

/// A*-decoding.
#[derive(Debug, Clone)]
pub struct AStar {
    params: AStarParams,
}

impl AStar {
    /// Validates `params`.
    pub fn new(params: AStarParams) -> Result<Self> {
        positive("a_star", "expansions", params.expansions)?;
        positive("a_star", "max_expansions", params.max_expansions)?;
        in_range(
            "a_star",
            "heuristic_weight",
            params.heuristic_weight,
            0.0,
            100.0,
        )?;
        params.steps.validate("a_star")?;
        params.decoding.validate("a_star")?;
        Ok(Self { params })
    }
}

#[async_trait]
impl Strategy for AStar {
    fn name(&self) -> &str {
        "a_star"
    }

    async fn search(&self, ctx: &Context) -> Result<Selection> {
        let root = ctx.open().await?;
        let spec = self.params.steps.spec(&self.params.decoding);
        let mut open = BinaryHeap::new();
        open.push(Open {
            f: 0.0,
            g: 0.0,
            branch: root,
            depth: 0,
        });
        let mut pops = 0;
        while let Some(state) = open.pop() {
            ctx.with_tree(|t| t.note(state.branch.node, "pop_order", pops));
            let complete = state.branch.finished || state.depth >= self.params.steps.max_steps;
            if state.depth > 0 && complete {
                let score = ctx.with_tree(|t| t.get(state.branch.node).and_then(|n| n.score));
                ctx.add_candidate(&state.branch, score);
                ctx.release(&state.branch);
                if self.params.stop_at_first {
                    break;
                }
                continue;
            }
            if pops == self.params.max_expansions {
                open.push(state);
                break;
            }
            pops += 1;
            let children = (0..self.params.expansions)
                .map(|k| Ok((ctx.fork(&state.branch)?, k as u64)))
                .collect::<Result<Vec<_>>>()?;
            ctx.release(&state.branch);
            for child in ctx.extend(children, &spec).await? {
                let score = ctx.score(&child, self.params.score_by).await?;
                let g = state.g + step_cost(score);
                let f = g + self.params.heuristic_weight * step_cost(score);
                ctx.with_tree(|t| {
                    t.note(child.node, "g", g);
                    t.note(child.node, "f", f);
                });
                open.push(Open {
                    f,
                    g,
                    branch: child,
                    depth: state.depth + 1,
                });
            }
        }
        // Out of expansions without a complete state: the best open states become candidates.
        if ctx.candidates().is_empty() {
            while let Some(state) = open.pop() {
                if state.depth > 0 {
                    let score = ctx.with_tree(|t| t.get(state.branch.node).and_then(|n| n.score));
                    ctx.add_candidate(&state.branch, score);
                    break;
                }
            }
        }
        Ok(self.select(&ctx.candidates()))
    }

    fn select(&self, candidates: &[Candidate]) -> Selection {
        select_best_score(candidates)
    }
}
