//! [`ModelPrm`]: a process reward model run by the engine — a reward-head checkpoint
//! (Qwen2.5-Math-PRM) or a causal LM read at its step tags (Math-Shepherd) — as a [`Verifier`].
//!
//! Each solution is laid out in the PRM's format ([`StepLayout`]) and read at every step tag
//! through the executor's scoring path, in the same batches as everyone else's work. Scoring
//! is incremental twice over: step scores are cached by prefix ([`StepCache`]), so a step
//! already scored costs nothing; and a new step is computed on the engine's parked or cached KV
//! of the steps before it, so its tokens are computed once. [`Verifier::score_batch`] submits
//! every candidate's request before awaiting any.
//!
//! Bad solutions never fail: an empty solution, or a finished one with no (or an unparsable)
//! answer, scores "no answer" without touching the model; steps past the model's context score
//! [`NO_ANSWER_SCORE`]. Only a broken engine is an error.

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use ponder_verifiers::{
    Aggregation, AnswerState, PrmFormat, Scores, Solution, Verifier, VerifierError, NO_ANSWER_SCORE,
};

use super::cache::StepCache;
use super::head::{PrmHead, RewardHead, SCORE_HEAD_PREFIX};
use super::layout::StepLayout;
use ponder_engine::batching::{Executor, Scheduler, SchedulerConfig, ScoreHandle, ScoreRequest};
use ponder_engine::forward::{LoadOptions, LoadedModel, PagedKvStore};
use ponder_engine::{EngineError, Result};

/// Which kind of PRM a checkpoint is.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PrmKind {
    /// `Qwen2ForProcessRewardModel`: the `score.*` head on the hidden state at each tag.
    RewardHead,
    /// A causal LM: the logits of the `good` and `bad` tokens at each tag.
    TokenLogits {
        /// The token meaning "this step is right" (Math-Shepherd: `+`).
        good: String,
        /// The token meaning "this step is wrong" (Math-Shepherd: `-`).
        bad: String,
    },
}

/// How to load and run a [`ModelPrm`] on its own executor.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PrmOptions {
    /// A safetensors checkpoint directory (with `tokenizer.json`), or a GGUF for token logits.
    pub model: PathBuf,
    /// Reward head or token logits.
    pub kind: PrmKind,
    /// How the problem and steps are laid out.
    pub format: PrmFormat,
    /// How step scores fold into the overall score.
    pub aggregation: Aggregation,
    /// KV cache memory in bytes.
    pub kv_memory: u64,
    /// Tokens per KV block.
    pub block_size: usize,
    /// Most tokens per forward pass.
    pub max_step_tokens: usize,
    /// Step scores remembered (0: no cache).
    pub cache_capacity: usize,
}

impl PrmOptions {
    /// A Qwen2.5-Math-PRM checkpoint directory: reward head, Qwen format, min aggregation.
    pub fn qwen_math_prm(model: impl Into<PathBuf>) -> Self {
        Self {
            model: model.into(),
            kind: PrmKind::RewardHead,
            format: PrmFormat::qwen_math_prm(),
            aggregation: Aggregation::Min,
            kv_memory: 512 << 20,
            block_size: 16,
            max_step_tokens: 512,
            cache_capacity: 1 << 16,
        }
    }

    /// A Math-Shepherd checkpoint: `+`/`-` logits at ` ки` tags.
    pub fn math_shepherd(model: impl Into<PathBuf>) -> Self {
        Self {
            kind: PrmKind::TokenLogits {
                good: "+".into(),
                bad: "-".into(),
            },
            format: PrmFormat::math_shepherd(),
            ..Self::qwen_math_prm(model)
        }
    }
}

/// A PRM run by the engine, as a verifier.
pub struct ModelPrm {
    name: String,
    model: Arc<LoadedModel>,
    executor: Arc<Executor>,
    head: PrmHead,
    format: PrmFormat,
    aggregation: Aggregation,
    cache: StepCache,
    priority: i32,
}

impl std::fmt::Debug for ModelPrm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelPrm")
            .field("name", &self.name)
            .field("head", &self.head)
            .finish_non_exhaustive()
    }
}

/// A solution's plan: its layout, the steps already known, and the request for the rest.
struct Plan {
    layout: StepLayout,
    known: Vec<Option<f32>>,
    /// Steps (indices) the request reads, in order.
    asked: Vec<usize>,
}

fn backend(name: &str, e: EngineError) -> VerifierError {
    VerifierError::Backend {
        verifier: name.to_string(),
        message: e.to_string(),
    }
}

impl ModelPrm {
    /// Loads the checkpoint and starts an executor of its own for it.
    pub fn start(opts: &PrmOptions) -> Result<Self> {
        let load = LoadOptions::cpu(opts.model.clone());
        let (model, head) = match &opts.kind {
            PrmKind::RewardHead => {
                let (model, extras) = LoadedModel::load_with_extras(&load, |name| {
                    name.starts_with(SCORE_HEAD_PREFIX)
                })?;
                let head = RewardHead::from_tensors(
                    &extras,
                    &opts.model,
                    model.model.config().hidden_size,
                )?;
                (model, PrmHead::Reward(head))
            }
            PrmKind::TokenLogits { good, bad } => {
                let model = LoadedModel::load(&load)?;
                let head = token_head(&model, good, bad)?;
                (model, head)
            }
        };
        let model = Arc::new(model);
        let store =
            PagedKvStore::with_memory(model.model.config(), opts.kv_memory, opts.block_size)?;
        let config = SchedulerConfig {
            max_step_tokens: opts.max_step_tokens,
            ..SchedulerConfig::default()
        };
        let executor = Arc::new(Executor::spawn(Scheduler::new(
            Arc::clone(&model.model),
            store,
            config,
        ))?);
        let prm = Self::new(model, executor, head, opts.format.clone())
            .with_aggregation(opts.aggregation);
        Ok(prm.with_cache_capacity(opts.cache_capacity))
    }

    /// A PRM over an executor already running `model` (e.g. a token-logit PRM sharing the
    /// generator's executor, so its reads batch with generation).
    pub fn new(
        model: Arc<LoadedModel>,
        executor: Arc<Executor>,
        head: PrmHead,
        format: PrmFormat,
    ) -> Self {
        let name = match head {
            PrmHead::Reward(_) => "prm-reward-head",
            PrmHead::TokenLogits { .. } => "prm-token-logits",
        };
        Self {
            name: name.into(),
            model,
            executor,
            head,
            format,
            aggregation: Aggregation::Min,
            cache: StepCache::new(1 << 16),
            priority: 0,
        }
    }

    /// Folds step scores into the overall score with `aggregation` (default: min).
    pub fn with_aggregation(mut self, aggregation: Aggregation) -> Self {
        self.aggregation = aggregation;
        self
    }

    /// Remembers at most `capacity` step scores (0: score every step every time).
    pub fn with_cache_capacity(mut self, capacity: usize) -> Self {
        self.cache = StepCache::new(capacity);
        self
    }

    /// Runs this PRM's reads at `priority` (higher runs first, preempted last).
    pub fn with_priority(mut self, priority: i32) -> Self {
        self.priority = priority;
        self
    }

    /// The executor this PRM runs on (for its counters).
    pub fn executor(&self) -> &Arc<Executor> {
        &self.executor
    }

    /// The loaded model (tokenizer, weights).
    pub fn model(&self) -> &Arc<LoadedModel> {
        &self.model
    }

    /// Lays `solution` out and looks its steps up in the cache; `None` for "no answer".
    fn plan(&self, solution: &Solution<'_>) -> Result<Option<Plan>> {
        if AnswerState::of(solution).is_no_answer() {
            return Ok(None);
        }
        let context = self.model.model.config().context_length;
        let layout = StepLayout::build(&self.model.tokenizer, &self.format, solution, context)?;
        let known: Vec<Option<f32>> = layout.keys.iter().map(|&k| self.cache.get(k)).collect();
        let asked = known
            .iter()
            .enumerate()
            .filter(|(_, s)| s.is_none())
            .map(|(i, _)| i)
            .collect();
        Ok(Some(Plan {
            layout,
            known,
            asked,
        }))
    }

    fn submit(&self, plan: &Plan) -> Result<Option<ScoreHandle>> {
        let Some(&last) = plan.asked.last() else {
            return Ok(None);
        };
        let req = ScoreRequest {
            tokens: plan.layout.through(last).to_vec(),
            positions: plan.asked.iter().map(|&k| plan.layout.tags[k]).collect(),
            output: self.head.output(),
            priority: self.priority,
        };
        self.executor.submit_score(req).map(Some)
    }

    /// Step scores and cost from a plan and its request's result.
    async fn finish(
        &self,
        n_steps: usize,
        plan: Plan,
        handle: Option<ScoreHandle>,
    ) -> Result<Scores> {
        let mut steps: Vec<f32> = plan
            .known
            .iter()
            .map(|s| s.unwrap_or(NO_ANSWER_SCORE))
            .collect();
        let mut cost = 0;
        if let Some(handle) = handle {
            let scored = handle.wait().await?;
            cost = scored.computed;
            let probs = self.head.probabilities(&scored.values)?;
            if probs.len() != plan.asked.len() {
                return Err(EngineError::SizeMismatch {
                    what: "PRM readings for the steps asked",
                    expected: plan.asked.len(),
                    got: probs.len(),
                });
            }
            for (&k, p) in plan.asked.iter().zip(probs) {
                self.cache.insert(plan.layout.keys[k], p);
                steps[k] = p;
            }
        }
        // Steps that did not fit the context were not read.
        steps.resize(n_steps, NO_ANSWER_SCORE);
        let overall = self.aggregation.apply(&steps).unwrap_or(NO_ANSWER_SCORE);
        Ok(Scores {
            steps,
            overall,
            cost,
        })
    }
}

/// A token-logit head from token texts: each must be one token of `model`'s vocabulary.
pub fn token_head(model: &LoadedModel, good: &str, bad: &str) -> Result<PrmHead> {
    let id = |text: &str| -> Result<u32> {
        if let Some(id) = model.tokenizer.token_id(text) {
            return Ok(id);
        }
        match model.tokenizer.encode(text)?.as_slice() {
            [id] => Ok(*id),
            ids => Err(EngineError::InvalidInput {
                field: "prm token",
                reason: format!("{text:?} is {} tokens for this tokenizer; a token-logit PRM needs single tokens", ids.len()),
            }),
        }
    };
    Ok(PrmHead::TokenLogits {
        good: id(good)?,
        bad: id(bad)?,
    })
}

#[async_trait]
impl Verifier for ModelPrm {
    fn name(&self) -> &str {
        &self.name
    }

    async fn score(&self, solution: Solution<'_>) -> ponder_verifiers::Result<Scores> {
        Ok(self
            .score_batch(&[solution])
            .await?
            .into_iter()
            .next()
            .unwrap_or_else(|| Scores::no_answer(solution.steps.len())))
    }

    /// Submits every solution's request before awaiting any, so they share forward passes.
    async fn score_batch(
        &self,
        solutions: &[Solution<'_>],
    ) -> ponder_verifiers::Result<Vec<Scores>> {
        let err = |e| backend(&self.name, e);
        let mut pending = Vec::with_capacity(solutions.len());
        for solution in solutions {
            let plan = self.plan(solution).map_err(err)?;
            let handle = match &plan {
                Some(p) => self.submit(p).map_err(err)?,
                None => None,
            };
            pending.push((solution.steps.len(), plan, handle));
        }
        let mut out = Vec::with_capacity(solutions.len());
        for (n_steps, plan, handle) in pending {
            out.push(match plan {
                None => Scores::no_answer(n_steps),
                Some(plan) => self.finish(n_steps, plan, handle).await.map_err(err)?,
            });
        }
        Ok(out)
    }

    /// The tokens up to the last step not in the cache: the engine computes at most those (it
    /// usually computes only the new step, on parked or cached KV of the ones before). Like the
    /// generator's `prefill_bound`, it excludes recomputation after a preemption, which a PRM
    /// with a pool sized for its work does not see.
    fn cost_bound(&self, solution: &Solution<'_>) -> u64 {
        match self.plan(solution) {
            Ok(Some(plan)) => plan
                .asked
                .last()
                .map_or(0, |&k| plan.layout.through(k).len() as u64),
            Ok(None) => 0,
            // Scoring will fail the same way before computing anything.
            Err(_) => 0,
        }
    }
}
