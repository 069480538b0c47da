//! One reasoning request, end to end: validate what the caller asked for, build the strategy
//! from the registry, run it under the budget over a generator, return the `Outcome`.
//! Shared by `ponder reason` and (later) the `/v1/reason` endpoint.

use std::sync::Arc;
use std::time::Duration;

use ponder_strategies::{
    run, Budget, Context, Generator, Outcome, Problem, Registry, StrategyError, Turn,
};
use ponder_verifiers::Verifier;
use tokio_util::sync::CancellationToken;

/// What a caller asks for.
#[derive(Debug, Clone)]
pub struct ReasonRequest {
    /// The question.
    pub problem: String,
    /// The conversation before the question: a system message (replacing
    /// [`ponder_strategies::DEFAULT_SYSTEM_PROMPT`]) and earlier turns. Empty for a bare question.
    pub history: Vec<Turn>,
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
    let mut ctx = Context::new(generator, problem(req), budget)
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

/// The strategy's problem: the question, the conversation's first system message (else the
/// default one) and every other earlier turn in order.
pub fn problem(req: &ReasonRequest) -> Problem {
    let mut problem = Problem::new(req.problem.clone());
    let mut turns = req.history.iter().peekable();
    if let Some(system) = turns.next_if(|t| t.role == "system") {
        problem.system = Some(system.content.clone());
    }
    problem.history = turns.cloned().collect();
    problem
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(history: Vec<Turn>) -> ReasonRequest {
        ReasonRequest {
            problem: "Q".into(),
            history,
            strategy: "best_of_n".into(),
            params: serde_json::Value::Null,
            budget_tokens: 100,
            deadline_ms: None,
            seed: 0,
        }
    }

    #[test]
    fn the_conversation_becomes_system_history_and_question() {
        let p = problem(&request(vec![
            Turn::new("system", "S"),
            Turn::new("user", "U1"),
            Turn::new("assistant", "A1"),
        ]));
        assert_eq!(p.system.as_deref(), Some("S"));
        assert_eq!(
            p.history,
            vec![Turn::new("user", "U1"), Turn::new("assistant", "A1")]
        );
        assert_eq!(p.question, "Q");
        // Without a system message the default one stays; nothing else is invented.
        let p = problem(&request(vec![Turn::new("user", "U1")]));
        assert_eq!(
            p.system.as_deref(),
            Some(ponder_strategies::DEFAULT_SYSTEM_PROMPT)
        );
        assert_eq!(p.history, vec![Turn::new("user", "U1")]);
    }
}
