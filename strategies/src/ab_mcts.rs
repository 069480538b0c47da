//! AB-MCTS: adaptive-branching tree search that decides, at every node, whether to go *wider*
//! (sample a new child) or *deeper* (refine an existing child) by Thompson sampling.
//!
//! **Method** (after Inoue et al. 2025, "Wider or Deeper? Scaling LLM Inference-Time Compute
//! with Adaptive Branching Tree Search", AB-MCTS-A): each node has two arms. GEN's posterior is
//! `Beta(1 + Σr, 1 + Σ(1−r))` over the scores `r ∈ [0, 1]` of the children generated at that
//! node; CONT's posterior is the same over the scores found below its children by going deeper.
//! Each iteration walks from the root: sample both posteriors; if GEN's draw wins (or there is
//! no child to continue), generate one new child here; otherwise pick a child by Thompson
//! sampling over the children's own subtree posteriors and repeat there. The new node's PRM
//! score updates GEN at its parent and CONT at every ancestor above. So high scores from fresh
//! samples widen the tree, and high scores from refinements deepen it.
//!
//! **Parameters** ([`AbMctsParams`]): `iterations` (12), `steps`, `score_by` (`prm_last`),
//! `decoding`. Random draws use the context's seeded RNG, so a seed replays the same tree.
//!
//! **Budget.** One step (one engine call, one verifier call) per iteration, forked from the
//! chosen node's cached prefix.

use std::collections::HashMap;

use async_trait::async_trait;
use rand::Rng;
use rand_distr::{Beta, Distribution};
use serde::{Deserialize, Serialize};

use crate::context::{Branch, Context};
use crate::error::{Result, StrategyError};
use crate::generator::StopKind;
use crate::outcome::{Candidate, Selection};
use crate::params::{positive, Decoding, ScoreBy, Steps};
use crate::select::select_best_score;
use crate::strategy::Strategy;
use crate::tree::{NodeId, SearchTree};

/// Parameters of `ab_mcts`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AbMctsParams {
    /// Nodes generated (one per iteration).
    pub iterations: usize,
    /// Step settings.
    pub steps: Steps,
    /// Score source.
    pub score_by: ScoreBy,
    /// Sampling.
    pub decoding: Decoding,
}

impl Default for AbMctsParams {
    fn default() -> Self {
        Self {
            iterations: 12,
            steps: Steps::default(),
            score_by: ScoreBy::PrmLast,
            decoding: Decoding::default(),
        }
    }
}

/// Evidence gathered at one node: sums of `r` and `1 − r`.
#[derive(Debug, Clone, Copy, Default)]
struct Evidence {
    good: f64,
    bad: f64,
}

impl Evidence {
    fn add(&mut self, r: f64) {
        let r = r.clamp(0.0, 1.0);
        self.good += r;
        self.bad += 1.0 - r;
    }

    fn draw(&self, rng: &mut impl Rng) -> f64 {
        Beta::new(1.0 + self.good, 1.0 + self.bad)
            .map(|b| b.sample(rng))
            .unwrap_or(0.5)
    }
}

#[derive(Debug, Default)]
struct AbNode {
    generated: Evidence,
    deeper: Evidence,
    subtree: Evidence,
    children: Vec<NodeId>,
    terminal: bool,
    depth: usize,
}

/// Adaptive-branching MCTS.
#[derive(Debug, Clone)]
pub struct AbMcts {
    params: AbMctsParams,
}

impl AbMcts {
    /// Validates `params`.
    pub fn new(params: AbMctsParams) -> Result<Self> {
        positive("ab_mcts", "iterations", params.iterations)?;
        params.steps.validate("ab_mcts")?;
        params.decoding.validate("ab_mcts")?;
        Ok(Self { params })
    }
}

#[async_trait]
impl Strategy for AbMcts {
    fn name(&self) -> &str {
        "ab_mcts"
    }

    async fn search(&self, ctx: &Context) -> Result<Selection> {
        let root = ctx.open().await?;
        let spec = self.params.steps.spec(&self.params.decoding);
        let mut rng = ctx.rng(0xAB);
        let mut nodes: HashMap<NodeId, AbNode> = HashMap::new();
        let mut branches: HashMap<NodeId, Branch> = HashMap::new();
        nodes.insert(SearchTree::ROOT, AbNode::default());
        branches.insert(SearchTree::ROOT, root);
        let (mut wider, mut deeper) = (0u32, 0u32);
        for _ in 0..self.params.iterations {
            let mut path = vec![SearchTree::ROOT];
            let mut cur = SearchTree::ROOT;
            loop {
                let node = nodes
                    .get(&cur)
                    .ok_or_else(|| StrategyError::Generator("ab_mcts lost a node".into()))?;
                let open: Vec<NodeId> = node
                    .children
                    .iter()
                    .copied()
                    .filter(|c| {
                        nodes
                            .get(c)
                            .is_some_and(|n| !n.terminal && n.depth < self.params.steps.max_steps)
                    })
                    .collect();
                let go_wider =
                    open.is_empty() || node.generated.draw(&mut rng) >= node.deeper.draw(&mut rng);
                if go_wider {
                    wider += 1;
                    break;
                }
                deeper += 1;
                let mut best = (f64::NEG_INFINITY, open[0]);
                for c in open {
                    let draw = nodes[&c].subtree.draw(&mut rng);
                    if draw > best.0 {
                        best = (draw, c);
                    }
                }
                cur = best.1;
                path.push(cur);
            }
            let Some(parent) = branches.get(&cur) else {
                break;
            };
            let child = ctx.fork(parent)?;
            let seed_draw = nodes.get(&cur).map_or(0, |n| n.children.len() as u64);
            let Some(child) = ctx.extend(vec![(child, seed_draw)], &spec).await?.pop() else {
                break;
            };
            let r = ctx.score(&child, self.params.score_by).await? as f64;
            let terminal = child.finished || child.last_stop != Some(StopKind::Stop);
            let depth = nodes.get(&cur).map_or(0, |n| n.depth) + 1;
            if terminal {
                ctx.add_candidate(&child, Some(r as f32));
            }
            let mut fresh = AbNode {
                terminal,
                depth,
                ..AbNode::default()
            };
            fresh.subtree.add(r);
            nodes.insert(child.node, fresh);
            if let Some(n) = nodes.get_mut(&cur) {
                n.children.push(child.node);
                n.generated.add(r);
                n.subtree.add(r);
            }
            // Every ancestor above `cur` reached it by going deeper.
            for &a in &path[..path.len() - 1] {
                if let Some(n) = nodes.get_mut(&a) {
                    n.deeper.add(r);
                    n.subtree.add(r);
                }
            }
            branches.insert(child.node, child);
        }
        ctx.with_tree(|t| {
            t.note(SearchTree::ROOT, "wider", wider);
            t.note(SearchTree::ROOT, "deeper", deeper);
        });
        if ctx.candidates().is_empty() {
            // No finished solution: the best-scored node becomes the candidate.
            let best = ctx.with_tree(|t| {
                branches
                    .keys()
                    .copied()
                    .filter(|n| *n != SearchTree::ROOT)
                    .max_by(|a, b| {
                        let sa = t.get(*a).and_then(|n| n.score).unwrap_or(0.0);
                        let sb = t.get(*b).and_then(|n| n.score).unwrap_or(0.0);
                        sa.total_cmp(&sb).then(b.cmp(a))
                    })
            });
            if let Some(b) = best.and_then(|n| branches.get(&n)) {
                let score = ctx.with_tree(|t| t.get(b.node).and_then(|n| n.score));
                ctx.add_candidate(b, score);
            }
        }
        for b in branches.values() {
            ctx.release(b);
        }
        Ok(self.select(&ctx.candidates()))
    }

    fn select(&self, candidates: &[Candidate]) -> Selection {
        select_best_score(candidates)
    }
}
