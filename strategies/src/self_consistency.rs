//! Self-consistency: sample N solutions, extract each final answer, return the majority answer
//! (Wang et al. 2023, "Self-Consistency Improves Chain of Thought Reasoning in Language
//! Models"). Answers are grouped by math equivalence, so `1/2`, `0.5` and `\frac12` vote
//! together.
//!
//! **Parameters**: `n` (default 8), `max_tokens` per solution (1024), `decoding`,
//! `force_answer` (true: ask a solution without a marked answer for one).
//! **Budget**: like best-of-N — one prefill, N forks, one batched call, equal shares when the
//! budget is short; no verifier calls. A solution that marks no final answer is asked for one
//! (a short greedy probe, charged as probe tokens), so every vote is one canonical answer.
//! The N samples are a [`SamplePlan`]: samples a probe drew first are reused.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::context::Context;
use crate::error::Result;
use crate::outcome::Selection;
use crate::params::{positive, Decoding};
use crate::samples::SamplePlan;
use crate::select::select_by_vote;
use crate::strategy::Strategy;

/// Parameters of `self_consistency`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SelfConsistencyParams {
    /// Solutions to sample.
    pub n: usize,
    /// Most tokens per solution.
    pub max_tokens: usize,
    /// Sampling.
    pub decoding: Decoding,
    /// Ask a solution that marks no final answer for one (a short greedy probe); off, such a
    /// solution votes with whatever answer can be read from its text.
    pub force_answer: bool,
}

impl Default for SelfConsistencyParams {
    fn default() -> Self {
        Self {
            n: 8,
            max_tokens: 1024,
            decoding: Decoding::default(),
            force_answer: true,
        }
    }
}

/// Majority vote over N sampled solutions.
#[derive(Debug, Clone)]
pub struct SelfConsistency {
    params: SelfConsistencyParams,
}

impl SelfConsistency {
    /// Validates `params`.
    pub fn new(params: SelfConsistencyParams) -> Result<Self> {
        positive("self_consistency", "n", params.n)?;
        positive("self_consistency", "max_tokens", params.max_tokens)?;
        params.decoding.validate("self_consistency")?;
        Ok(Self { params })
    }

    /// The N whole samples it votes over.
    fn plan(&self) -> SamplePlan {
        SamplePlan {
            n: self.params.n,
            spec: self.params.decoding.whole(self.params.max_tokens),
            force_answer: self.params.force_answer,
        }
    }
}

#[async_trait]
impl Strategy for SelfConsistency {
    fn name(&self) -> &str {
        "self_consistency"
    }

    fn sample_plan(&self) -> Option<SamplePlan> {
        Some(self.plan())
    }

    async fn search(&self, ctx: &Context) -> Result<Selection> {
        let root = ctx.open().await?;
        let plan = self.plan();
        let drawn = ctx.draw_samples(&root, &plan).await;
        ctx.release(&root);
        for branch in drawn? {
            if self.params.force_answer {
                ctx.add_candidate_forced(&branch, None).await;
            } else {
                ctx.add_candidate(&branch, None);
            }
            ctx.release(&branch);
        }
        Ok(select_by_vote(&ctx.candidates(), false))
    }
}
