//! A*-decoding: best-first search over partial solutions, guided by a PRM.
//!
//! **Method** (after Chatziveroglou 2025, "A*-Decoding: Token-Efficient Inference Scaling"):
//! states are partial solutions (a path of steps); expanding a state samples `expansions` next
//! steps. A PRM's score `p(s)` of a state is its estimate that the solution so far can still
//! end correct; the root (the bare prompt) has `p = 1`. A step costs what it loses of that
//! estimate: `c = max(0, ln p(parent) − ln p(child))`, so a step the PRM likes costs nothing
//! and a long solution whose steps all keep a high score is not penalised for its length.
//! Each state has `f = g + w·h`:
//! - `g`, the cost so far, is the sum of its steps' costs;
//! - `h` estimates the cost *still to go*: 0 for a complete solution (the model ended it);
//!   otherwise, with `heuristic = steps_to_go` (default), the path's mean step cost times the
//!   steps it probably still needs, `max(1, expected_steps − depth)`; with `heuristic = zero`,
//!   0 — the admissible variant (step costs are never negative), under which the search is
//!   uniform-cost and the first complete state popped has the lowest `g` of all.
//!
//! The open set is popped in increasing `f` (ties: the deeper, then the earlier node), `batch`
//! states at a time:
//! their children are generated in one engine call and scored in one verifier submission (a
//! popped state leaves the open set, so A* needs no virtual loss to keep a batch distinct). A
//! complete state popped first in a round ends the search with `stop_at_first`; one popped
//! behind incomplete states of the same round waits until they are expanded, as plain A*
//! would expand them first. A state at `max_steps` that the model did not end is a dead end (an
//! unfinished candidate). The answer is the complete solution with the best (lowest) `f`;
//! candidates carry `exp(−f)` as their score.
//!
//! **Parameters** ([`AStarParams`]): `expansions` per pop (3), `max_expansions` (16 pops),
//! `batch` (2 pops per round), `heuristic` (`steps_to_go` | `zero`), `heuristic_weight` w
//! (1.0), `expected_steps` (4), `stop_at_first` (true), `steps`, `score_by` (`prm_last`),
//! `decoding`.
//!
//! **Budget.** Each round is one batched call of `batch × expansions` sibling steps forked
//! from the popped states' cached prefixes, plus one verifier submission. The expansion cap
//! bounds the search; the token budget bounds it harder (best complete state so far on
//! interruption).

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::context::{Branch, Context};
use crate::error::Result;
use crate::outcome::{Candidate, Selection};
use crate::params::{in_range, positive, Decoding, ScoreBy, Steps};
use crate::select::{select_among, select_best_score};
use crate::strategy::Strategy;

/// How `h`, the cost still to go, is estimated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Heuristic {
    /// Mean step cost along the path × steps probably still needed.
    StepsToGo,
    /// Zero: admissible; the search is uniform-cost.
    Zero,
}

/// Parameters of `a_star`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AStarParams {
    /// Children sampled per expansion.
    pub expansions: usize,
    /// Most states expanded.
    pub max_expansions: usize,
    /// States popped and expanded together per round.
    pub batch: usize,
    /// How the cost still to go is estimated.
    pub heuristic: Heuristic,
    /// Weight `w` of the heuristic in `f = g + w·h`.
    pub heuristic_weight: f64,
    /// Steps a solution is expected to take (for `steps_to_go`).
    pub expected_steps: usize,
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
            batch: 2,
            heuristic: Heuristic::StepsToGo,
            heuristic_weight: 1.0,
            expected_steps: 4,
            stop_at_first: true,
            steps: Steps::default(),
            score_by: ScoreBy::PrmLast,
            decoding: Decoding::default(),
        }
    }
}

/// A state in the open set, ordered so the max-heap pops the lowest `f`, then the deepest (the
/// usual A* tie-break towards the goal: with zero-cost steps the search goes on down a path
/// instead of widening level by level), then the earliest node.
#[derive(Debug)]
struct Open {
    f: f64,
    g: f64,
    /// The PRM's score of the state (1 for the prompt).
    p: f32,
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
            .then(self.depth.cmp(&o.depth))
            .then(o.branch.node.cmp(&self.branch.node))
    }
}

/// The cost of a step from a state scored `parent` to one scored `child`: the log of the
/// estimate it loses, never negative.
pub fn step_cost(parent: f32, child: f32) -> f64 {
    let ln = |p: f32| (p.clamp(1e-6, 1.0) as f64).ln();
    (ln(parent) - ln(child)).max(0.0)
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
        positive("a_star", "batch", params.batch)?;
        positive("a_star", "expected_steps", params.expected_steps)?;
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

    /// `h` of an incomplete state at `depth` with cost so far `g`.
    fn h(&self, g: f64, depth: usize, finished: bool) -> f64 {
        match self.params.heuristic {
            _ if finished => 0.0,
            Heuristic::Zero => 0.0,
            Heuristic::StepsToGo => {
                let to_go = self.params.expected_steps.saturating_sub(depth).max(1);
                g / depth.max(1) as f64 * to_go as f64
            }
        }
    }

    /// Records `state` as a candidate scored `exp(−f)`.
    fn record(&self, ctx: &Context, state: &Open) {
        ctx.add_candidate(&state.branch, Some((-state.f).exp() as f32));
        ctx.release(&state.branch);
    }
}

#[async_trait]
impl Strategy for AStar {
    fn name(&self) -> &str {
        "a_star"
    }

    async fn search(&self, ctx: &Context) -> Result<Selection> {
        let p = &self.params;
        let root = ctx.open().await?;
        let spec = p.steps.spec(&p.decoding);
        let mut open = BinaryHeap::new();
        open.push(Open {
            f: 0.0,
            g: 0.0,
            p: 1.0,
            branch: root,
            depth: 0,
        });
        let mut pops = 0usize;
        let mut order = 0usize;
        let mut stopped = false;
        'search: loop {
            let mut round: Vec<Open> = Vec::new();
            while round.len() < p.batch {
                let Some(state) = open.pop() else { break };
                if state.branch.finished {
                    if !round.is_empty() {
                        open.push(state); // expand what was popped before it first
                        break;
                    }
                    ctx.with_tree(|t| t.note(state.branch.node, "pop_order", order));
                    order += 1;
                    self.record(ctx, &state);
                    if p.stop_at_first {
                        stopped = true;
                        break 'search;
                    }
                    continue;
                }
                if state.depth >= p.steps.max_steps {
                    self.record(ctx, &state); // a dead end: unfinished
                    continue;
                }
                if pops == p.max_expansions {
                    open.push(state);
                    break;
                }
                ctx.with_tree(|t| t.note(state.branch.node, "pop_order", order));
                order += 1;
                pops += 1;
                round.push(state);
            }
            if round.is_empty() {
                break;
            }
            let mut requests = Vec::with_capacity(round.len() * p.expansions);
            let mut parents = Vec::with_capacity(requests.capacity());
            for (i, state) in round.iter().enumerate() {
                for k in 0..p.expansions {
                    requests.push((ctx.fork(&state.branch)?, k as u64));
                    parents.push(i);
                }
                ctx.release(&state.branch);
            }
            let children = ctx.extend(requests, &spec).await?;
            let scores = ctx.score_batch(&children, p.score_by).await?;
            for ((child, score), i) in children.into_iter().zip(scores).zip(parents) {
                let parent = &round[i];
                let depth = parent.depth + 1;
                let g = parent.g + step_cost(parent.p, score);
                let f = g + p.heuristic_weight * self.h(g, depth, child.finished);
                ctx.with_tree(|t| {
                    t.note(child.node, "g", g);
                    t.note(child.node, "f", f);
                });
                open.push(Open {
                    f,
                    g,
                    p: score,
                    branch: child,
                    depth,
                });
            }
        }
        if !stopped {
            // Out of expansions: complete states still open are candidates; without any, the
            // best open state is.
            let mut best_partial = None;
            while let Some(state) = open.pop() {
                if state.branch.finished {
                    self.record(ctx, &state);
                } else if best_partial.is_none() && state.depth > 0 {
                    best_partial = Some(state);
                }
            }
            if let Some(state) = best_partial.filter(|_| ctx.candidates().is_empty()) {
                self.record(ctx, &state);
            }
        }
        Ok(self.select(&ctx.candidates()))
    }

    /// The complete solution with the lowest `f` (highest `exp(−f)`); unfinished ones only
    /// when nothing finished.
    fn select(&self, candidates: &[Candidate]) -> Selection {
        select_among(candidates, |c| c.finished, select_best_score)
    }
}
