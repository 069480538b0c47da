//! Adaptive parallel thinking: start narrow, widen while the answers disagree, prune traces
//! that lose confidence, then join the survivors by vote or by a synthesis pass.
//!
//! **Method.** Combines three published ideas over one tree, in one lockstep loop:
//! - *a posterior stopping rule* (Aggarwal et al. 2023, "Let's Sample Step by Step:
//!   Adaptive-Consistency"): with `v1`, `v2` votes for the two leading answers among the
//!   finished traces, the probability that the leader is the true majority under a uniform
//!   prior is `P(Beta(v1+1, v2+1) > 1/2) = P(Binomial(v1+v2+1, 1/2) ≤ v1)`. It is checked
//!   every time a trace finishes; once it reaches `stop_confidence` the vote is decided and the
//!   traces still running are stopped. With the default 0.95 that takes 4 agreeing answers
//!   (4–0: 0.969; 3–0 is 0.938) or e.g. 6–1;
//! - *widening while earlier traces still run*: `initial` traces start; whenever a trace
//!   finishes and the vote is undecided, new traces (at most `grow` at a time, `max_n` in
//!   all) join the running ones — as many as the leader still needs to be decided if every
//!   running trace agreed with it, less those running. They fork the cached prompt and advance
//!   in the same batches as the traces already running. The strategy looks every
//!   `chunk_tokens` tokens, so a trace that ends waits at most that long to be counted: a
//!   short interval keeps the batch full where a long one leaves finished lanes idle until
//!   the chunk ends and starts each widening late;
//! - *pruning during generation* (DeepConf-style): after every chunk, a trace whose lowest
//!   window confidence is below `prune_ratio` × the median over all traces with a full window
//!   (running and finished, at least two) is stopped;
//! - *joining* (Pan et al. 2025, "Learning Adaptive Parallel Reasoning"; the aggregation pass of
//!   parallel-thinking systems): `join = vote` takes the majority of the finished traces;
//!   `join = synthesize` opens a fresh prompt listing the answers with their vote counts and
//!   decodes a final `\boxed{}` answer greedily.
//!
//! **Parameters** ([`AdaptiveParallelParams`]): `initial` (4: the fewest agreeing answers
//! that decide at the default `stop_confidence`, so an easy question is decided by its first
//! round — fewer never saves a token, only adds a round), `grow` (8: a widening launches
//! every trace the leader still needs, not a fraction of them per round), `max_n` (8),
//! `stop_confidence` (0.95), `prune_ratio` (0.8), `window` (32), `chunk_tokens` (16),
//! `max_tokens` (1024), `join` (`vote`), `synthesis_tokens` (256), `decoding`. Every trace has
//! its own draw id for the whole search, so no two traces open alike.
//!
//! **Budget.** One batched call per chunk for every running trace, all forked from the cached
//! prompt; easy questions stop at 4 agreeing traces, hard ones grow to `max_n`.

use async_trait::async_trait;
use ponder_verifiers::majority_vote;
use serde::{Deserialize, Serialize};

use crate::beam_search::lowest_window;
use crate::context::{Branch, Context, StepSpec};
use crate::error::{Result, StrategyError};
use crate::generator::{Prompt, Sampling};
use crate::lockstep::{advance, Trace};
use crate::outcome::Selection;
use crate::params::{in_range, positive, Decoding};
use crate::select::{select_among, select_by_vote};
use crate::strategy::Strategy;
use crate::tree::SearchTree;

/// How the survivors are joined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Join {
    /// Majority vote.
    Vote,
    /// A synthesis pass over the survivors' answers.
    Synthesize,
}

/// Parameters of `adaptive_parallel`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdaptiveParallelParams {
    /// Traces in the first round.
    pub initial: usize,
    /// Traces added per round while the answers disagree.
    pub grow: usize,
    /// Most traces in total.
    pub max_n: usize,
    /// Stop once the leader is the majority with at least this posterior probability.
    pub stop_confidence: f64,
    /// Stop a trace whose confidence is below this fraction of its peers' median.
    pub prune_ratio: f64,
    /// Window (tokens) of the confidence used for pruning.
    pub window: usize,
    /// Tokens per lockstep chunk.
    pub chunk_tokens: usize,
    /// Most tokens per trace.
    pub max_tokens: usize,
    /// How to join the survivors.
    pub join: Join,
    /// Most tokens of the synthesis pass.
    pub synthesis_tokens: usize,
    /// Sampling.
    pub decoding: Decoding,
}

impl Default for AdaptiveParallelParams {
    fn default() -> Self {
        Self {
            initial: 4,
            grow: 8,
            max_n: 8,
            stop_confidence: 0.95,
            prune_ratio: 0.8,
            window: 32,
            chunk_tokens: 16,
            max_tokens: 1024,
            join: Join::Vote,
            synthesis_tokens: 256,
            decoding: Decoding::default(),
        }
    }
}

/// `P(Binomial(n, 1/2) ≥ k)`, exactly (n is small).
fn binomial_half_tail(n: u32, k: u32) -> f64 {
    let mut total = 0.0;
    let mut c = 1.0f64; // C(n, 0)
    for i in 0..=n {
        if i >= k {
            total += c;
        }
        c = c * (n - i) as f64 / (i + 1) as f64;
    }
    total / 2f64.powi(n as i32)
}

/// Posterior probability that the answer with `v1` votes beats the one with `v2`.
pub fn leader_probability(v1: u32, v2: u32) -> f64 {
    1.0 - binomial_half_tail(v1 + v2 + 1, v1 + 1)
}

/// Adaptive parallel thinking.
#[derive(Debug, Clone)]
pub struct AdaptiveParallel {
    params: AdaptiveParallelParams,
}

impl AdaptiveParallel {
    /// Validates `params`.
    pub fn new(params: AdaptiveParallelParams) -> Result<Self> {
        let n = "adaptive_parallel";
        positive(n, "initial", params.initial)?;
        positive(n, "grow", params.grow)?;
        if params.max_n < params.initial {
            return Err(StrategyError::invalid(
                n,
                "max_n",
                format!(
                    "must be at least initial ({}), got {}",
                    params.initial, params.max_n
                ),
            ));
        }
        in_range(n, "stop_confidence", params.stop_confidence, 0.5, 1.0)?;
        in_range(n, "prune_ratio", params.prune_ratio, 0.0, 1.0)?;
        positive(n, "window", params.window)?;
        positive(n, "chunk_tokens", params.chunk_tokens)?;
        positive(n, "max_tokens", params.max_tokens)?;
        positive(n, "synthesis_tokens", params.synthesis_tokens)?;
        params.decoding.validate(n)?;
        Ok(Self { params })
    }

    /// The vote among the finished traces: the top two vote counts.
    fn votes(ctx: &Context) -> (u32, u32) {
        let candidates = ctx.candidates();
        let Some(vote) = majority_vote(
            candidates
                .iter()
                .filter(|c| c.finished)
                .filter_map(|c| c.answer.as_deref()),
        ) else {
            return (0, 0);
        };
        let mut counts: Vec<f64> = vote.groups.iter().map(|g| g.1).collect();
        counts.sort_by(|a, b| b.total_cmp(a));
        let v1 = counts.first().copied().unwrap_or(0.0) as u32;
        let v2 = counts.get(1).copied().unwrap_or(0.0) as u32;
        (v1, v2)
    }

    /// Whether the vote so far is decided.
    fn decided(&self, ctx: &Context) -> bool {
        let (v1, v2) = Self::votes(ctx);
        v1 > 0 && leader_probability(v1, v2) >= self.params.stop_confidence
    }

    /// More agreeing votes the leader needs to be decided (at most `max_n`).
    fn needed(&self, ctx: &Context) -> usize {
        let (v1, v2) = Self::votes(ctx);
        (0..=self.params.max_n)
            .find(|k| leader_probability(v1 + *k as u32, v2) >= self.params.stop_confidence)
            .unwrap_or(self.params.max_n)
            .max(1)
    }

    /// Starts `count` traces from `root`, ids from `*next_id` on.
    fn launch(ctx: &Context, root: &Branch, count: usize, next_id: &mut u64) -> Result<Vec<Trace>> {
        (0..count)
            .map(|_| {
                let id = *next_id;
                *next_id += 1;
                Ok((id, ctx.fork(root)?))
            })
            .collect()
    }

    /// The synthesis pass: a fresh prompt with the survivors' answers and their votes.
    async fn synthesize(&self, ctx: &Context) -> Result<Selection> {
        let candidates = ctx.candidates();
        let Some(vote) = majority_vote(candidates.iter().filter_map(|c| c.answer.as_deref()))
        else {
            return Ok(select_by_vote(&candidates, false));
        };
        let listing: String = vote
            .groups
            .iter()
            .map(|(a, v)| format!("- {a} ({v} of {} solutions)\n", vote.total))
            .collect();
        let user = format!(
            "{}\n\nIndependent solutions reached these final answers:\n{listing}\nCheck them and give the correct final answer in \\boxed{{}}.",
            ctx.problem().question
        );
        let prompt = Prompt {
            system: ctx.problem().system.clone(),
            history: ctx.problem().history.clone(),
            user,
        };
        let judge = ctx.open_with(&prompt).await?;
        let spec = StepSpec {
            max_tokens: self.params.synthesis_tokens,
            stop: Vec::new(),
            sampling: Sampling::greedy(self.params.decoding.top_logprobs),
        };
        let Some(done) = ctx.extend(vec![(judge, 0)], &spec).await?.pop() else {
            return Ok(select_by_vote(&candidates, false));
        };
        ctx.with_tree(|t| t.note(done.node, "synthesis", true));
        let i = ctx.add_candidate(&done, None);
        let answer = ctx
            .candidates()
            .get(i)
            .and_then(|c| c.answer.clone())
            .or(Some(vote.answer));
        Ok(Selection {
            answer,
            candidate: Some(i),
            support: None,
        })
    }
}

#[async_trait]
impl Strategy for AdaptiveParallel {
    fn name(&self) -> &str {
        "adaptive_parallel"
    }

    async fn search(&self, ctx: &Context) -> Result<Selection> {
        let p = &self.params;
        let root = ctx.open().await?;
        let chunk = StepSpec {
            max_tokens: p.chunk_tokens,
            ..p.decoding.whole(p.chunk_tokens)
        };
        let mut next_id = 0u64;
        let mut active = Self::launch(ctx, &root, p.initial, &mut next_id)?;
        let mut launched = p.initial;
        let mut widenings = 0usize;
        // Lowest window confidence of every finished trace (peers for the pruning median).
        let mut finished_lows: Vec<f32> = Vec::new();
        while !active.is_empty() {
            let advanced = advance(ctx, active, &chunk, p.max_tokens).await?;
            let mut windows: Vec<f32> = advanced
                .iter()
                .filter_map(|(_, b, _)| lowest_window(&b.confidences, p.window))
                .chain(finished_lows.iter().copied())
                .collect();
            windows.sort_by(f32::total_cmp);
            let median = (windows.len() >= 2).then(|| {
                let m = windows.len() / 2;
                if windows.len().is_multiple_of(2) {
                    (windows[m - 1] + windows[m]) / 2.0
                } else {
                    windows[m]
                }
            });
            active = Vec::new();
            let mut finished_now = false;
            for (id, b, done) in advanced {
                let low = lowest_window(&b.confidences, p.window);
                if let (Some(m), Some(c)) = (median, low) {
                    if c < p.prune_ratio as f32 * m {
                        ctx.with_tree(|t| t.note(b.node, "pruned_low_confidence", true));
                        ctx.prune(&b);
                        continue;
                    }
                }
                if done {
                    finished_now = true;
                    finished_lows.extend(low);
                    ctx.add_candidate(&b, Some(b.mean_confidence()));
                    ctx.release(&b);
                } else {
                    active.push((id, b));
                }
            }
            if self.decided(ctx) {
                for (_, b) in &active {
                    ctx.with_tree(|t| t.note(b.node, "stopped_decided", true));
                    ctx.prune(b);
                }
                break;
            }
            if (finished_now || active.is_empty()) && launched < p.max_n {
                let want = self.needed(ctx).saturating_sub(active.len());
                let more = want.min(p.grow).min(p.max_n - launched);
                if more > 0 {
                    active.extend(Self::launch(ctx, &root, more, &mut next_id)?);
                    launched += more;
                    widenings += 1;
                }
            }
        }
        let rounds = widenings + 1;
        ctx.release(&root);
        ctx.with_tree(|t| {
            t.note(SearchTree::ROOT, "rounds", rounds);
            t.note(SearchTree::ROOT, "launched", launched);
        });
        match p.join {
            Join::Vote => Ok(select_among(
                &ctx.candidates(),
                |c| c.finished,
                |pool| select_by_vote(pool, false),
            )),
            Join::Synthesize => self.synthesize(ctx).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leader_probability_matches_known_values() {
        // Beta(3,1): P(X > 1/2) = 1 - 0.5^3 = 0.875.
        assert!((leader_probability(2, 0) - 0.875).abs() < 1e-12);
        assert!((leader_probability(1, 1) - 0.5).abs() < 1e-12);
        assert!(leader_probability(5, 0) > 0.98);
    }
}
