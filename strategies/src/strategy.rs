//! The [`Strategy`] trait and [`run`], the driver that turns a strategy's search into an
//! [`Outcome`] — with the best answer so far when the budget, the deadline or a cancellation
//! interrupts it.
//!
//! A strategy implements two things: `search`, which spends the context's budget and records
//! candidates, and (optionally) `select`, which picks the answer among the candidates when the
//! search was interrupted before it could decide itself.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::context::Context;
use crate::error::{Result, StrategyError};
use crate::outcome::{Candidate, Outcome, SearchFinish, Selection};
use crate::samples::SamplePlan;
use crate::select::select_by_vote;

/// The system prompt used when a problem brings none: step-by-step, steps separated by a blank
/// line (the default step delimiter), the answer in `\boxed{}` (what the grader extracts).
pub const DEFAULT_SYSTEM_PROMPT: &str =
    "Solve the problem step by step. Separate the steps with a blank line. Put the final answer in \\boxed{}.";

/// A question to reason about: what a search is asked (the question, its system prompt and the
/// conversation before it). An evaluation's problem with its gold answer is another concept,
/// `ponder_evals::EvalProblem`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    /// The question.
    pub question: String,
    /// The system prompt (defaults to [`DEFAULT_SYSTEM_PROMPT`]).
    pub system: Option<String>,
    /// The conversation before the question, oldest first (a chat request's earlier turns).
    #[serde(default)]
    pub history: Vec<crate::generator::Turn>,
}

impl Problem {
    /// A problem with the default system prompt.
    pub fn new(question: impl Into<String>) -> Self {
        Self {
            question: question.into(),
            system: Some(DEFAULT_SYSTEM_PROMPT.to_string()),
            history: Vec::new(),
        }
    }
}

/// A test-time-compute strategy.
///
/// Required: [`Strategy::name`] and [`Strategy::search`]. Provided: [`Strategy::select`],
/// which picks among the candidates after an interruption by majority vote (ties: higher
/// score, then earlier), and [`Strategy::sample_plan`] (`None`). `strategies/src/best_of_n.rs` is the template to copy; a complete
/// user-defined strategy is in `examples/custom_strategy.rs`:
///
/// ```
/// use std::sync::Arc;
/// use async_trait::async_trait;
/// use ponder_strategies::{fake::FakeGenerator, run, Budget, Context, Problem, Result, Selection, StepSpec, Strategy};
///
/// /// Greedy decoding: one solution, no search.
/// struct Greedy;
///
/// #[async_trait]
/// impl Strategy for Greedy {
///     fn name(&self) -> &str {
///         "greedy"
///     }
///     async fn search(&self, ctx: &Context) -> Result<Selection> {
///         let root = ctx.open().await?;
///         let spec = StepSpec { max_tokens: 64, stop: vec![], sampling: ponder_strategies::Sampling::greedy(0) };
///         let done = ctx.extend(vec![(root, 0)], &spec).await?;
///         let index = ctx.add_candidate(&done[0], None);
///         Ok(Selection { answer: ctx.candidates()[index].answer.clone(), candidate: Some(index), support: None })
///     }
/// }
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let generator = Arc::new(FakeGenerator::arithmetic());
/// let ctx = Context::new(generator, Problem::new("What is 2+3?"), Budget::tokens(500));
/// let outcome = run(&Greedy, ctx).await?;
/// assert_eq!(outcome.answer.as_deref(), Some("5"));
/// # Ok::<(), ponder_strategies::StrategyError>(()) }).unwrap();
/// ```
#[async_trait]
pub trait Strategy: Send + Sync {
    /// The name it is registered and reported under.
    fn name(&self) -> &str;

    /// Runs the search: spend the context's budget, record candidates with
    /// [`Context::add_candidate`], return the choice.
    async fn search(&self, ctx: &Context) -> Result<Selection>;

    /// The whole samples the search begins with, for a strategy whose first step is N
    /// independent whole solutions from the prompt drawn with [`Context::draw_samples`]: a
    /// caller may draw the first of them early ([`Context::probe_samples`]) and the search
    /// then reuses them. `None` (the default): the search draws otherwise.
    fn sample_plan(&self) -> Option<SamplePlan> {
        None
    }

    /// Picks the answer among `candidates` when the search was interrupted.
    fn select(&self, candidates: &[Candidate]) -> Selection {
        select_by_vote(candidates, false)
    }
}

/// Runs `strategy` in `ctx` to an [`Outcome`].
///
/// Budget, deadline and cancellation end the search with the best answer so far (`finish_reason`
/// says which). A search that ends before recording any candidate (stopped, or at its own
/// limits) answers with the solution that got furthest, as its one unfinished candidate; if
/// the budget stopped it before anything was generated, that is
/// [`StrategyError::BudgetTooSmall`]. Every sequence the search opened is released.
pub async fn run(strategy: &dyn Strategy, ctx: Context) -> Result<Outcome> {
    let result = strategy.search(&ctx).await;
    ctx.release_all();
    let (selection, finish_reason) = match result {
        // A strategy that caught a deadline or cancellation still ended because of it.
        Ok(selection) => (
            Some(selection),
            ctx.interruption().unwrap_or(SearchFinish::Completed),
        ),
        Err(e) if e.is_interruption() => {
            let reason = match e {
                StrategyError::DeadlineExceeded { .. } => SearchFinish::Deadline,
                StrategyError::Cancelled => SearchFinish::Cancelled,
                _ => SearchFinish::Budget,
            };
            tracing::debug!(strategy = strategy.name(), error = %e, candidates = ctx.candidates().len(), "search interrupted");
            (None, reason)
        }
        Err(e) => return Err(e),
    };
    // Ended (by a stop or by its own limits) before any candidate: the solution that got
    // furthest answers; if nothing was generated under a budget stop, the budget was too small
    // for any answer.
    let selection = match selection {
        _ if ctx.candidates().is_empty() => {
            if ctx.add_furthest_partial().is_none() && finish_reason == SearchFinish::Budget {
                let usage = ctx.usage();
                return Err(StrategyError::BudgetTooSmall {
                    budget: ctx.budget().tokens,
                    spent: usage.spent(),
                    prompt_tokens: ctx.prompt_tokens(),
                });
            }
            strategy.select(&ctx.candidates())
        }
        Some(selection) => selection,
        // Interrupted: the strategy picks among what it recorded.
        None => strategy.select(&ctx.candidates()),
    };
    let candidates = ctx.candidates();
    let text = selection
        .candidate
        .and_then(|i| candidates.get(i))
        .map(|c| c.text.clone());
    Ok(Outcome {
        strategy: strategy.name().to_string(),
        answer: selection.answer,
        text,
        selected: selection.candidate,
        support: selection.support,
        candidates,
        usage: ctx.usage(),
        finish_reason,
        tree: ctx.tree(),
        router: ctx.router(),
        shots: Vec::new(),
    })
}
