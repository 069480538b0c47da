//! MCTS over reasoning steps with PUCT selection and PRM values.
//!
//! **Method** (AlphaZero's PUCT, as used for LLM reasoning by e.g. rStar and ReST-MCTS*): each
//! iteration walks from the root choosing the child maximising
//! `Q(c) + c_puct · P(c) · √N(parent) / (1 + N(c))`, where `Q` is the mean value backed up
//! through `c`, `N` its visit count and `P` its prior — the softmax of the siblings' mean token
//! logprobs (how likely the model found each step). At a leaf it samples `expansions` next
//! steps in one batch, values each child by its PRM score, and backs every value up the path.
//! A finished child is a candidate; selecting a finished node again re-backs its value.
//! The answer is the candidate with the most-visited path's best score (`select: visits`) or
//! simply the best-scored candidate.
//!
//! **Parameters** ([`MctsParams`]): `iterations` (8), `expansions` (3), `c_puct` (1.5),
//! `steps`, `score_by` (`prm_last`), `decoding`.
//!
//! **Budget.** One batched call of `expansions` steps and `expansions` verifier calls per
//! iteration; every child forks the leaf's cached prefix.

use std::collections::HashMap;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::context::{Branch, Context};
use crate::error::Result;
use crate::outcome::{Candidate, Selection};
use crate::params::{in_range, positive, Decoding, ScoreBy, Steps};
use crate::select::select_best_score;
use crate::strategy::Strategy;
use crate::tree::{NodeId, SearchTree};

/// Parameters of `mcts`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MctsParams {
    /// Selection–expansion–backup rounds.
    pub iterations: usize,
    /// Children sampled when a leaf is expanded.
    pub expansions: usize,
    /// Exploration constant.
    pub c_puct: f64,
    /// Step settings.
    pub steps: Steps,
    /// Value source.
    pub score_by: ScoreBy,
    /// Sampling.
    pub decoding: Decoding,
}

impl Default for MctsParams {
    fn default() -> Self {
        Self {
            iterations: 8,
            expansions: 3,
            c_puct: 1.5,
            steps: Steps::default(),
            score_by: ScoreBy::PrmLast,
            decoding: Decoding::default(),
        }
    }
}

/// Per-node statistics of the search.
#[derive(Debug, Clone, Default)]
pub(crate) struct Stats {
    pub(crate) visits: u32,
    pub(crate) value_sum: f64,
    pub(crate) prior: f64,
    pub(crate) children: Vec<NodeId>,
    pub(crate) terminal: bool,
    pub(crate) value: f64,
    pub(crate) depth: usize,
}

impl Stats {
    pub(crate) fn q(&self) -> f64 {
        if self.visits == 0 {
            0.0
        } else {
            self.value_sum / self.visits as f64
        }
    }
}

/// The PUCT score of `child` under a parent visited `parent_visits` times.
pub fn puct(q: f64, prior: f64, parent_visits: u32, child_visits: u32, c_puct: f64) -> f64 {
    q + c_puct * prior * (parent_visits as f64).sqrt() / (1.0 + child_visits as f64)
}

/// Softmax of `xs` (empty in, empty out).
pub(crate) fn softmax(xs: &[f64]) -> Vec<f64> {
    let m = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let e: Vec<f64> = xs.iter().map(|x| (x - m).exp()).collect();
    let s: f64 = e.iter().sum();
    e.into_iter().map(|x| x / s).collect()
}

/// PUCT Monte-Carlo tree search.
#[derive(Debug, Clone)]
pub struct Mcts {
    params: MctsParams,
}

impl Mcts {
    /// Validates `params`.
    pub fn new(params: MctsParams) -> Result<Self> {
        positive("mcts", "iterations", params.iterations)?;
        positive("mcts", "expansions", params.expansions)?;
        in_range("mcts", "c_puct", params.c_puct, 0.0, 100.0)?;
        params.steps.validate("mcts")?;
        params.decoding.validate("mcts")?;
        Ok(Self { params })
    }
}

#[async_trait]
impl Strategy for Mcts {
    fn name(&self) -> &str {
        "mcts"
    }

    async fn search(&self, ctx: &Context) -> Result<Selection> {
        let root = ctx.open().await?;
        let spec = self.params.steps.spec(&self.params.decoding);
        let mut stats: HashMap<NodeId, Stats> = HashMap::new();
        let mut branches: HashMap<NodeId, Branch> = HashMap::new();
        stats.insert(
            SearchTree::ROOT,
            Stats {
                prior: 1.0,
                ..Stats::default()
            },
        );
        branches.insert(SearchTree::ROOT, root);
        for _ in 0..self.params.iterations {
            // Selection.
            let mut path = vec![SearchTree::ROOT];
            let mut cur = SearchTree::ROOT;
            while let Some(s) = stats.get(&cur) {
                if s.children.is_empty() || s.terminal {
                    break;
                }
                let parent_visits = s.visits.max(1);
                let best = s.children.iter().copied().max_by(|a, b| {
                    let (sa, sb) = (&stats[a], &stats[b]);
                    let pa = puct(
                        sa.q(),
                        sa.prior,
                        parent_visits,
                        sa.visits,
                        self.params.c_puct,
                    );
                    let pb = puct(
                        sb.q(),
                        sb.prior,
                        parent_visits,
                        sb.visits,
                        self.params.c_puct,
                    );
                    pa.total_cmp(&pb).then(b.cmp(a))
                });
                let Some(next) = best else { break };
                path.push(next);
                cur = next;
            }
            let leaf = stats.get(&cur).cloned().unwrap_or_default();
            let values: Vec<f64> = if leaf.terminal || leaf.depth >= self.params.steps.max_steps {
                vec![leaf.value]
            } else {
                // Expansion and evaluation.
                let Some(parent) = branches.get(&cur) else {
                    break;
                };
                let kids = (0..self.params.expansions)
                    .map(|k| Ok((ctx.fork(parent)?, k as u64)))
                    .collect::<Result<Vec<_>>>()?;
                let children = ctx.extend(kids, &spec).await?;
                let priors = softmax(
                    &children
                        .iter()
                        .map(|c| {
                            ctx.with_tree(|t| t.get(c.node).and_then(|n| n.mean_logprob))
                                .unwrap_or(0.0) as f64
                        })
                        .collect::<Vec<_>>(),
                );
                let mut values = Vec::new();
                for (child, prior) in children.into_iter().zip(priors) {
                    let value = ctx.score(&child, self.params.score_by).await? as f64;
                    let terminal =
                        child.finished || child.last_stop != Some(crate::generator::StopKind::Stop);
                    if terminal {
                        ctx.add_candidate(&child, Some(value as f32));
                    }
                    stats.insert(
                        child.node,
                        Stats {
                            visits: 1,
                            value_sum: value,
                            prior,
                            children: Vec::new(),
                            terminal,
                            value,
                            depth: leaf.depth + 1,
                        },
                    );
                    if let Some(s) = stats.get_mut(&cur) {
                        s.children.push(child.node);
                    }
                    values.push(value);
                    branches.insert(child.node, child);
                }
                values
            };
            // Backup along the selected path.
            for node in &path {
                if let Some(s) = stats.get_mut(node) {
                    s.visits += values.len() as u32;
                    s.value_sum += values.iter().sum::<f64>();
                }
            }
        }
        ctx.with_tree(|t| {
            for (node, s) in &stats {
                t.note(*node, "visits", s.visits);
                t.note(*node, "q", s.q());
            }
        });
        for b in branches.values() {
            ctx.release(b);
        }
        if ctx.candidates().is_empty() {
            // No finished solution: the most visited leaf path becomes the candidate.
            let mut cur = SearchTree::ROOT;
            while let Some(next) = stats.get(&cur).and_then(|s| {
                s.children
                    .iter()
                    .copied()
                    .max_by_key(|c| (stats[c].visits, std::cmp::Reverse(*c)))
            }) {
                cur = next;
            }
            if let Some(b) = branches.get(&cur) {
                let score = stats.get(&cur).map(|s| s.q() as f32);
                ctx.add_candidate(b, score);
            }
        }
        Ok(self.select(&ctx.candidates()))
    }

    fn select(&self, candidates: &[Candidate]) -> Selection {
        select_best_score(candidates)
    }
}
