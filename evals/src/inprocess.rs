//! The in-process backend: the embedded runtime (the default model unless told otherwise)
//! running each item through `ponder::reason`, exactly as the server would.

use std::path::PathBuf;

use async_trait::async_trait;
use ponder::reason::{reason, ReasonRequest};
use ponder::runtime::{Runtime, RuntimeOptions};
use ponder_strategies::{Registry, StrategyError};
use tokio_util::sync::CancellationToken;

use crate::error::{EvalError, Result};
use crate::runner::{Attempt, Backend, Item, Solved};

/// Searches on a runtime in this process.
#[derive(Debug)]
pub struct InProcessBackend {
    runtime: Runtime,
    registry: Registry,
}

impl InProcessBackend {
    /// Loads `model` (default: the installed SmolLM2) and starts its executor.
    pub fn start(model: Option<PathBuf>) -> Result<Self> {
        let opts = RuntimeOptions {
            model: model.unwrap_or_else(ponder::models::default_llm_path),
            ..RuntimeOptions::default_model()
        };
        let runtime = Runtime::start(&opts)
            .map_err(|e| EvalError::Backend(format!("loading {}: {e}", opts.model.display())))?;
        Ok(Self {
            runtime,
            registry: Registry::with_builtins(),
        })
    }

    /// The strategies this backend knows.
    pub fn registry_mut(&mut self) -> &mut Registry {
        &mut self.registry
    }
}

#[async_trait]
impl Backend for InProcessBackend {
    async fn solve(&self, item: &Item) -> Result<Attempt> {
        let req = ReasonRequest {
            problem: item.problem.problem.clone(),
            history: Vec::new(),
            strategy: item.strategy.clone(),
            params: serde_json::Value::Null,
            budget_tokens: item.budget,
            deadline_ms: None,
            seed: item.seed,
        };
        match reason(
            &self.registry,
            self.runtime.generator(),
            None,
            &req,
            CancellationToken::new(),
        )
        .await
        {
            Ok(outcome) => {
                let value = serde_json::to_value(&outcome)
                    .map_err(|e| EvalError::Backend(e.to_string()))?;
                let solved: Solved =
                    serde_json::from_value(value).map_err(|e| EvalError::Backend(e.to_string()))?;
                Ok(Attempt::Solved(solved))
            }
            Err(e @ StrategyError::Generator(_)) => Err(EvalError::Backend(e.to_string())),
            Err(e) => Ok(Attempt::Failed(e.to_string())),
        }
    }
}
