//! First-finish and short-m@k: launch k traces, keep the first to finish.
//!
//! **Method** (Hassid et al. 2025, "Don't Overthink It: Preferring Shorter Thinking Chains";
//! the first-finish-search observation that among parallel traces the shortest is most often
//! right): k traces advance in lockstep chunks; as soon as `m` have finished, the rest are
//! cancelled. `first_finish` (m = 1) returns the shortest finisher; `short_m_of_k` votes among
//! the first m, ties going to the shorter trace. Finishers within one chunk are ordered by
//! length, then launch order — deterministic, whatever the engine's timing.
//!
//! **Parameters** ([`FirstFinishParams`]): `k` (8), `m` (1 / 3), `chunk_tokens` (32),
//! `max_tokens` (1024), `decoding`.
//!
//! **Budget.** One call per chunk for the live traces; everything after the m-th finisher is
//! never generated. If the budget ends first, the finishers so far vote.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::context::{Branch, Context, StepSpec};
use crate::error::{Result, StrategyError};
use crate::lockstep::advance;
use crate::outcome::{Candidate, Selection};
use crate::params::{positive, Decoding};
use crate::select::select_by_vote;
use crate::strategy::Strategy;

/// Parameters of `first_finish` and `short_m_of_k`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FirstFinishParams {
    /// Traces launched.
    pub k: usize,
    /// Finishers to wait for.
    pub m: usize,
    /// Tokens per lockstep chunk.
    pub chunk_tokens: usize,
    /// Most tokens per trace.
    pub max_tokens: usize,
    /// Sampling.
    pub decoding: Decoding,
}

impl Default for FirstFinishParams {
    fn default() -> Self {
        Self {
            k: 8,
            m: 1,
            chunk_tokens: 32,
            max_tokens: 1024,
            decoding: Decoding::default(),
        }
    }
}

/// Parameters of `short_m_of_k` (defaults m = 3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ShortMofKParams(pub FirstFinishParams);

impl Default for ShortMofKParams {
    fn default() -> Self {
        Self(FirstFinishParams {
            m: 3,
            ..FirstFinishParams::default()
        })
    }
}

/// First-finish (m = 1) or short-m@k.
#[derive(Debug, Clone)]
pub struct FirstFinish {
    params: FirstFinishParams,
    name: &'static str,
}

impl FirstFinish {
    /// `first_finish`: m must be 1.
    pub fn first(params: FirstFinishParams) -> Result<Self> {
        if params.m != 1 {
            return Err(StrategyError::invalid(
                "first_finish",
                "m",
                format!("is always 1 (use short_m_of_k for m > 1), got {}", params.m),
            ));
        }
        Self::validate(params, "first_finish")
    }

    /// `short_m_of_k`.
    pub fn short_m_of_k(params: ShortMofKParams) -> Result<Self> {
        Self::validate(params.0, "short_m_of_k")
    }

    fn validate(params: FirstFinishParams, name: &'static str) -> Result<Self> {
        positive(name, "k", params.k)?;
        positive(name, "m", params.m)?;
        if params.m > params.k {
            return Err(StrategyError::invalid(
                name,
                "m",
                format!("must be at most k ({}), got {}", params.k, params.m),
            ));
        }
        positive(name, "chunk_tokens", params.chunk_tokens)?;
        positive(name, "max_tokens", params.max_tokens)?;
        params.decoding.validate(name)?;
        Ok(Self { params, name })
    }
}

#[async_trait]
impl Strategy for FirstFinish {
    fn name(&self) -> &str {
        self.name
    }

    async fn search(&self, ctx: &Context) -> Result<Selection> {
        let p = &self.params;
        let root = ctx.open().await?;
        let mut active = (0..p.k)
            .map(|k| Ok((k as u64, ctx.fork(&root)?)))
            .collect::<Result<Vec<_>>>()?;
        ctx.release(&root);
        let chunk = StepSpec {
            max_tokens: p.chunk_tokens,
            ..p.decoding.whole(p.chunk_tokens)
        };
        let mut finishers = 0;
        let mut capped = Vec::new();
        while !active.is_empty() && finishers < p.m {
            let mut finished: Vec<(usize, Branch)> = Vec::new();
            let mut next = Vec::new();
            for (i, (id, b, done)) in advance(ctx, active, &chunk, p.max_tokens)
                .await?
                .into_iter()
                .enumerate()
            {
                if done && b.finished {
                    finished.push((i, b));
                } else if done {
                    capped.push(b); // hit the cap without finishing
                } else {
                    next.push((id, b));
                }
            }
            finished.sort_by_key(|(i, b)| (b.tokens, *i));
            for (_, b) in finished {
                if finishers < p.m {
                    ctx.add_candidate(&b, Some(-(b.tokens as f32)));
                    finishers += 1;
                    ctx.release(&b);
                } else {
                    ctx.prune(&b);
                }
            }
            active = next;
        }
        for (_, b) in &active {
            ctx.prune(b);
        }
        // Nobody finished: the capped traces are all there is.
        for b in &capped {
            if finishers == 0 {
                ctx.add_candidate(b, Some(-(b.tokens as f32)));
            }
            ctx.release(b);
        }
        Ok(self.select(&ctx.candidates()))
    }

    /// Vote among the finishers (in finish order, so ties go to the shorter); with m = 1 that
    /// is the first finisher.
    fn select(&self, candidates: &[Candidate]) -> Selection {
        select_by_vote(candidates, false)
    }
}
