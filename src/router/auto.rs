//! The `auto` strategy: route the query, run the measured configuration the allocator chose,
//! and — for a strategy that begins with independent whole samples — look at the first two
//! samples before committing to a difficulty bin.
//!
//! 1. **Route.** The query's category and difficulty are predicted ([`super::Router::route`])
//!    and the allocator picks a calibration row for that difficulty (or a direct answer).
//! 2. **Run as measured.** The row's strategy is built from the row's own parameters (its N,
//!    per-branch cap and every other parameter the measured run gave it) and runs under the
//!    row's budget; the context's meter refuses anything past it. Rows are chosen among
//!    those measured with the search's verifier (the server's `--verifier`) and those measured
//!    without one ([`super::CalibrationTable::runnable_with`]); a row of the second kind runs
//!    with the verifier set aside ([`Context::set_verifier_aside`]), as it was measured. Under load
//!    the allocator
//!    narrows N ([`super::calibrate::with_width`]) and the budget with it, and says so.
//! 3. **Probe** (the adaptive part of compute-optimal scaling, Snell et al. 2024; an
//!    Adaptive-Consistency / DeepConf-style early look, Aggarwal et al. 2023, Fu et al. 2025).
//!    When the row's strategy draws N independent whole samples first
//!    ([`ponder_strategies::Strategy::sample_plan`]: self-consistency, best-of-N, weighted
//!    best-of-N) and the server is not shrinking N, `auto` draws that row's first two samples
//!    ([`Context::probe_samples`], at the row's per-sample cap) and reads them:
//!    - *agree*: both have a final answer and the answers are equivalent (the grader's
//!      [`ponder_verifiers::equivalent`], on canonical answers);
//!    - *confident*: both finished (not cut at the cap) and each trace's lowest group
//!      confidence ([`ponder_verifiers::TraceConfidence`]) is at least `probe_confidence`.
//!
//!    The bin: agree and confident → `easy`; disagree → `hard` (widen to the hard row's N; a
//!    best-of-N row scores with the server's verifier); agree but not confident → the
//!    predicted difficulty (in a table binned by the probe, its `medium` bin). A table binned
//!    by the probe starts a query in its prior rows, measured over every calibration problem
//!    ([`super::PRIOR_BIN`]), and a probe bin of fewer than `min_bin_problems` calibration
//!    problems chooses by them too ([`super::CalibrationTable::choosing_bin`]). In a bin
//!    other than the predicted one, the allocator's own rule picks the row (cheapest within
//!    tolerance of the best measured accuracy) among the rows that can take the probe's
//!    samples as their first two: strategies with a sample plan that samples alike, N ≥ 2,
//!    and a per-sample cap at least the probe's. If none can, the predicted row runs.
//!    *Stop or run the easy row* is that same rule: a measured 2-sample row of the easy bin
//!    that is as accurate as the wider ones (within tolerance) is cheaper, and running it
//!    means taking the two probe samples and drawing nothing more — the search stops with
//!    the agreed answer. Otherwise the easy row runs with the probe's samples as its first.
//!    Either way the row draws only N − 2 more samples: the probe's tokens are the row's.
//!
//!    Strategies without a sample plan (beam search, MCTS, DeepConf's online filter,
//!    adaptive parallel thinking, first-finish…) generate in lockstep chunks whose samples a
//!    probe cannot stand in for; they run as measured, without a probe.
//!
//! The decision — prediction, load, the row that ran, and what the probe saw — is recorded
//! with [`Context::set_router`] as a [`Decision`], kept typed on the `Outcome`
//! (`Outcome::routing`) and written out as its `router` object; [`Allocated`] is its summary (what `/metrics` counts and the harness records).

use std::sync::Arc;

use async_trait::async_trait;
use ponder_strategies::{
    Branch, Context, Decoding, GeneratorError, Prompt, Registry, Result, SamplePlan, Sampling,
    SearchTree, Selection, StepSpec, Strategy, StrategyError,
};
use ponder_verifiers::{equivalent, TraceConfidence};
use serde::{Deserialize, Serialize};

use super::allocator::{Allocation, BinnedBy, CalibrationRow};
use super::calibrate::with_width;
use super::{Decision, Router, RouterError};

/// System prompt of a direct answer.
pub const DIRECT_SYSTEM_PROMPT: &str = "Answer directly and briefly, without step-by-step reasoning. If the answer is a number or a short expression, put it in \\boxed{}.";

/// Samples the probe draws.
pub const PROBE_SAMPLES: usize = 2;

/// Parameters of `auto`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AutoParams {
    /// Use this load (0..=1) instead of the measured one, so a seeded run replays (the
    /// harness pins it at 0 by default).
    pub load: Option<f64>,
    /// Draw the first two samples before choosing the difficulty bin (for strategies that
    /// begin with independent whole samples).
    pub probe: bool,
    /// Lowest group confidence (DeepConf token confidence, top-5) each probe trace needs to
    /// count as confident. The default is the lower quartile of that statistic among correct
    /// SmolLM2-135M candidates of a zero-shot train-split run (the candidate set committed as
    /// `data/verifier/train.jsonl` at `ee5ba64`, before few-shot prompts); it is
    /// model-specific.
    pub probe_confidence: f32,
}

impl Default for AutoParams {
    fn default() -> Self {
        Self {
            load: None,
            probe: true,
            probe_confidence: 2.75,
        }
    }
}

/// What `auto` ran for one search, read from its outcome's decision: the one
/// summary of a decision that `/metrics` counts and the harness records per item.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Allocated {
    /// The difficulty bin of the calibration row that ran (the probe's bin when the probe
    /// moved the search to it); the predicted difficulty when no row ran (a direct answer,
    /// the fallback vote).
    pub difficulty: String,
    /// What ran: the row's strategy, or `direct`.
    pub strategy: String,
    /// What the probe of the first two samples saw: `agree`, `disagree`, or `none` (no probe
    /// ran).
    pub probe: String,
    /// Whether load narrowed the row (fewer branches than measured).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub degraded: bool,
}

impl Allocated {
    /// The summary of `auto`'s decision on an outcome; `None` when no `auto` decided it.
    pub fn of(outcome: &ponder_strategies::Outcome) -> Option<Self> {
        outcome.routing::<Decision>().map(Self::from)
    }

    /// The summary of a `router` object as it arrives over HTTP ([`Decision::of`]); `None`
    /// for an object that is not a decision.
    pub fn of_json(router: &serde_json::Value) -> Option<Self> {
        Decision::of(router).map(|d| Self::from(&d))
    }
}

impl From<&Decision> for Allocated {
    fn from(d: &Decision) -> Self {
        let probe = match d.probe.as_ref().map(|p| p.agree) {
            Some(true) => "agree",
            Some(false) => "disagree",
            None => "none",
        };
        Self {
            strategy: d.allocation.strategy.clone(),
            difficulty: d
                .allocation
                .row
                .as_ref()
                .map_or_else(|| d.difficulty.clone(), |row| row.difficulty.clone()),
            probe: probe.into(),
            degraded: d.allocation.degraded,
        }
    }
}

/// The difficulty bin two probe samples point to: both answered alike (math-equivalent
/// answers), finished and confident (each trace's lowest group confidence at least the
/// threshold) → `easy`; answered differently (or not at all) → `hard`; alike but not both
/// confident → `medium`. One rule for `auto`'s probe and for binning calibration problems
/// after the fact (`ponder-eval calibrate --bins-from`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeBin {
    /// Agreeing and confident.
    Easy,
    /// Agreeing, not confident.
    Medium,
    /// Disagreeing.
    Hard,
}

/// What a probe read: its bin and the two signals behind it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeRead {
    /// The bin.
    pub bin: ProbeBin,
    /// Both samples have an answer and the answers are equivalent.
    pub agree: bool,
    /// Both finished and are at least as confident as the threshold.
    pub confident: bool,
}

impl ProbeBin {
    /// The bin's name, as the calibration table's difficulties spell it.
    pub fn name(self) -> &'static str {
        match self {
            ProbeBin::Easy => "easy",
            ProbeBin::Medium => "medium",
            ProbeBin::Hard => "hard",
        }
    }

    /// Reads [`PROBE_SAMPLES`] samples' answers, whether each finished and each one's lowest
    /// group confidence, against `threshold`; fewer samples disagree.
    pub fn read(
        answers: &[Option<String>],
        finished: &[bool],
        lowest_group: &[Option<f32>],
        threshold: f32,
    ) -> ProbeRead {
        let agree = answers.len() == PROBE_SAMPLES
            && match (answers.first(), answers.get(1)) {
                (Some(Some(a)), Some(Some(b))) => equivalent(a, b),
                _ => false,
            };
        let confident = finished.len() == PROBE_SAMPLES
            && finished.iter().all(|f| *f)
            && lowest_group.len() == PROBE_SAMPLES
            && lowest_group
                .iter()
                .all(|c| c.is_some_and(|c| c >= threshold));
        let bin = match (agree, confident) {
            (true, true) => ProbeBin::Easy,
            (true, false) => ProbeBin::Medium,
            (false, _) => ProbeBin::Hard,
        };
        ProbeRead {
            bin,
            agree,
            confident,
        }
    }
}

/// What the probe saw and what it chose: the `router` object's `probe`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProbeReport {
    /// Samples drawn (the row's first two).
    pub samples: usize,
    /// Their per-sample cap.
    pub cap: usize,
    /// Their canonical final answers.
    pub answers: Vec<Option<String>>,
    /// Whether each was finished by the model (not cut at the cap).
    pub finished: Vec<bool>,
    /// Each trace's lowest group confidence (none without log-probabilities).
    pub lowest_group: Vec<Option<f32>>,
    /// Both answered alike.
    pub agree: bool,
    /// Both finished with at least `probe_confidence`.
    pub confident: bool,
    /// The difficulty bin chosen from them.
    pub bin: String,
    /// Whether the bin's row replaced the predicted one.
    pub changed_row: bool,
    /// Tokens the probe charged (part of the row's spend: its samples are the row's first).
    pub spent: u64,
}

/// The router-driven strategy.
pub struct Auto {
    router: Arc<Router>,
    params: AutoParams,
    builtins: Registry,
}

impl std::fmt::Debug for Auto {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auto")
            .field("params", &self.params)
            .finish_non_exhaustive()
    }
}

impl Auto {
    /// Validates `params`.
    pub fn new(router: Arc<Router>, params: AutoParams) -> Result<Self> {
        if let Some(load) = params.load {
            ponder_strategies::in_range("auto", "load", load, 0.0, 1.0)?;
        }
        ponder_strategies::in_range(
            "auto",
            "probe_confidence",
            f64::from(params.probe_confidence),
            0.0,
            100.0,
        )?;
        Ok(Self {
            router,
            params,
            builtins: Registry::with_builtins(),
        })
    }

    async fn direct(&self, ctx: &Context, max_tokens: usize) -> Result<Selection> {
        let prompt = Prompt {
            system: Some(DIRECT_SYSTEM_PROMPT.into()),
            history: ctx.problem().history.clone(),
            user: ctx.problem().question.clone(),
        };
        let root = ctx.open_with(&prompt).await?;
        let spec = StepSpec {
            max_tokens,
            stop: Vec::new(),
            sampling: Sampling::greedy(Decoding::default().top_logprobs),
        };
        let done = ctx.extend(vec![(root, 0)], &spec).await?;
        let Some(reply) = done.first() else {
            return Ok(Selection::default());
        };
        let i = ctx.add_candidate(reply, None);
        ctx.release(reply);
        Ok(Selection {
            answer: ctx.candidates().get(i).and_then(|c| c.answer.clone()),
            candidate: Some(i),
            support: None,
        })
    }

    /// Builds the allocation's strategy; under load, with the allocation's narrower width
    /// written into its parameters (and recorded there).
    fn build(&self, a: &mut Allocation) -> Result<Box<dyn Strategy>> {
        if a.degraded {
            a.params = with_width(&self.builtins, &a.strategy, &a.params, a.n);
        }
        self.builtins.build(&a.strategy, a.params.clone())
    }

    /// Whether `row` can take samples drawn like `probe` (at `probe_cap`) as its first two.
    fn takes_probe(
        &self,
        row: &CalibrationRow,
        probe: &SamplePlan,
        probe_cap: usize,
        p: u64,
    ) -> bool {
        let Ok(strategy) = self.builtins.build(&row.strategy, row.params.clone()) else {
            return false;
        };
        strategy.sample_plan().is_some_and(|plan| {
            plan.n >= PROBE_SAMPLES
                && plan.draws_like(&probe.spec)
                && plan.sample_cap(row.budget, p) >= probe_cap
        })
    }

    /// Draws the probe for `plan`, reads it, and moves `decision` to its bin's row.
    async fn probe(
        &self,
        ctx: &Context,
        plan: &SamplePlan,
        decision: &mut Decision,
        load: f64,
    ) -> Result<()> {
        let budget = decision.allocation.budget_tokens;
        let before = ctx.usage().spent();
        let drawn: Vec<Branch> = ctx.probe_samples(plan, PROBE_SAMPLES, budget).await?;
        let mut answers = Vec::with_capacity(drawn.len());
        for b in &drawn {
            answers.push(ctx.final_answer(b, plan.force_answer).await);
        }
        let finished: Vec<bool> = drawn.iter().map(|b| b.finished).collect();
        let lowest_group: Vec<Option<f32>> = drawn
            .iter()
            .map(|b| TraceConfidence::summary(&b.confidences).map(|c| c.lowest_group))
            .collect();
        let read = ProbeBin::read(
            &answers,
            &finished,
            &lowest_group,
            self.params.probe_confidence,
        );
        let (agree, confident) = (read.agree, read.confident);
        let allocator = &self.router.file().allocator;
        let bin = match (read.bin, allocator.table.binned_by) {
            // Agreeing but unsure says nothing more than the level the router predicted,
            // unless the table's bins are the probe's own.
            (ProbeBin::Medium, BinnedBy::Level) => decision.difficulty.clone(),
            // A probe bin of too few calibration problems chooses by the prior rows.
            (bin, _) => allocator
                .table
                .choosing_bin(bin.name(), allocator.config.min_bin_problems)
                .to_string(),
        };
        let predicted_bin = decision
            .allocation
            .row
            .as_ref()
            .map(|r| r.difficulty.clone());
        let prompt = ctx.prompt_tokens();
        let probe_cap = plan.sample_cap(budget, prompt);
        let mut changed_row = false;
        if predicted_bin.as_deref() != Some(bin.as_str()) {
            let runnable = allocator.table.runnable_with(ctx.verifier_name());
            let moved = allocator.allocate_row(&bin, decision.request_budget, load, |r| {
                runnable(r) && self.takes_probe(r, plan, probe_cap, prompt)
            });
            if moved.row.is_some() && moved.row != decision.allocation.row {
                decision.allocation = Allocation {
                    basis: format!("probe -> {bin}: {}", moved.basis),
                    ..moved
                };
                changed_row = true;
            }
        }
        decision.probe = Some(ProbeReport {
            samples: drawn.len(),
            cap: probe_cap,
            answers,
            finished,
            lowest_group,
            agree,
            confident,
            bin,
            changed_row,
            spent: ctx.usage().spent().saturating_sub(before),
        });
        Ok(())
    }
}

fn router_error(e: RouterError) -> StrategyError {
    match e {
        RouterError::EmptyQuery => StrategyError::invalid("auto", "problem", "must not be empty"),
        other => GeneratorError::Helper {
            helper: "router",
            source: Box::new(other),
        }
        .into(),
    }
}

fn record(ctx: &Context, decision: &Decision) {
    ctx.set_router(decision.clone());
}

#[async_trait]
impl Strategy for Auto {
    fn name(&self) -> &str {
        "auto"
    }

    async fn search(&self, ctx: &Context) -> Result<Selection> {
        let load = self
            .params
            .load
            .unwrap_or_else(|| self.router.current_load());
        let _in_flight = self.router.enter();
        let mut decision = self
            .router
            .route_for(
                &ctx.problem().question,
                ctx.budget().tokens,
                load,
                ctx.verifier_name(),
            )
            .map_err(router_error)?;
        record(ctx, &decision);
        if decision.truncated {
            let note = format!(
                "query truncated to the encoder's {} word pieces for routing",
                decision.window
            );
            ctx.with_tree(|t| t.note(SearchTree::ROOT, "router_truncated", note));
        }
        if !decision.allocation.think {
            ctx.narrow_budget(decision.allocation.budget_tokens);
            return self.direct(ctx, decision.allocation.max_tokens).await;
        }
        let mut strategy = self.build(&mut decision.allocation)?;
        let plan = strategy
            .sample_plan()
            .filter(|p| self.params.probe && !decision.allocation.degraded && p.n >= 2)
            // The probe moves between the table's bins; a foreign table has none to offer.
            .filter(|_| self.router.table_foreign().is_none());
        if let Some(plan) = plan {
            let probed = self.probe(ctx, &plan, &mut decision, load).await;
            record(ctx, &decision);
            probed?;
            if decision.probe.as_ref().is_some_and(|p| p.changed_row) {
                strategy = self.build(&mut decision.allocation)?;
            }
        }
        record(ctx, &decision);
        // A row measured without a verifier runs without one (the decision's `row` says so).
        if decision
            .allocation
            .row
            .as_ref()
            .is_some_and(|r| r.verifier == "none")
        {
            ctx.set_verifier_aside();
        }
        // The allocation is what this search may spend (≤ the request's budget).
        ctx.narrow_budget(decision.allocation.budget_tokens);
        strategy.search(ctx).await
    }
}

/// Registers `auto` over `router` into `registry`.
pub fn register_auto(registry: &mut Registry, router: Arc<Router>) {
    registry.register(
        "auto",
        "route the query (category, difficulty), probe the first two samples, run the measured calibration row for the bin they point to",
        move |p: AutoParams| Ok(Box::new(Auto::new(Arc::clone(&router), p)?) as Box<dyn Strategy>),
    );
}

/// The built-in strategies plus `auto` over `router`.
pub fn registry_with_auto(router: Arc<Router>) -> Registry {
    let mut registry = Registry::with_builtins();
    register_auto(&mut registry, router);
    registry
}
