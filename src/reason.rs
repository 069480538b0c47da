//! One reasoning request, end to end: validate what the caller asked for, build the strategy
//! from the registry, run it under the budget over a generator, return the `Outcome`.
//! Shared by `ponder reason` and (later) the `/v1/reason` endpoint.

use std::sync::Arc;
use std::time::Duration;

use ponder_strategies::{
    run, Budget, Context, Generator, Outcome, Problem, Registry, StrategyError,
};
use ponder_verifiers::Verifier;
use tokio_util::sync::CancellationToken;

/// What a caller asks for.
#[derive(Debug, Clone)]
pub struct ReasonRequest {
    /// The question.
    pub problem: String,
    /// A registered strategy name.
    pub strategy: String,
    /// Its parameters (JSON object; `null` for defaults).
    pub params: serde_json::Value,
    /// Token budget (generated + computed prefill + verifier tokens).
    pub budget_tokens: i64,
    /// Optional deadline in milliseconds.
    pub deadline_ms: Option<u64>,
    /// Seed for a replayable search.
    pub seed: u64,
}

/// Largest budget accepted (a typo guard, not a policy).
pub const MAX_BUDGET_TOKENS: i64 = 10_000_000;

/// Validates `req` and runs it.
pub async fn reason(
    registry: &Registry,
    generator: Arc<dyn Generator>,
    verifier: Option<Arc<dyn Verifier>>,
    req: &ReasonRequest,
    cancel: CancellationToken,
) -> Result<Outcome, StrategyError> {
    reason_with_progress(registry, generator, verifier, req, cancel, None).await
}

/// [`reason`], reporting the search's [`ponder_strategies::Progress`] to `progress` while it runs.
pub async fn reason_with_progress(
    registry: &Registry,
    generator: Arc<dyn Generator>,
    verifier: Option<Arc<dyn Verifier>>,
    req: &ReasonRequest,
    cancel: CancellationToken,
    progress: Option<ponder_strategies::ProgressSender>,
) -> Result<Outcome, StrategyError> {
    if req.problem.trim().is_empty() {
        return Err(StrategyError::invalid(
            &req.strategy,
            "problem",
            "must not be empty",
        ));
    }
    if req.budget_tokens <= 0 || req.budget_tokens > MAX_BUDGET_TOKENS {
        return Err(StrategyError::invalid(
            &req.strategy,
            "budget_tokens",
            format!(
                "must be in 1..={MAX_BUDGET_TOKENS}, got {}",
                req.budget_tokens
            ),
        ));
    }
    let strategy = registry.build(&req.strategy, req.params.clone())?;
    let budget = Budget {
        tokens: req.budget_tokens as u64,
        deadline: req.deadline_ms.map(Duration::from_millis),
    };
    let mut ctx = Context::new(generator, Problem::new(req.problem.clone()), budget)
        .with_seed(req.seed)
        .with_cancellation(cancel);
    if let Some(v) = verifier {
        ctx = ctx.with_verifier(v);
    }
    if let Some(p) = progress {
        ctx = ctx.with_progress(p);
    }
    run(strategy.as_ref(), ctx).await
}
