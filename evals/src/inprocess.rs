//! The in-process backend: the embedded runtime (the default model unless told otherwise)
//! running each item through `ponder::reason`, exactly as the server would, with the verifier
//! chosen on the command line (`--verifier`) and worked examples chosen from a pool as the
//! server's router chooses them (`--shots`); items whose strategies begin with the same samples
//! may share one draw ([`SharedDraws`], `--share-draws`).

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use ponder::prm::VerifierChoice;
use ponder::reason::{reason, ReasonRequest};
use ponder::router::Exemplars;
use ponder_engine::{Runtime, RuntimeOptions};
use ponder_strategies::{Outcome, Registry, StrategyError};
use ponder_verifiers::Verifier;
use tokio_util::sync::CancellationToken;

use crate::error::{EvalError, Result};
use crate::runner::{Attempt, Backend, Item, Solved};
use crate::shared_draws::{self, DrawKey, SharedDraws};

/// Searches on a runtime in this process.
pub struct InProcessBackend {
    runtime: Runtime,
    /// The weights file the runtime loaded (a learned verifier must have been fitted on it).
    model: PathBuf,
    registry: Registry,
    verifier: Option<Arc<dyn Verifier>>,
    exemplars: Option<Exemplars>,
    shot_rule: ShotRule,
    shared_draws: Option<Arc<SharedDraws>>,
}

/// How an item's worked examples are chosen from the pool.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ShotRule {
    /// The question's nearest examples (the server's rule).
    #[default]
    Nearest,
    /// The same first examples of the pool for every question (the fixed baseline).
    Fixed,
}

impl std::fmt::Debug for InProcessBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InProcessBackend")
            .field("registry", &self.registry)
            .field(
                "verifier",
                &self.verifier.as_ref().map(|v| v.name().to_string()),
            )
            .finish_non_exhaustive()
    }
}

impl InProcessBackend {
    /// Loads `model` (default: the installed SmolLM2) and starts its executor.
    pub fn start(model: Option<PathBuf>) -> Result<Self> {
        let opts = RuntimeOptions {
            model: model.unwrap_or_else(ponder::models::default_llm_path),
            ..RuntimeOptions::for_model(ponder::models::default_llm_path())
        };
        let runtime = Runtime::start(&opts)
            .map_err(|e| EvalError::Backend(format!("loading {}: {e}", opts.model.display())))?;
        Ok(Self {
            runtime,
            model: opts.model,
            registry: Registry::with_builtins(),
            verifier: None,
            exemplars: None,
            shot_rule: ShotRule::Nearest,
            shared_draws: None,
        })
    }

    /// Scores candidates with `choice` (built on this runtime's generator, as `ponder serve
    /// --verifier` does).
    pub async fn use_verifier(&mut self, choice: &VerifierChoice) -> Result<()> {
        let served = ponder::models::FittedModel::of_file(&self.model).map_err(|e| {
            EvalError::Backend(format!("reading the model {}: {e}", self.model.display()))
        })?;
        self.verifier = choice
            .build(self.runtime.generator(), &served)
            .await
            .map_err(EvalError::Backend)?;
        Ok(())
    }

    /// Shows an item's `shots` worked examples from `pool` (the router's choice, as `ponder
    /// serve --exemplars` makes it). Without a pool, an item that asks for examples fails.
    pub fn use_exemplars(&mut self, pool: Exemplars) {
        self.exemplars = Some(pool);
    }

    /// How the examples are chosen (default: the nearest, as the server does).
    pub fn use_shot_rule(&mut self, rule: ShotRule) {
        self.shot_rule = rule;
    }

    /// Lets items whose strategies begin with the same samples take them from one draw
    /// ([`SharedDraws`]); only without a verifier (a vote would not pay for its calls).
    pub fn use_shared_draws(&mut self, draws: Arc<SharedDraws>) {
        self.shared_draws = Some(draws);
    }

    /// The strategies this backend knows.
    pub fn registry_mut(&mut self) -> &mut Registry {
        &mut self.registry
    }
}

#[async_trait]
impl Backend for InProcessBackend {
    async fn solve(&self, item: &Item) -> Result<Attempt> {
        let shots = match (&self.exemplars, item.shots) {
            (_, 0) => Vec::new(),
            (Some(pool), k) => match self.shot_rule {
                ShotRule::Nearest => pool
                    .nearest(&item.problem.problem, k)
                    .map_err(|e| EvalError::Backend(format!("choosing worked examples: {e}")))?,
                ShotRule::Fixed => pool.fixed(&item.problem.problem, k),
            },
            (None, k) => {
                return Err(EvalError::Backend(format!(
                    "{k} worked examples asked for, but the backend has no pool (use_exemplars)"
                )))
            }
        };
        let req = ReasonRequest {
            problem: item.problem.problem.clone(),
            history: Vec::new(),
            shots,
            strategy: item.strategy.clone(),
            params: item.params.clone(),
            budget_tokens: item.budget,
            deadline_ms: None,
            seed: item.seed,
        };
        if let Some(drawn) = self.shared_draw(item, &req).await {
            return Ok(Attempt::Solved(solved(&drawn)?));
        }
        match self.reason(&req).await {
            Ok(outcome) => Ok(Attempt::Solved(solved(&outcome)?)),
            Err(e @ StrategyError::Generator(_)) => Err(EvalError::Backend(e.to_string())),
            Err(e) => Ok(Attempt::Failed(e.to_string())),
        }
    }
}

impl InProcessBackend {
    async fn reason(&self, req: &ReasonRequest) -> std::result::Result<Outcome, StrategyError> {
        reason(
            &self.registry,
            self.runtime.generator(),
            self.verifier.clone(),
            req,
            CancellationToken::new(),
        )
        .await
    }

    /// `item`'s outcome from the draw it shares with other items, if shared draws are on and
    /// it can share one (`None`: it runs on its own).
    async fn shared_draw(&self, item: &Item, req: &ReasonRequest) -> Option<Outcome> {
        let draws = self.shared_draws.as_ref()?;
        if self.verifier.is_some() {
            return None;
        }
        let sharer = shared_draws::sharer(&self.registry, &item.strategy, &item.params)?;
        let key = DrawKey {
            problem: item.problem.id.clone(),
            budget: item.budget,
            seed: item.seed,
            shots: req.shots.iter().map(|s| s.id.clone()).collect(),
            drawer_params: sharer.drawer_params.to_string(),
        };
        let drawer = sharer.drawer_request(req);
        let drawn = draws
            .get(key, async {
                self.reason(&drawer)
                    .await
                    .ok()
                    .and_then(shared_draws::shareable)
            })
            .await?;
        Some(shared_draws::outcome_for(&sharer, &drawn))
    }
}

/// The harness's view of an outcome (what `/v1/reason` would have answered).
fn solved(outcome: &Outcome) -> Result<Solved> {
    let value = serde_json::to_value(outcome).map_err(|e| EvalError::Backend(e.to_string()))?;
    serde_json::from_value(value).map_err(|e| EvalError::Backend(e.to_string()))
}
