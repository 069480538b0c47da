//! AB-MCTS: adaptive-branching tree search over complete answers, deciding at every node by
//! Thompson sampling whether to go *wider* (a new answer) or *deeper* (refine an existing one).
//!
//! **Method** (Inoue et al. 2025, "Wider or Deeper? Scaling LLM Inference-Time Compute with
//! Adaptive Branching Tree Search", AB-MCTS-A as Sakana's TreeQuest implements it): a node of
//! the search is a *complete answer* with its score `r ∈ [0, 1]` (the verifier's, or the
//! model's confidence without one); the root is the bare question. Generating at a node (GEN)
//! makes a new child of it: at the root, a fresh answer sampled from the question; at an
//! answer, a *refinement* — the model is shown the question, that answer and its score and
//! asked for an improved solution. Each node has two arms: GEN, whose evidence is the scores of
//! the answers generated at the node, and CONT, whose evidence is the scores of everything
//! generated below its children. A selection walks from the root: it draws from both arms'
//! posteriors; if GEN wins (or the node has no child) it generates here (*wider*), otherwise it
//! picks a child by Thompson sampling over each child's subtree evidence and repeats there
//! (*deeper*). Posteriors (`posterior`): `beta` — `Beta(1 + Σr, 1 + Σ(1−r))`; `gaussian` — a
//! normal with unknown mean and variance under a Normal-Gamma prior (mean 0.5, κ 1, α 1, β 0.1),
//! whose mean is drawn via its precision. A new answer's score joins GEN at its parent, CONT at
//! every ancestor above, and the subtree evidence of its parent and every ancestor.
//!
//! Each iteration makes `batch` selections (TreeQuest's `ask_batch`), generates all their
//! answers in one engine call and scores them in one verifier submission (a finished answer
//! is cut into steps at `step_delimiter` for a PRM). With `pipeline`, `batch` answers are
//! generating at once instead: answer k starts as soon as answer k − batch is generated, chosen
//! with the evidence of every answer before k − batch in launch order, while answer k − batch
//! is scored beside the generations. So the engine keeps `batch` answers running instead of
//! waiting for the slowest of a round, a verifier's latency never leaves a lane idle, and no
//! selection depends on which answer finishes first (node numbers may). Its limit: under a
//! budget that binds, the last answers' share of what is left depends on which concurrent
//! answers have settled, so a replay can cut them at other lengths — rounds (the default)
//! replay exactly under any budget. Every answer is a candidate; the answer is the
//! best-scored finished one.
//!
//! **Parameters** ([`AbMctsParams`]): `iterations` (4), `batch` (2), `pipeline` (false),
//! `posterior` (`beta` | `gaussian`), `max_tokens` per answer (1024), `step_delimiter`
//! (`"\n\n"`), `score_by` (`prm_last`), `decoding`. Random draws use the context's seeded RNG,
//! so a seed replays the same tree.
//!
//! **Budget.** A fresh answer forks the question's cached prefix; a refinement is a new prompt
//! (question + previous answer) whose shared opening the engine serves from the search's kept
//! root prompt, so only the answer and the request after it are prefilled and charged; a
//! node's refinement prompt is kept for the search, so refining it again forks that prompt's
//! KV. One engine call and one verifier submission per round (per answer with `pipeline`).

use std::collections::HashMap;

use async_trait::async_trait;
use futures_util::future::{select, Either};
use futures_util::stream::{FuturesOrdered, StreamExt};
use rand::Rng;
use rand_distr::{Beta, Distribution, Gamma, Normal};
use serde::{Deserialize, Serialize};

use crate::context::{Branch, Context, StepSpec};
use crate::error::{GeneratorError, Result};
use crate::generator::Prompt;
use crate::outcome::{Candidate, Selection};
use crate::params::{positive, Decoding, ScoreBy};
use crate::select::{select_among, select_best_score};
use crate::strategy::Strategy;
use crate::tree::{NodeId, SearchTree};

/// The posterior family of the Thompson draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Posterior {
    /// Beta over scores in [0, 1].
    Beta,
    /// Normal with unknown mean and variance (Normal-Gamma prior).
    Gaussian,
}

/// Parameters of `ab_mcts`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AbMctsParams {
    /// Rounds of `batch` answers (`iterations × batch` answers in all).
    pub iterations: usize,
    /// Answers per round, or in flight at once with `pipeline`.
    pub batch: usize,
    /// Keep `batch` answers generating, each new selection as soon as the oldest is generated
    /// (scored beside the others), instead of rounds of one call each.
    pub pipeline: bool,
    /// Posterior family.
    pub posterior: Posterior,
    /// Most tokens per answer.
    pub max_tokens: usize,
    /// Where an answer is cut into the steps a PRM scores.
    pub step_delimiter: String,
    /// Score source.
    pub score_by: ScoreBy,
    /// Sampling.
    pub decoding: Decoding,
}

impl Default for AbMctsParams {
    fn default() -> Self {
        Self {
            iterations: 4,
            batch: 2,
            pipeline: false,
            posterior: Posterior::Beta,
            max_tokens: 1024,
            step_delimiter: "\n\n".into(),
            score_by: ScoreBy::PrmLast,
            decoding: Decoding::default(),
        }
    }
}

/// Scores seen by one arm.
#[derive(Debug, Clone, Default)]
struct Evidence(Vec<f64>);

impl Evidence {
    fn add(&mut self, r: f64) {
        self.0.push(r.clamp(0.0, 1.0));
    }

    /// One Thompson draw of the arm's mean score.
    fn draw(&self, posterior: Posterior, rng: &mut impl Rng) -> f64 {
        match posterior {
            Posterior::Beta => {
                let good: f64 = self.0.iter().sum();
                let bad = self.0.len() as f64 - good;
                Beta::new(1.0 + good, 1.0 + bad)
                    .map(|b| b.sample(rng))
                    .unwrap_or(0.5)
            }
            Posterior::Gaussian => {
                let (mu0, k0, a0, b0) = (0.5, 1.0, 1.0, 0.1);
                let n = self.0.len() as f64;
                let mean = if n > 0.0 {
                    self.0.iter().sum::<f64>() / n
                } else {
                    0.0
                };
                let ss: f64 = self.0.iter().map(|x| (x - mean).powi(2)).sum();
                let kn = k0 + n;
                let mun = (k0 * mu0 + n * mean) / kn;
                let an = a0 + n / 2.0;
                let bn = b0 + ss / 2.0 + k0 * n * (mean - mu0).powi(2) / (2.0 * kn);
                let tau = Gamma::new(an, 1.0 / bn)
                    .map(|g| g.sample(rng))
                    .unwrap_or(1.0)
                    .max(1e-9);
                Normal::new(mun, (1.0 / (kn * tau)).sqrt())
                    .map(|d| d.sample(rng))
                    .unwrap_or(mun)
            }
        }
    }
}

/// One node of the search: the root (the question) or an answer.
#[derive(Debug, Clone, Default)]
struct AbNode {
    /// The answer's text (empty at the root).
    text: String,
    /// Its score.
    score: f64,
    depth: usize,
    children: Vec<NodeId>,
    /// GEN: scores of the answers generated here.
    generated: Evidence,
    /// CONT: scores of everything generated below the children.
    deeper: Evidence,
    /// This node's score and everything below it.
    subtree: Evidence,
    parent: Option<NodeId>,
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
        positive("ab_mcts", "batch", params.batch)?;
        positive("ab_mcts", "max_tokens", params.max_tokens)?;
        params.decoding.validate("ab_mcts")?;
        Ok(Self { params })
    }

    /// One selection: the node to generate at, walking down while CONT wins.
    fn choose(&self, nodes: &HashMap<NodeId, AbNode>, rng: &mut impl Rng) -> NodeId {
        let post = self.params.posterior;
        let mut cur = SearchTree::ROOT;
        while let Some(node) = nodes.get(&cur) {
            if node.children.is_empty()
                || node.generated.draw(post, rng) >= node.deeper.draw(post, rng)
            {
                break;
            }
            let mut best = (f64::NEG_INFINITY, cur);
            for c in &node.children {
                let draw = nodes.get(c).map_or(0.0, |n| n.subtree.draw(post, rng));
                if draw > best.0 {
                    best = (draw, *c);
                }
            }
            if best.1 == cur {
                break;
            }
            cur = best.1;
        }
        cur
    }

    /// The branch to generate at `at`: a fork of the question (wider) or of `at`'s refinement
    /// prompt (deeper), counted in `moves` (wider, deeper). A node's refinement prompt is
    /// opened once and kept, so a node refined again forks its computed KV.
    async fn branch_at(
        &self,
        ctx: &Context,
        root: &Branch,
        nodes: &HashMap<NodeId, AbNode>,
        refine_roots: &mut HashMap<NodeId, Branch>,
        at: NodeId,
        moves: &mut (u32, u32),
    ) -> Result<Branch> {
        match nodes.get(&at) {
            Some(node) if at != SearchTree::ROOT => {
                moves.1 += 1;
                let opened = match refine_roots.get(&at) {
                    Some(b) => b.clone(),
                    None => ctx.open_with(&self.refine_prompt(ctx, node)).await?,
                };
                let fork = ctx.fork(&opened)?;
                refine_roots.insert(at, opened);
                Ok(fork)
            }
            _ => {
                moves.0 += 1;
                ctx.fork(root)
            }
        }
    }

    /// Generates the answer at `branch` (drawn with `draw`): the node it was generated at and
    /// the answer.
    async fn generate(
        &self,
        ctx: &Context,
        branch: Branch,
        draw: u64,
        spec: &StepSpec,
        at: NodeId,
    ) -> Result<(NodeId, Branch)> {
        let Some(answer) = ctx.extend(vec![(branch, draw)], spec).await?.pop() else {
            return Err(GeneratorError::Missing {
                what: "extension of a node",
            }
            .into());
        };
        Ok((at, answer))
    }

    /// Scores one generated answer: the node it was generated at, the answer and its score.
    async fn score_one(
        &self,
        ctx: &Context,
        at: NodeId,
        answer: Branch,
    ) -> Result<(NodeId, Branch, f64)> {
        let scores = self.scored(ctx, std::slice::from_ref(&answer)).await?;
        let Some(r) = scores.first() else {
            return Err(GeneratorError::Missing {
                what: "score of a node",
            }
            .into());
        };
        Ok((at, answer, *r as f64))
    }

    /// The verifier's scores of `answers`. If scoring fails (the budget cannot cover the
    /// verifier, a deadline), the answers are kept as unscored candidates first, so the search
    /// still ends with the best answer it generated.
    async fn scored(&self, ctx: &Context, answers: &[Branch]) -> Result<Vec<f32>> {
        let p = &self.params;
        match ctx
            .score_split(answers, p.score_by, &p.step_delimiter)
            .await
        {
            Ok(scores) => Ok(scores),
            Err(e) => {
                for answer in answers {
                    ctx.add_candidate(answer, None);
                }
                Err(e)
            }
        }
    }

    /// Records an answer generated at `at` with score `r`: a candidate, a new node, and its
    /// score added to GEN at `at`, to CONT above it and to every subtree on the way up.
    fn back_up(
        &self,
        ctx: &Context,
        nodes: &mut HashMap<NodeId, AbNode>,
        at: NodeId,
        answer: &Branch,
        r: f64,
    ) {
        let depth = nodes.get(&at).map_or(0, |n| n.depth) + 1;
        ctx.with_tree(|t| {
            t.note(answer.node, "ab_depth", depth);
            if at != SearchTree::ROOT {
                t.note(answer.node, "refines", at);
            }
        });
        ctx.add_candidate(answer, Some(r as f32));
        ctx.release(answer);
        let text = ctx.with_tree(|t| t.text(answer.node));
        let mut fresh = AbNode {
            text,
            score: r,
            depth,
            parent: Some(at),
            ..AbNode::default()
        };
        fresh.subtree.add(r);
        nodes.insert(answer.node, fresh);
        if let Some(n) = nodes.get_mut(&at) {
            n.children.push(answer.node);
            n.generated.add(r);
            n.subtree.add(r);
        }
        let mut up = nodes.get(&at).and_then(|n| n.parent);
        while let Some(a) = up {
            up = nodes.get_mut(&a).and_then(|n| {
                n.deeper.add(r);
                n.subtree.add(r);
                n.parent
            });
        }
    }

    /// The prompt that asks the model to refine `node`'s answer, shown with its score.
    fn refine_prompt(&self, ctx: &Context, node: &AbNode) -> Prompt {
        Prompt {
            system: ctx.problem().system.clone(),
            history: ctx.problem().history.clone(),
            user: format!(
                "{}\n\nHere is a previous attempt at this problem. A verifier scored it {:.2} out of 1.\n\n--- previous attempt ---\n{}\n--- end of previous attempt ---\n\nFind any mistake in it and write an improved solution step by step, separating the steps with a blank line, with the final answer in \\boxed{{}}.",
                ctx.problem().question,
                node.score,
                node.text.trim()
            ),
        }
    }
}

#[async_trait]
impl Strategy for AbMcts {
    fn name(&self) -> &str {
        "ab_mcts"
    }

    async fn search(&self, ctx: &Context) -> Result<Selection> {
        let p = &self.params;
        let root = ctx.open().await?;
        let spec = p.decoding.whole(p.max_tokens);
        let mut rng = ctx.rng(0xAB);
        let mut nodes: HashMap<NodeId, AbNode> = HashMap::new();
        nodes.insert(SearchTree::ROOT, AbNode::default());
        let mut refine_roots: HashMap<NodeId, Branch> = HashMap::new();
        let mut moves = (0u32, 0u32); // (wider, deeper)
        let mut launched = 0u64;
        if p.pipeline {
            let total = (p.iterations * p.batch) as u64;
            // Answers being generated, and generated answers being scored, each in launch
            // order. Answer k is chosen with the evidence of exactly the answers before
            // k - batch (so a replay grows the same tree) and starts as soon as answer
            // k - batch is generated: that answer's scoring runs beside the generations.
            let mut generating = FuturesOrdered::new();
            let mut scoring = FuturesOrdered::new();
            let mut backed_up = 0u64;
            loop {
                while launched < total
                    && generating.len() < p.batch
                    && backed_up >= launched.saturating_sub(p.batch as u64)
                {
                    let at = self.choose(&nodes, &mut rng);
                    let branch = self
                        .branch_at(ctx, &root, &nodes, &mut refine_roots, at, &mut moves)
                        .await?;
                    generating.push_back(self.generate(ctx, branch, launched, &spec, at));
                    launched += 1;
                }
                let event = match (generating.is_empty(), scoring.is_empty()) {
                    (true, true) => break,
                    (false, true) => Either::Right(generating.next().await),
                    (true, false) => Either::Left(scoring.next().await),
                    // Both kinds run at once; whichever is ready first is handled first.
                    (false, false) => match select(scoring.next(), generating.next()).await {
                        Either::Left((scored, _)) => Either::Left(scored),
                        Either::Right((generated, _)) => Either::Right(generated),
                    },
                };
                match event {
                    Either::Left(Some(scored)) => {
                        let (at, answer, r) = scored?;
                        self.back_up(ctx, &mut nodes, at, &answer, r);
                        backed_up += 1;
                    }
                    Either::Right(Some(generated)) => {
                        let (at, answer) = generated?;
                        scoring.push_back(self.score_one(ctx, at, answer));
                    }
                    Either::Left(None) | Either::Right(None) => {}
                }
            }
        } else {
            for _ in 0..p.iterations {
                let mut picks = Vec::with_capacity(p.batch);
                let mut requests = Vec::with_capacity(p.batch);
                for _ in 0..p.batch {
                    let at = self.choose(&nodes, &mut rng);
                    let branch = self
                        .branch_at(ctx, &root, &nodes, &mut refine_roots, at, &mut moves)
                        .await?;
                    requests.push((branch, launched));
                    picks.push(at);
                    launched += 1;
                }
                let answers = ctx.extend(requests, &spec).await?;
                let scores = self.scored(ctx, &answers).await?;
                for ((answer, r), at) in answers.iter().zip(scores).zip(picks) {
                    self.back_up(ctx, &mut nodes, at, answer, r as f64);
                }
            }
        }
        ctx.release(&root);
        for opened in refine_roots.values() {
            ctx.release(opened);
        }
        ctx.with_tree(|t| {
            t.note(SearchTree::ROOT, "wider", moves.0);
            t.note(SearchTree::ROOT, "deeper", moves.1);
        });
        Ok(self.select(&ctx.candidates()))
    }

    /// The best-scored finished answer (unfinished ones only when nothing finished).
    fn select(&self, candidates: &[Candidate]) -> Selection {
        select_among(candidates, |c| c.finished, select_best_score)
    }
}
