//! One reasoning request, end to end: validate what the caller asked for once (the strategy
//! built from the registry, the budget within its cap, the question non-empty), then run it
//! under the budget over a generator and return the `Outcome`. Every caller goes through here:
//! `ponder reason`, `/v1/reason`, a chat or completion request with a strategy, the harness and
//! the benches. The edges check their own fields first (the API against its `Limits`); what
//! [`ReasonRequest::validate`] returns is what the runner trusts, so nothing is checked twice.

use std::sync::Arc;
use std::time::Duration;

use ponder_strategies::{
    run, Budget, ChatTemplateKwargs, Context, Generator, Outcome, Problem, ProgressSender,
    Registry, SamplingOverride, Strategy, StrategyError, Turn,
};
use ponder_verifiers::Verifier;
use tokio_util::sync::CancellationToken;

use crate::router::Shot;

/// What a caller asks for.
#[derive(Debug, Clone)]
pub struct ReasonRequest {
    /// The question.
    pub problem: String,
    /// The conversation before the question: a system message (replacing
    /// [`ponder_strategies::DEFAULT_SYSTEM_PROMPT`]) and earlier turns. Empty for a bare question.
    pub history: Vec<Turn>,
    /// Worked examples shown before the conversation (after its system message), each as a
    /// user turn and an assistant turn: chosen by [`crate::router::Exemplars`]. Empty: none.
    pub shots: Vec<Shot>,
    /// A registered strategy name.
    pub strategy: String,
    /// Its parameters (JSON object; `null` for defaults).
    pub params: serde_json::Value,
    /// Token budget (generated + computed prefill + verifier tokens).
    pub budget_tokens: u64,
    /// Optional deadline in milliseconds.
    pub deadline_ms: Option<u64>,
    /// Seed for a replayable search.
    pub seed: u64,
}

/// Largest budget accepted where the caller sets no cap of its own (a typo guard, not a
/// policy; the server's cap is its `--max-budget-tokens`).
pub const MAX_BUDGET_TOKENS: u64 = 10_000_000;

/// A [`ReasonRequest`] checked once: its strategy built, its budget in range, its conversation
/// turned into the strategy's [`Problem`]. Only [`ReasonRequest::validate`] makes one.
pub struct ValidReasonRequest {
    strategy: Box<dyn Strategy>,
    problem: Problem,
    budget: Budget,
    seed: u64,
    shots: Vec<String>,
    sampling: SamplingOverride,
    template_kwargs: ChatTemplateKwargs,
}

impl std::fmt::Debug for ValidReasonRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ValidReasonRequest")
            .field("strategy", &self.strategy.name())
            .field("budget", &self.budget)
            .field("seed", &self.seed)
            .field("sampling", &self.sampling)
            .finish_non_exhaustive()
    }
}

impl ValidReasonRequest {
    /// The strategy's registered name.
    pub fn strategy_name(&self) -> &str {
        self.strategy.name()
    }

    /// The token budget.
    pub fn budget_tokens(&self) -> u64 {
        self.budget.tokens
    }

    /// The seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The strategy's problem (question, system message, earlier turns).
    pub fn problem(&self) -> &Problem {
        &self.problem
    }

    /// Runs every generation with the caller's sampling fields over the strategy's own (an
    /// HTTP request's `temperature`, `stop`, `max_tokens`…; see [`SamplingOverride`]).
    pub fn with_sampling(mut self, sampling: SamplingOverride) -> Self {
        self.sampling = sampling;
        self
    }

    /// The caller's sampling fields.
    pub fn sampling(&self) -> &SamplingOverride {
        &self.sampling
    }

    /// Renders every prompt of the search with the caller's chat-template variables (a chat
    /// request's `chat_template_kwargs`; see [`Context::with_template_kwargs`]).
    pub fn with_template_kwargs(mut self, template: ChatTemplateKwargs) -> Self {
        self.template_kwargs = template;
        self
    }
}

impl ReasonRequest {
    /// Checks the request against `registry` and a budget cap of `max_budget_tokens`: the
    /// question is not empty, the budget is in `1..=max_budget_tokens`, the strategy is
    /// registered and its parameters are valid. Each error names the field.
    pub fn validate(
        &self,
        registry: &Registry,
        max_budget_tokens: u64,
    ) -> Result<ValidReasonRequest, StrategyError> {
        if self.problem.trim().is_empty() {
            return Err(StrategyError::invalid(
                &self.strategy,
                "problem",
                "must not be empty",
            ));
        }
        if self.budget_tokens == 0 || self.budget_tokens > max_budget_tokens {
            return Err(StrategyError::invalid(
                &self.strategy,
                "budget_tokens",
                format!(
                    "must be in 1..={max_budget_tokens}, got {}",
                    self.budget_tokens
                ),
            ));
        }
        let strategy = registry.build(&self.strategy, self.params.clone())?;
        Ok(ValidReasonRequest {
            strategy,
            problem: problem(self),
            budget: Budget {
                tokens: self.budget_tokens,
                deadline: self.deadline_ms.map(Duration::from_millis),
            },
            seed: self.seed,
            shots: self.shots.iter().map(|s| s.id.clone()).collect(),
            sampling: SamplingOverride::default(),
            template_kwargs: ChatTemplateKwargs::default(),
        })
    }
}

/// Validates `req` (budget cap [`MAX_BUDGET_TOKENS`]) and runs it.
pub async fn reason(
    registry: &Registry,
    generator: Arc<dyn Generator>,
    verifier: Option<Arc<dyn Verifier>>,
    req: &ReasonRequest,
    cancel: CancellationToken,
) -> Result<Outcome, StrategyError> {
    let valid = req.validate(registry, MAX_BUDGET_TOKENS)?;
    run_valid(valid, generator, verifier, cancel, None).await
}

/// Runs a validated request, reporting the search's [`ponder_strategies::Progress`] to
/// `progress` while it runs.
pub async fn run_valid(
    req: ValidReasonRequest,
    generator: Arc<dyn Generator>,
    verifier: Option<Arc<dyn Verifier>>,
    cancel: CancellationToken,
    progress: Option<ProgressSender>,
) -> Result<Outcome, StrategyError> {
    let mut ctx = Context::new(generator, req.problem, req.budget)
        .with_seed(req.seed)
        .with_sampling(req.sampling)
        .with_template_kwargs(req.template_kwargs)
        .with_cancellation(cancel);
    if let Some(v) = verifier {
        ctx = ctx.with_verifier(v);
    }
    if let Some(p) = progress {
        ctx = ctx.with_progress(p);
    }
    let mut outcome = run(req.strategy.as_ref(), ctx).await?;
    outcome.shots = req.shots;
    Ok(outcome)
}

/// The strategy's problem: the question, the conversation's first system message (else the
/// default one), the worked examples, and every other earlier turn in order.
fn problem(req: &ReasonRequest) -> Problem {
    let mut problem = Problem::new(req.problem.clone());
    let mut turns = req.history.iter().peekable();
    if let Some(system) = turns.next_if(|t| t.role == "system") {
        problem.system = Some(system.content.clone());
    }
    problem.history = req
        .shots
        .iter()
        .flat_map(|s| {
            [
                Turn::new("user", s.problem.as_str()),
                Turn::new("assistant", s.solution.as_str()),
            ]
        })
        .chain(turns.cloned())
        .collect();
    problem
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(history: Vec<Turn>) -> ReasonRequest {
        ReasonRequest {
            problem: "Q".into(),
            history,
            shots: Vec::new(),
            strategy: "best_of_n".into(),
            params: serde_json::Value::Null,
            budget_tokens: 100,
            deadline_ms: None,
            seed: 0,
        }
    }

    fn invalid_field(e: StrategyError) -> String {
        match e {
            StrategyError::InvalidParameter { field, .. } => field,
            other => panic!("expected an invalid field, got {other:?}"),
        }
    }

    #[test]
    fn validation_names_the_field_and_builds_the_strategy_once() {
        let registry = Registry::with_builtins();
        let valid = request(Vec::new())
            .validate(&registry, 1000)
            .expect("a valid request");
        assert_eq!(valid.strategy_name(), "best_of_n");
        assert_eq!(valid.budget_tokens(), 100);
        for (budget, cap) in [(0, 1000), (101, 100)] {
            let req = ReasonRequest {
                budget_tokens: budget,
                ..request(Vec::new())
            };
            let e = req
                .validate(&registry, cap)
                .expect_err("budget out of range");
            assert!(e.to_string().contains(&format!("1..={cap}")), "{e}");
            assert_eq!(invalid_field(e), "budget_tokens");
        }
        let blank = ReasonRequest {
            problem: " \n".into(),
            ..request(Vec::new())
        };
        assert_eq!(
            invalid_field(blank.validate(&registry, 1000).expect_err("blank")),
            "problem"
        );
        let bad_params = ReasonRequest {
            params: serde_json::json!({"n": 0}),
            ..request(Vec::new())
        };
        assert_eq!(
            invalid_field(bad_params.validate(&registry, 1000).expect_err("n = 0")),
            "n"
        );
        let unknown = ReasonRequest {
            strategy: "no_such".into(),
            ..request(Vec::new())
        };
        assert!(unknown.validate(&registry, 1000).is_err());
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

    #[test]
    fn worked_examples_come_after_the_system_message_and_before_the_conversation() {
        let req = ReasonRequest {
            shots: vec![Shot {
                id: "ex".into(),
                problem: "EQ".into(),
                solution: "ES".into(),
            }],
            ..request(vec![
                Turn::new("system", "S"),
                Turn::new("user", "U1"),
                Turn::new("assistant", "A1"),
            ])
        };
        let p = problem(&req);
        assert_eq!(p.system.as_deref(), Some("S"));
        assert_eq!(
            p.history,
            vec![
                Turn::new("user", "EQ"),
                Turn::new("assistant", "ES"),
                Turn::new("user", "U1"),
                Turn::new("assistant", "A1"),
            ]
        );
        let valid = req
            .validate(&Registry::with_builtins(), 1000)
            .expect("a valid request");
        assert_eq!(
            valid.shots,
            vec!["ex".to_string()],
            "the outcome names them"
        );
    }
}
