//! Best-of-N and weighted best-of-N — and the template to copy when writing a strategy.
//!
//! **Method.** Sample N complete solutions independently from the same prompt and keep the one
//! a verifier likes best (Cobbe et al. 2021, "Training Verifiers to Solve Math Word Problems";
//! Lightman et al. 2023 with a PRM). *Weighted* best-of-N sums the scores of all solutions that
//! reach the same (equivalent) answer and picks the answer with the largest sum (Li et al. 2023,
//! "Making Large Language Models Better Reasoners with Step-Aware Verifier"; the HF
//! search-and-learn recipe).
//!
//! **Parameters** ([`BestOfNParams`]): `n` (default 4), `max_tokens` per solution (1024),
//! `score_by` (`prm_last` | `prm_min` | `prm_prod` | `orm` | `confidence`; default `prm_last`,
//! which falls back to confidence without a verifier), `step_delimiter` (`"\n\n"`: a
//! finished solution is cut into steps there, so a PRM scores it step by step and the three
//! PRM aggregations differ, as in the papers), `decoding`.
//!
//! **Budget.** The prompt is prefilled once and the N branches fork from it; one batched call
//! generates all N. If the budget cannot cover N × `max_tokens`, each branch gets an equal share
//! (the context divides it). All N solutions are scored in one verifier submission, and each
//! costs one short answer probe when it marks no final answer ([`Context::add_candidate_forced`]).
//! The N samples are a [`SamplePlan`] drawn with [`Context::draw_samples`], so samples a probe
//! drew first ([`Context::probe_samples`]) are reused rather than drawn again.
//!
//! **How a strategy is written** (the shape every built-in follows):
//! 1. a params struct (`Default`, serde, `deny_unknown_fields`) with a `validate` method;
//! 2. a struct implementing [`Strategy`]: open the prompt, draw (fork and extend, batched), score, record
//!    candidates with [`Context::add_candidate`] (or [`Context::add_candidate_forced`]), select;
//! 3. a registration line in `builtins.rs`.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::context::Context;
use crate::error::Result;
use crate::outcome::{Candidate, Selection};
use crate::params::{positive, Decoding, ScoreBy};
use crate::samples::SamplePlan;
use crate::select::{select_best_score, select_by_vote};
use crate::strategy::Strategy;

/// Parameters of `best_of_n` and `weighted_best_of_n`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BestOfNParams {
    /// Solutions to sample.
    pub n: usize,
    /// Most tokens per solution.
    pub max_tokens: usize,
    /// What to rank solutions by.
    pub score_by: ScoreBy,
    /// Where a finished solution is cut into the steps a PRM scores.
    pub step_delimiter: String,
    /// Sampling.
    pub decoding: Decoding,
}

impl Default for BestOfNParams {
    fn default() -> Self {
        Self {
            n: 4,
            max_tokens: 1024,
            score_by: ScoreBy::PrmLast,
            step_delimiter: "\n\n".into(),
            decoding: Decoding::default(),
        }
    }
}

/// Best-of-N (`weighted: false`) or weighted best-of-N (`weighted: true`).
#[derive(Debug, Clone)]
pub struct BestOfN {
    params: BestOfNParams,
    weighted: bool,
}

impl BestOfN {
    /// Validates `params`.
    pub fn new(params: BestOfNParams, weighted: bool) -> Result<Self> {
        let name = if weighted {
            "weighted_best_of_n"
        } else {
            "best_of_n"
        };
        positive(name, "n", params.n)?;
        positive(name, "max_tokens", params.max_tokens)?;
        params.decoding.validate(name)?;
        Ok(Self { params, weighted })
    }

    /// The N whole samples it begins with.
    fn plan(&self) -> SamplePlan {
        SamplePlan {
            n: self.params.n,
            spec: self.params.decoding.whole(self.params.max_tokens),
            force_answer: true,
        }
    }
}

#[async_trait]
impl Strategy for BestOfN {
    fn name(&self) -> &str {
        if self.weighted {
            "weighted_best_of_n"
        } else {
            "best_of_n"
        }
    }

    async fn search(&self, ctx: &Context) -> Result<Selection> {
        let root = ctx.open().await?;
        let plan = self.plan();
        let done = ctx.draw_samples(&root, &plan).await;
        ctx.release(&root);
        let done = done?;
        let scores = ctx
            .score_split(&done, self.params.score_by, &self.params.step_delimiter)
            .await?;
        for (branch, score) in done.iter().zip(scores) {
            ctx.add_candidate_forced(branch, Some(score)).await;
            ctx.release(branch);
        }
        Ok(self.select(&ctx.candidates()))
    }

    fn sample_plan(&self) -> Option<SamplePlan> {
        Some(self.plan())
    }

    fn select(&self, candidates: &[Candidate]) -> Selection {
        if self.weighted {
            select_by_vote(candidates, true)
        } else {
            select_best_score(candidates)
        }
    }
}
