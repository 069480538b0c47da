//! Whole samples drawn from the prompt, and a probe that draws the first of them early.
//!
//! Strategies that begin with "N independent whole solutions from the prompt" (self-consistency,
//! best-of-N, weighted best-of-N) describe that step with a [`SamplePlan`]
//! ([`crate::Strategy::sample_plan`]) and draw it with [`Context::draw_samples`]. A caller that
//! wants to look before it commits — the router's `auto`, doing the adaptive part of
//! compute-optimal scaling (Snell et al. 2024) with an Adaptive-Consistency-style early look
//! (Aggarwal et al. 2023) — draws the first k samples of a plan with
//! [`Context::probe_samples`]. They are pooled in the context, and the strategy that runs next
//! takes them as its first samples instead of drawing them again: no probe token is wasted.
//!
//! Invariants:
//! - sample k of a plan is a fork of the prompt extended with seed `seed_for(ROOT, k)` and the
//!   plan's sampling, whether a probe or the strategy draws it, so a probed run draws exactly
//!   the samples an unprobed one would;
//! - a plan's per-sample cap is what one batch of all N gives each sample under the budget
//!   ([`SamplePlan::sample_cap`], the context's even division); a probe draws at the cap of
//!   the plan it probes, the remaining samples at the cap of the plan that runs;
//! - pooled samples are reused only by a plan with the same stop strings and sampling, each
//!   once, in draw order; one the model did not finish and that is shorter than the running
//!   plan's cap is continued to that cap (a fresh seed for the continuation: the same
//!   distribution as a sample drawn whole at that cap). One longer than the cap is kept as
//!   drawn, so a caller that wants the measured configuration exactly runs a plan whose cap is
//!   at least the probe's (`auto` does).

use crate::context::{Branch, Context, StepSpec};
use crate::error::Result;
use crate::generator::StopKind;

/// N independent whole solutions drawn from the problem's prompt in one batch.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplePlan {
    /// Samples.
    pub n: usize,
    /// How each is generated (`max_tokens`: the most per sample; no stop strings for a whole
    /// solution).
    pub spec: StepSpec,
    /// Whether a sample that marks no final answer is asked for one
    /// ([`Context::final_answer`]).
    pub force_answer: bool,
}

impl SamplePlan {
    /// The tokens each sample may generate when all N are drawn in one batch under `budget`
    /// with `prefill` prompt tokens to compute: `min(max_tokens, (budget − prefill) / N)`.
    pub fn sample_cap(&self, budget: u64, prefill: u64) -> usize {
        let share = budget.saturating_sub(prefill) / self.n.max(1) as u64;
        (self.spec.max_tokens as u64).min(share) as usize
    }

    /// Whether samples drawn with `spec` are samples of this plan (same stop strings and
    /// sampling; the cap may differ).
    pub fn draws_like(&self, spec: &StepSpec) -> bool {
        self.spec.stop == spec.stop && self.spec.sampling == spec.sampling
    }
}

/// Samples a probe drew, waiting for the strategy that runs next.
#[derive(Debug, Clone, Default)]
pub(crate) struct SamplePool {
    /// The spec they were drawn with (`max_tokens`: their cap).
    spec: Option<StepSpec>,
    /// The prompt tokens the first batch had to compute (what an unprobed batch would have).
    prefill: u64,
    /// The samples, in draw order.
    samples: Vec<Branch>,
}

impl Context {
    /// Draws samples `0..k` of `plan` now (one batch, each at the cap all N would get under
    /// `budget`: [`SamplePlan::sample_cap`]) and reads each one's final answer
    /// ([`Context::final_answer`], remembered for when it becomes a candidate). They are
    /// pooled: the next [`Context::draw_samples`] of a plan that draws like this one takes
    /// them as its first samples. Returns them in draw order.
    pub async fn probe_samples(
        &self,
        plan: &SamplePlan,
        k: usize,
        budget: u64,
    ) -> Result<Vec<Branch>> {
        let root = self.open().await?;
        let prefill = self.prefill_bound(std::slice::from_ref(&root))?;
        let spec = StepSpec {
            max_tokens: plan.sample_cap(budget, prefill).max(1),
            ..plan.spec.clone()
        };
        let forks = (0..k.min(plan.n))
            .map(|i| Ok((self.fork(&root)?, i as u64)))
            .collect::<Result<Vec<_>>>();
        self.release(&root);
        let drawn = self.extend(forks?, &spec).await?;
        for b in &drawn {
            self.final_answer(b, plan.force_answer).await;
        }
        *self.pool() = SamplePool {
            spec: Some(spec),
            prefill,
            samples: drawn.clone(),
        };
        Ok(drawn)
    }

    /// The N samples of `plan` from `root` (the opened prompt), in draw order: samples a probe
    /// pooled first (continued to this plan's cap where the model had not finished them), then
    /// the rest in one batch. Without pooled samples: one batch of N forks, the budget divided
    /// evenly among them.
    pub async fn draw_samples(&self, root: &Branch, plan: &SamplePlan) -> Result<Vec<Branch>> {
        let pool = {
            let mut guard = self.pool();
            match &guard.spec {
                Some(spec) if plan.draws_like(spec) => std::mem::take(&mut *guard),
                _ => SamplePool::default(),
            }
        };
        if pool.samples.is_empty() {
            let forks = (0..plan.n)
                .map(|k| Ok((self.fork(root)?, k as u64)))
                .collect::<Result<Vec<_>>>()?;
            return self.extend(forks, &plan.spec).await;
        }
        let cap = plan.sample_cap(self.budget().tokens, pool.prefill).max(1);
        let mut samples = Vec::with_capacity(plan.n);
        for (k, b) in pool.samples.into_iter().enumerate() {
            if k >= plan.n {
                self.release(&b);
                continue;
            }
            let cut = !b.finished && b.last_stop == Some(StopKind::Length) && b.tokens < cap;
            if !cut {
                samples.push(b);
                continue;
            }
            let more = StepSpec {
                max_tokens: cap - b.tokens,
                ..plan.spec.clone()
            };
            let mut continued = self.extend(vec![(b, k as u64)], &more).await?;
            samples.append(&mut continued);
        }
        let drawn = samples.len();
        let forks = (drawn..plan.n)
            .map(|k| Ok((self.fork(root)?, k as u64)))
            .collect::<Result<Vec<_>>>()?;
        let spec = StepSpec {
            max_tokens: cap,
            ..plan.spec.clone()
        };
        samples.append(&mut self.extend(forks, &spec).await?);
        Ok(samples)
    }
}
