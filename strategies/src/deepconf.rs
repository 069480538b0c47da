//! DeepConf: confidence-filtered parallel thinking with online early stopping.
//!
//! **Method** (Fu et al. 2025, "Deep Think with Confidence", online mode): a token's confidence
//! is the negative mean logprob of its top-k alternatives; a trace's *group confidence* is the
//! mean over a sliding window of tokens, and its quality is its lowest group confidence.
//! 1. Warm-up: `warmup` traces run to the end; the stop threshold `s` is the
//!    `(100 − keep_percent)`-th percentile of their lowest group confidences (DeepConf-high
//!    keeps 90%, DeepConf-low 10%).
//! 2. Online: the remaining traces advance in lockstep chunks; a trace whose lowest group
//!    confidence falls below `s` is stopped at once (its remaining tokens are saved).
//! 3. Vote: the surviving traces (and warm-up traces above `s`) vote, each weighted by its
//!    confidence.
//!
//! **Parameters** ([`DeepConfParams`]): `n` total traces (8), `warmup` (3), `window` (32 tokens),
//! `keep_percent` (90), `chunk_tokens` (32), `max_tokens` (1024), `decoding`.
//!
//! **Budget.** Warm-up is one batched call; then one call per chunk for every live trace. The
//! shared prompt is prefilled once; stopped traces free their share for the others.

use async_trait::async_trait;
use ponder_verifiers::lowest_group_confidence;
use serde::{Deserialize, Serialize};

use crate::beam_search::lowest_window;
use crate::context::{Branch, Context, StepSpec};
use crate::error::{Result, StrategyError};
use crate::lockstep::advance;
use crate::outcome::{Candidate, Selection};
use crate::params::{in_range, positive, Decoding};
use crate::select::{select_among, select_by_vote};
use crate::strategy::Strategy;

/// Parameters of `deepconf`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DeepConfParams {
    /// Traces in total (warm-up included).
    pub n: usize,
    /// Warm-up traces that set the threshold.
    pub warmup: usize,
    /// Sliding window, in tokens.
    pub window: usize,
    /// Percent of warm-up traces that would pass the threshold.
    pub keep_percent: f64,
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
            n: 8,
            warmup: 3,
            window: 32,
            keep_percent: 90.0,
            chunk_tokens: 32,
            max_tokens: 1024,
            decoding: Decoding::default(),
        }
    }
}

/// DeepConf online.
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
        positive("deepconf", "chunk_tokens", params.chunk_tokens)?;
        positive("deepconf", "max_tokens", params.max_tokens)?;
        in_range("deepconf", "keep_percent", params.keep_percent, 1.0, 100.0)?;
        params.decoding.validate("deepconf")?;
        Ok(Self { params })
    }

    /// A trace's quality: its lowest window confidence (its mean if shorter than a window).
    fn quality(&self, b: &Branch) -> f32 {
        lowest_group_confidence(&b.confidences, self.params.window).unwrap_or(0.0)
    }
}

#[async_trait]
impl Strategy for DeepConf {
    fn name(&self) -> &str {
        "deepconf"
    }

    async fn search(&self, ctx: &Context) -> Result<Selection> {
        let p = &self.params;
        let root = ctx.open().await?;
        let warm = (0..p.warmup)
            .map(|k| Ok((ctx.fork(&root)?, k as u64)))
            .collect::<Result<Vec<_>>>()?;
        let mut qualities = Vec::new();
        for b in ctx.extend(warm, &p.decoding.whole(p.max_tokens)).await? {
            let q = self.quality(&b);
            qualities.push(q);
            ctx.add_candidate(&b, Some(q));
            ctx.release(&b);
        }
        let threshold = percentile(&qualities, 100.0 - p.keep_percent).unwrap_or(0.0);
        ctx.with_tree(|t| t.note(crate::tree::SearchTree::ROOT, "threshold", threshold as f64));
        let mut active = (p.warmup..p.n)
            .map(|_| ctx.fork(&root))
            .collect::<Result<Vec<_>>>()?;
        ctx.release(&root);
        let chunk = StepSpec {
            max_tokens: p.chunk_tokens,
            ..p.decoding.whole(p.chunk_tokens)
        };
        while !active.is_empty() {
            let mut next = Vec::new();
            for (b, done) in advance(ctx, active, &chunk, p.max_tokens).await? {
                if lowest_window(&b.confidences, p.window).is_some_and(|c| c < threshold) {
                    ctx.with_tree(|t| t.note(b.node, "stopped_low_confidence", true));
                    ctx.prune(&b);
                } else if done {
                    ctx.add_candidate(&b, Some(self.quality(&b)));
                    ctx.release(&b);
                } else {
                    next.push(b);
                }
            }
            active = next;
        }
        Ok(self.filtered_vote(&ctx.candidates(), threshold))
    }

    fn select(&self, candidates: &[Candidate]) -> Selection {
        select_by_vote(candidates, true)
    }
}

impl DeepConf {
    /// Confidence-weighted vote over the candidates at or above the threshold.
    fn filtered_vote(&self, candidates: &[Candidate], threshold: f32) -> Selection {
        select_among(
            candidates,
            |c| c.score.is_some_and(|s| s >= threshold),
            |pool| select_by_vote(pool, true),
        )
    }
}
