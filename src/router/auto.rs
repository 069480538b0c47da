//! The `auto` strategy: route the query, then run what the allocator chose and let the search
//! adjust it in flight.
//!
//! - Direct answer (chat, writing, easy knowledge, or a saturated server): one greedy reply to
//!   a "answer directly" prompt, capped at the allocation's tokens.
//! - A voting strategy in the table (self-consistency, best-of-N…): adaptive parallel thinking
//!   starting at half the table's N, stopping as soon as the vote's leader is the majority
//!   with `stop_confidence` posterior probability, widening while the answers disagree up to
//!   `max_n` (whole branches that fit in the request's budget) — early stopping and widening
//!   from vote-margin and confidence signals, as in adaptive-parallel / DeepConf.
//! - Any other strategy (beam search, MCTS…): that strategy with its defaults.
//!
//! The search runs under the allocation's budget (the table row's, scaled by any widening;
//! never more than the request's): the context's meter refuses anything past it. The
//! decision is recorded with [`Context::set_router`], so it appears in the `Outcome`.

use std::sync::Arc;

use async_trait::async_trait;
use ponder_strategies::{
    AdaptiveParallel, AdaptiveParallelParams, Context, Decoding, GeneratorError, Prompt, Registry,
    Result, Sampling, SearchTree, Selection, StepSpec, Strategy, StrategyError,
};
use serde::{Deserialize, Serialize};

use super::{Router, RouterError};

/// System prompt of a direct answer.
pub const DIRECT_SYSTEM_PROMPT: &str = "Answer directly and briefly, without step-by-step reasoning. If the answer is a number or a short expression, put it in \\boxed{}.";

/// Parameters of `auto`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AutoParams {
    /// Use this load (0..=1) instead of the measured one (benchmarks, tests).
    pub load: Option<f64>,
    /// Stop widening once the vote's leader has this posterior probability.
    pub stop_confidence: f64,
}

impl Default for AutoParams {
    fn default() -> Self {
        Self {
            load: None,
            stop_confidence: 0.9,
        }
    }
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
        ponder_strategies::in_range("auto", "stop_confidence", params.stop_confidence, 0.5, 1.0)?;
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
}

fn router_error(e: RouterError) -> StrategyError {
    match e {
        RouterError::EmptyQuery => StrategyError::invalid("auto", "problem", "must not be empty"),
        other => GeneratorError::Failed(format!("router: {other}")).into(),
    }
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
        let decision = self
            .router
            .route(&ctx.problem().question, ctx.budget().tokens, load)
            .map_err(router_error)?;
        ctx.set_router(serde_json::to_value(&decision).unwrap_or(serde_json::Value::Null));
        if decision.truncated {
            let note = format!(
                "query truncated to the encoder's {} word pieces for routing",
                decision.window
            );
            ctx.with_tree(|t| t.note(SearchTree::ROOT, "router_truncated", note));
        }
        let a = &decision.allocation;
        // The allocation is what this search may spend (≤ the request's budget).
        ctx.narrow_budget(a.budget_tokens);
        if !a.think {
            return self.direct(ctx, a.max_tokens).await;
        }
        if a.strategy == "adaptive_parallel" {
            let initial = a.n.div_ceil(2).max(1);
            let params = AdaptiveParallelParams {
                initial,
                grow: initial,
                max_n: a.max_n.max(initial),
                stop_confidence: self.params.stop_confidence,
                max_tokens: a.max_tokens,
                ..AdaptiveParallelParams::default()
            };
            return AdaptiveParallel::new(params)?.search(ctx).await;
        }
        self.builtins
            .build(&a.strategy, serde_json::Value::Null)?
            .search(ctx)
            .await
    }
}

/// Registers `auto` over `router` into `registry`.
pub fn register_auto(registry: &mut Registry, router: Arc<Router>) {
    registry.register(
        "auto",
        "route the query (category, difficulty), allocate compute from the calibration table, stop early or widen in flight",
        move |p: AutoParams| Ok(Box::new(Auto::new(Arc::clone(&router), p)?) as Box<dyn Strategy>),
    );
}

/// The built-in strategies plus `auto` over `router`.
pub fn registry_with_auto(router: Arc<Router>) -> Registry {
    let mut registry = Registry::with_builtins();
    register_auto(&mut registry, router);
    registry
}
