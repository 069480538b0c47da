//! MCTS over reasoning steps with PUCT selection, verifier rewards and batched, virtual-loss
//! selection.
//!
//! **Method** (AlphaZero's PUCT, as used for LLM reasoning by e.g. rStar and ReST-MCTS*): each
//! iteration selects `batch` leaves. A selection walks from the root choosing, among the
//! children still open, the one maximising `Q(c) + c_puct · P(c) · √N(parent) / (1 + N(c))`,
//! where `Q` is the mean value backed up through `c`, `N` its visit count and `P` its prior —
//! the softmax of the mean token logprobs of the siblings sampled with it (how likely the model
//! found each step). A
//! node whose children are all closed (finished solutions, or at `max_steps`) is itself the
//! leaf and is widened with more children, so selection never stalls on a terminal node.
//! Between the selections of one iteration, every node on a selected path carries a *virtual
//! loss* (one visit of value 0), so the next selection prefers another path; the losses are
//! removed before the real values are backed up.
//!
//! Each selected leaf is expanded into `expansions` next steps, all leaves in one engine call.
//! A child the model ended is terminal: its value is the *terminal reward*, the verifier's
//! score of the complete solution, and it is a candidate. Any other child is valued by
//! `leaf_value`: `prm` (default) — the verifier's score of the partial solution; `rollout` — a
//! fork of the child is generated to the end (`rollout_tokens`, sampled) and the roll-out's
//! terminal reward is the child's value (the roll-out, a complete solution, is a candidate
//! too). Every value of an iteration is scored in one verifier submission and backed up along
//! its path. Without a verifier, values are the model's confidence.
//!
//! The answer (`select`): `value` (default) — the candidate with the highest reward; `visits`
//! — walk from the root to the most-visited child at every level (ties: higher `Q`), and take
//! the best candidate at or below where the walk ends (AlphaZero's robust child).
//!
//! **Parameters** ([`MctsParams`]): `iterations` (8), `batch` (2 leaves per iteration),
//! `expansions` (3), `c_puct` (1.5), `leaf_value` (`prm` | `rollout`), `rollout_tokens` (512),
//! `select` (`value` | `visits`), `steps`, `score_by` (`prm_last`), `decoding`.
//!
//! **Budget.** Per iteration one batched call of `batch × expansions` steps (plus one call for
//! the roll-outs) forked from the leaves' cached prefixes, and one verifier submission.

use std::collections::HashMap;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::context::{Branch, Context};
use crate::error::Result;
use crate::outcome::{Candidate, Selection};
use crate::params::{in_range, positive, Decoding, ScoreBy, Steps};
use crate::select::{select_among, select_best_score};
use crate::strategy::Strategy;
use crate::tree::{NodeId, SearchTree};

/// How a new non-terminal node is valued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LeafValue {
    /// The verifier's (PRM's) score of the partial solution.
    Prm,
    /// The terminal reward of a roll-out to the end.
    Rollout,
}

/// How the answer is picked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MctsSelect {
    /// The candidate with the highest reward.
    Value,
    /// The best candidate under the most-visited path.
    Visits,
}

/// Parameters of `mcts`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MctsParams {
    /// Selection–expansion–backup rounds.
    pub iterations: usize,
    /// Leaves selected (with virtual loss) and expanded together per iteration.
    pub batch: usize,
    /// Children sampled when a leaf is expanded.
    pub expansions: usize,
    /// Exploration constant.
    pub c_puct: f64,
    /// How a non-terminal node is valued.
    pub leaf_value: LeafValue,
    /// Most tokens of a roll-out.
    pub rollout_tokens: usize,
    /// How the answer is picked.
    pub select: MctsSelect,
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
            batch: 2,
            expansions: 3,
            c_puct: 1.5,
            leaf_value: LeafValue::Prm,
            rollout_tokens: 512,
            select: MctsSelect::Value,
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
    /// Finished solution, or at the step cap: never selected again.
    pub(crate) closed: bool,
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
        positive("mcts", "batch", params.batch)?;
        positive("mcts", "expansions", params.expansions)?;
        positive("mcts", "rollout_tokens", params.rollout_tokens)?;
        in_range("mcts", "c_puct", params.c_puct, 0.0, 100.0)?;
        params.steps.validate("mcts")?;
        params.decoding.validate("mcts")?;
        Ok(Self { params })
    }

    /// One selection from the root: the path to a leaf, through open children only.
    fn select_path(&self, stats: &HashMap<NodeId, Stats>) -> Vec<NodeId> {
        let mut path = vec![SearchTree::ROOT];
        let mut cur = SearchTree::ROOT;
        while let Some(s) = stats.get(&cur) {
            let parent_visits = s.visits.max(1);
            let score = |c: &NodeId| {
                let sc = &stats[c];
                puct(
                    sc.q(),
                    sc.prior,
                    parent_visits,
                    sc.visits,
                    self.params.c_puct,
                )
            };
            let best = s
                .children
                .iter()
                .filter(|c| stats.get(c).is_some_and(|x| !x.closed))
                .max_by(|a, b| score(a).total_cmp(&score(b)).then(b.cmp(a)));
            let Some(&next) = best else { break };
            path.push(next);
            cur = next;
        }
        path
    }
}

#[async_trait]
impl Strategy for Mcts {
    fn name(&self) -> &str {
        "mcts"
    }

    async fn search(&self, ctx: &Context) -> Result<Selection> {
        let p = &self.params;
        let root = ctx.open().await?;
        let spec = p.steps.spec(&p.decoding);
        let rollout = p.decoding.whole(p.rollout_tokens);
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
        for _ in 0..p.iterations {
            // Selection of `batch` distinct leaves, each path under a virtual loss.
            let mut selected: Vec<Vec<NodeId>> = Vec::new();
            for _ in 0..p.batch {
                let path = self.select_path(&stats);
                for n in &path {
                    if let Some(s) = stats.get_mut(n) {
                        s.visits += 1; // a visit of value 0
                    }
                }
                selected.push(path);
            }
            let mut paths: Vec<Vec<NodeId>> = Vec::new();
            for path in selected {
                for n in &path {
                    if let Some(s) = stats.get_mut(n) {
                        s.visits -= 1;
                    }
                }
                if !paths.iter().any(|q| q.last() == path.last()) {
                    paths.push(path);
                }
            }
            // Expansion of every leaf in one call.
            let mut kids = Vec::new();
            let mut owner = Vec::new();
            for (i, path) in paths.iter().enumerate() {
                let leaf = path.last().copied().unwrap_or(SearchTree::ROOT);
                let Some(parent) = branches.get(&leaf) else {
                    continue;
                };
                let drawn = stats.get(&leaf).map_or(0, |s| s.children.len());
                for k in 0..p.expansions {
                    kids.push((ctx.fork(parent)?, (drawn + k) as u64));
                    owner.push(i);
                }
            }
            let children = ctx.extend(kids, &spec).await?;
            // Roll-outs of the non-terminal children, in one call.
            let mut rolled: Vec<Option<usize>> = vec![None; children.len()];
            let mut outs = Vec::new();
            if p.leaf_value == LeafValue::Rollout {
                let mut requests = Vec::new();
                for (j, child) in children.iter().enumerate() {
                    if !child.finished {
                        rolled[j] = Some(requests.len());
                        requests.push((ctx.fork(child)?, 0));
                    }
                }
                outs = ctx.extend(requests, &rollout).await?;
            }
            // Evaluation: terminal rewards, PRM values or roll-out rewards, one submission.
            let to_score: Vec<Branch> = children
                .iter()
                .zip(&rolled)
                .map(|(child, r)| r.and_then(|r| outs.get(r)).unwrap_or(child).clone())
                .collect();
            // Roll-outs are whole solutions; PRM values are read off partial ones.
            let values = match p.leaf_value {
                LeafValue::Rollout => ctx.score_whole(&to_score, p.score_by).await?,
                LeafValue::Prm => ctx.score_batch(&to_score, p.score_by).await?,
            };
            // Priors: softmax of mean token logprobs over the siblings sampled together.
            let logprobs: Vec<f64> = children
                .iter()
                .map(|c| {
                    ctx.with_tree(|t| t.get(c.node).and_then(|n| n.mean_logprob))
                        .unwrap_or(0.0) as f64
                })
                .collect();
            let mut priors = vec![0.0; children.len()];
            for i in 0..paths.len() {
                let group: Vec<usize> = (0..children.len()).filter(|j| owner[*j] == i).collect();
                let soft = softmax(&group.iter().map(|j| logprobs[*j]).collect::<Vec<_>>());
                for (j, pr) in group.into_iter().zip(soft) {
                    priors[j] = pr;
                }
            }
            let mut backed: Vec<(f64, u32)> = vec![(0.0, 0); paths.len()];
            for (j, child) in children.into_iter().enumerate() {
                let value = values[j] as f64;
                let i = owner[j];
                let leaf = paths[i].last().copied().unwrap_or(SearchTree::ROOT);
                let depth = stats.get(&leaf).map_or(0, |s| s.depth) + 1;
                if child.finished {
                    ctx.with_tree(|t| t.note(child.node, "reward", value));
                    ctx.add_candidate(&child, Some(value as f32));
                    ctx.release(&child);
                } else if let Some(out) = rolled[j].and_then(|r| outs.get(r)) {
                    ctx.with_tree(|t| {
                        t.note(out.node, "rollout", true);
                        t.note(child.node, "rollout_value", value);
                        t.set_score(child.node, value as f32);
                    });
                    ctx.add_candidate(out, Some(value as f32));
                    ctx.release(out);
                }
                stats.insert(
                    child.node,
                    Stats {
                        visits: 1,
                        value_sum: value,
                        prior: priors[j],
                        children: Vec::new(),
                        closed: child.finished || depth >= p.steps.max_steps,
                        depth,
                    },
                );
                if let Some(s) = stats.get_mut(&leaf) {
                    s.children.push(child.node);
                }
                backed[i].0 += value;
                backed[i].1 += 1;
                branches.insert(child.node, child);
            }
            for (path, (sum, n)) in paths.iter().zip(backed) {
                for node in path {
                    if let Some(s) = stats.get_mut(node) {
                        s.visits += n;
                        s.value_sum += sum;
                    }
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
            let end = most_visited(&stats);
            if let Some(b) = branches.get(&end) {
                let score = stats.get(&end).map(|s| s.q() as f32);
                ctx.add_candidate(b, score);
            }
        }
        let candidates = ctx.candidates();
        Ok(match p.select {
            MctsSelect::Value => self.select(&candidates),
            MctsSelect::Visits => {
                let end = most_visited(&stats);
                let below: Vec<bool> = ctx.with_tree(|t| {
                    candidates
                        .iter()
                        .map(|c| t.path(c.node).contains(&end) || end == SearchTree::ROOT)
                        .collect()
                });
                let under: Vec<Candidate> = candidates
                    .iter()
                    .zip(&below)
                    .filter(|(_, b)| **b)
                    .map(|(c, _)| c.clone())
                    .collect();
                if under.is_empty() {
                    self.select(&candidates)
                } else {
                    let mut sel = self.select(&under);
                    sel.candidate = sel
                        .candidate
                        .and_then(|i| under.get(i))
                        .and_then(|c| candidates.iter().position(|x| x.node == c.node));
                    sel
                }
            }
        })
    }

    /// The highest-reward finished candidate (unfinished ones only when nothing finished).
    fn select(&self, candidates: &[Candidate]) -> Selection {
        select_among(candidates, |c| c.finished, select_best_score)
    }
}

/// The end of the walk from the root to the most-visited child at every level (ties: higher
/// `Q`, then the earlier node).
fn most_visited(stats: &HashMap<NodeId, Stats>) -> NodeId {
    let mut cur = SearchTree::ROOT;
    while let Some(next) = stats.get(&cur).and_then(|s| {
        s.children.iter().copied().max_by(|a, b| {
            let (sa, sb) = (&stats[a], &stats[b]);
            sa.visits
                .cmp(&sb.visits)
                .then(sa.q().total_cmp(&sb.q()))
                .then(b.cmp(a))
        })
    }) {
        cur = next;
    }
    cur
}
