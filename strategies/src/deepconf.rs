//! DeepConf: confidence-filtered parallel thinking, online (early stopping with a consensus
//! stop) or offline (filter all traces, then vote).
//!
//! **Method** (Fu et al. 2025, "Deep Think with Confidence"): a token's confidence is the
//! negative mean logprob of its top-k alternatives; a *group confidence* is the mean over a
//! sliding window of `window` tokens. A trace's confidence (`measure`) is its lowest group
//! confidence (`lowest_group`), the mean of its last `tail` tokens (`tail`), the mean of its
//! bottom 10% of groups (`bottom_10`) or its mean token confidence (`mean`).
//!
//! *Online* (`mode: online`, default):
//! 1. Warm-up: `warmup` traces run to the end in one batch; the stop threshold `s` is the
//!    `(100 − keep_percent)`-th percentile of their lowest group confidences (DeepConf-high
//!    keeps 90%, DeepConf-low 10%).
//! 2. The other `n − warmup` traces advance in lockstep chunks; a trace whose lowest group
//!    confidence (over full windows) falls below `s` is stopped at once.
//! 3. Consensus stop: after the warm-up and after every chunk, the traces at or above `s`
//!    vote, each weighted by its confidence; once the leader's share of the weight is at
//!    least `consensus` (τ) and at least `consensus_min_votes` kept traces gave its answer, the
//!    traces still running are stopped and the leader is the answer (`consensus: null` turns
//!    the stop off). The vote count keeps a share of 1.0 over one or two finished traces — a
//!    warm-up of three where two agree — from ending a search on no evidence; the paper's
//!    hundreds of traces never meet that case.
//!
//! *Offline* (`mode: offline`): all `n` traces run to the end in one batch; the top
//! `keep_percent` of them by `measure` (at least one) vote, each weighted by its confidence.
//!
//! **Defaults, scaled from the paper's.** The paper runs up to 512 traces of ~10k tokens with
//! 16 warm-up traces, a 2,048-token window, η ∈ {10%, 90%} and τ = 0.95. Here a search affords
//! a few traces of a few hundred tokens: `n` 8, `warmup` 3, `window` 32 and `tail` 64 (about the
//! same fraction of a trace as the paper's 2,048 of ~10k–15k), `keep_percent` 90 (DeepConf-high,
//! the paper's safe setting), `consensus` 0.95 (the paper's τ), `measure` `lowest_group` (the
//! online rule's own; the paper finds `tail` and `bottom_10` as good offline), `chunk_tokens`
//! 32, `max_tokens` 1024.
//!
//! **Parameters** ([`DeepConfParams`]): `mode`, `n`, `warmup`, `window`, `tail`, `measure`,
//! `keep_percent`, `consensus`, `consensus_min_votes` (default 4), `chunk_tokens`,
//! `max_tokens`, `decoding`. Every trace has its
//! own draw id, so no two traces open alike.
//!
//! **Budget.** Warm-up (or offline: everything) is one batched call; then one call per chunk
//! for every live trace. The shared prompt is prefilled once; stopped traces free their share.

use async_trait::async_trait;
use ponder_verifiers::{
    bottom_percent_confidence, lowest_group_confidence, tail_confidence, weighted_vote,
};
use serde::{Deserialize, Serialize};

use crate::beam_search::lowest_window;
use crate::context::{Branch, Context, StepSpec};
use crate::error::{Result, StrategyError};
use crate::lockstep::advance;
use crate::outcome::{Candidate, Selection};
use crate::params::{in_range, positive, Decoding};
use crate::select::{select_among, select_by_vote};
use crate::strategy::Strategy;
use crate::tree::SearchTree;

/// Online (early stopping) or offline (filter, then vote).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeepConfMode {
    /// Warm-up, threshold, early stopping, consensus stop.
    Online,
    /// All traces, keep the most confident, weighted vote.
    Offline,
}

/// How a trace's confidence is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConfidenceMeasure {
    /// Lowest sliding-window group confidence.
    LowestGroup,
    /// Mean confidence of the last `tail` tokens.
    Tail,
    /// Mean of the lowest 10% of group confidences.
    #[serde(rename = "bottom_10")]
    Bottom10,
    /// Mean token confidence.
    Mean,
}

/// Parameters of `deepconf`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DeepConfParams {
    /// Online or offline.
    pub mode: DeepConfMode,
    /// Traces in total (warm-up included).
    pub n: usize,
    /// Warm-up traces that set the threshold (online).
    pub warmup: usize,
    /// Sliding window, in tokens.
    pub window: usize,
    /// Tokens of the tail measure.
    pub tail: usize,
    /// Trace confidence used for filtering and vote weights.
    pub measure: ConfidenceMeasure,
    /// Percent of traces kept (offline) or of warm-up traces that would pass (online).
    pub keep_percent: f64,
    /// Stop once the leader holds this share of the weighted vote (online; `null`: never).
    pub consensus: Option<f64>,
    /// ... and at least this many kept traces gave the leader's answer.
    pub consensus_min_votes: usize,
    /// Tokens per lockstep chunk.
    pub chunk_tokens: usize,
    /// Most tokens per trace.
    pub max_tokens: usize,
    /// Sampling.
    pub decoding: Decoding,
}

impl Default for DeepConfParams {
    fn default() -> Self {
        Self {
            mode: DeepConfMode::Online,
            n: 8,
            warmup: 3,
            window: 32,
            tail: 64,
            measure: ConfidenceMeasure::LowestGroup,
            keep_percent: 90.0,
            consensus: Some(0.95),
            consensus_min_votes: 4,
            chunk_tokens: 32,
            max_tokens: 1024,
            decoding: Decoding::default(),
        }
    }
}

/// DeepConf, online or offline.
#[derive(Debug, Clone)]
pub struct DeepConf {
    params: DeepConfParams,
}

/// The `q`-th percentile (0–100) of `xs` by linear interpolation; `None` if empty.
pub fn percentile(xs: &[f32], q: f64) -> Option<f32> {
    if xs.is_empty() {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(f32::total_cmp);
    let pos = (q / 100.0).clamp(0.0, 1.0) * (v.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    let t = (pos - lo as f64) as f32;
    Some(v[lo] + (v[hi] - v[lo]) * t)
}

impl DeepConf {
    /// Validates `params`.
    pub fn new(params: DeepConfParams) -> Result<Self> {
        positive("deepconf", "n", params.n)?;
        positive("deepconf", "warmup", params.warmup)?;
        if params.warmup > params.n {
            return Err(StrategyError::invalid(
                "deepconf",
                "warmup",
                format!("must be at most n ({}), got {}", params.n, params.warmup),
            ));
        }
        positive("deepconf", "window", params.window)?;
        positive("deepconf", "tail", params.tail)?;
        positive("deepconf", "chunk_tokens", params.chunk_tokens)?;
        positive("deepconf", "max_tokens", params.max_tokens)?;
        in_range("deepconf", "keep_percent", params.keep_percent, 1.0, 100.0)?;
        if let Some(tau) = params.consensus {
            in_range("deepconf", "consensus", tau, 0.5, 1.0)?;
        }
        positive(
            "deepconf",
            "consensus_min_votes",
            params.consensus_min_votes,
        )?;
        params.decoding.validate("deepconf")?;
        Ok(Self { params })
    }

    /// A trace's lowest group confidence (its mean if shorter than a window): the online
    /// rule's threshold measure.
    fn lowest(&self, b: &Branch) -> f32 {
        lowest_group_confidence(&b.confidences, self.params.window).unwrap_or(0.0)
    }

    /// A trace's confidence by `measure`.
    fn confidence(&self, b: &Branch) -> f32 {
        let c = &b.confidences;
        let w = self.params.window;
        match self.params.measure {
            ConfidenceMeasure::LowestGroup => lowest_group_confidence(c, w),
            ConfidenceMeasure::Tail => tail_confidence(c, self.params.tail),
            ConfidenceMeasure::Bottom10 => bottom_percent_confidence(c, w, 10.0),
            ConfidenceMeasure::Mean => (!c.is_empty()).then(|| b.mean_confidence()),
        }
        .unwrap_or(0.0)
    }

    /// Records a finished trace: its confidence as the candidate's score, and whether it
    /// passed the threshold.
    fn record(&self, ctx: &Context, b: &Branch, passed: bool) {
        ctx.with_tree(|t| t.note(b.node, "kept", passed));
        ctx.add_candidate(b, Some(self.confidence(b)));
        ctx.release(b);
    }

    /// The leader's share of the confidence-weighted vote of the kept traces, and how many
    /// kept traces gave its answer.
    fn leader_share(candidates: &[Candidate], kept: &[bool]) -> Option<(f64, usize)> {
        let votes: Vec<(&str, f64)> = candidates
            .iter()
            .zip(kept)
            .filter(|(_, k)| **k)
            .filter_map(|(c, _)| Some((c.answer.as_deref()?, c.score? as f64)))
            .collect();
        let vote = weighted_vote(votes.iter().copied())?;
        // The same answers in the same order group alike, so the unweighted vote's group with
        // the leader's representative is the leader's group.
        let count = weighted_vote(votes.iter().map(|(a, _)| (*a, 1.0)))?
            .groups
            .iter()
            .find(|g| g.0 == vote.answer)
            .map_or(0, |g| g.1 as usize);
        (vote.total > 0.0).then(|| (vote.support / vote.total, count))
    }

    async fn online(&self, ctx: &Context, root: &Branch) -> Result<Selection> {
        let p = &self.params;
        let warm = (0..p.warmup)
            .map(|k| Ok((ctx.fork(root)?, k as u64)))
            .collect::<Result<Vec<_>>>()?;
        let warm = ctx.extend(warm, &p.decoding.whole(p.max_tokens)).await?;
        let lows: Vec<f32> = warm.iter().map(|b| self.lowest(b)).collect();
        let threshold = percentile(&lows, 100.0 - p.keep_percent).unwrap_or(0.0);
        ctx.with_tree(|t| t.note(SearchTree::ROOT, "threshold", threshold as f64));
        let mut kept = Vec::new();
        for (b, low) in warm.iter().zip(&lows) {
            self.record(ctx, b, *low >= threshold);
            kept.push(*low >= threshold);
        }
        let mut active = (p.warmup..p.n)
            .map(|k| Ok((k as u64, ctx.fork(root)?)))
            .collect::<Result<Vec<_>>>()?;
        let chunk = StepSpec {
            max_tokens: p.chunk_tokens,
            ..p.decoding.whole(p.chunk_tokens)
        };
        loop {
            let share = Self::leader_share(&ctx.candidates(), &kept);
            if let (Some((share, votes)), Some(tau)) = (share, p.consensus) {
                if share >= tau && votes >= p.consensus_min_votes {
                    ctx.with_tree(|t| t.note(SearchTree::ROOT, "consensus", share));
                    for (_, b) in &active {
                        ctx.with_tree(|t| t.note(b.node, "stopped_consensus", true));
                        ctx.prune(b);
                    }
                    break;
                }
            }
            if active.is_empty() {
                break;
            }
            let mut next = Vec::new();
            for (id, b, done) in advance(ctx, active, &chunk, p.max_tokens).await? {
                if lowest_window(&b.confidences, p.window).is_some_and(|c| c < threshold) {
                    ctx.with_tree(|t| t.note(b.node, "stopped_low_confidence", true));
                    ctx.prune(&b);
                } else if done {
                    self.record(ctx, &b, true);
                    kept.push(true);
                } else {
                    next.push((id, b));
                }
            }
            active = next;
        }
        Ok(Self::vote(&ctx.candidates(), &kept))
    }

    async fn offline(&self, ctx: &Context, root: &Branch) -> Result<Selection> {
        let p = &self.params;
        let all = (0..p.n)
            .map(|k| Ok((ctx.fork(root)?, k as u64)))
            .collect::<Result<Vec<_>>>()?;
        let traces = ctx.extend(all, &p.decoding.whole(p.max_tokens)).await?;
        let confs: Vec<f32> = traces.iter().map(|b| self.confidence(b)).collect();
        let keep = ((p.keep_percent / 100.0 * p.n as f64).ceil() as usize).clamp(1, p.n);
        let mut order: Vec<usize> = (0..traces.len()).collect();
        order.sort_by(|a, b| confs[*b].total_cmp(&confs[*a]).then(a.cmp(b)));
        let mut kept = vec![false; traces.len()];
        for i in order.into_iter().take(keep) {
            kept[i] = true;
        }
        for (b, k) in traces.iter().zip(&kept) {
            self.record(ctx, b, *k);
        }
        Ok(Self::vote(&ctx.candidates(), &kept))
    }

    /// Confidence-weighted vote over the kept traces (all, if none was kept).
    fn vote(candidates: &[Candidate], kept: &[bool]) -> Selection {
        let nodes: Vec<usize> = candidates
            .iter()
            .zip(kept)
            .filter(|(_, k)| **k)
            .map(|(c, _)| c.node)
            .collect();
        select_among(
            candidates,
            |c| nodes.contains(&c.node),
            |pool| select_by_vote(pool, true),
        )
    }
}

#[async_trait]
impl Strategy for DeepConf {
    fn name(&self) -> &str {
        "deepconf"
    }

    async fn search(&self, ctx: &Context) -> Result<Selection> {
        let root = ctx.open().await?;
        let result = match self.params.mode {
            DeepConfMode::Online => self.online(ctx, &root).await,
            DeepConfMode::Offline => self.offline(ctx, &root).await,
        };
        ctx.release(&root);
        result
    }

    fn select(&self, candidates: &[Candidate]) -> Selection {
        select_by_vote(candidates, true)
    }
}
