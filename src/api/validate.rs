//! Parse, then validate, once: a parsed chat or completion request becomes a
//! [`ValidGeneration`] (ranges checked, limits enforced, the model name resolved to a strategy
//! or to plain decoding), and `/v1/reason`'s body a [`ReasonRequest`]. Each error names the
//! field and the limit. [`Limits`] holds this server's limits.
#![deny(clippy::indexing_slicing)]

use std::sync::Arc;
use std::time::Duration;

use ponder_strategies::{
    ChatTemplateKwargs, LogitAdjust, Registry, Sampling, SamplingOverride, Turn,
};
use ponder_verifiers::ReasoningChoice;
use serde_json::Value;

use super::chat_fields::{messages, template_kwargs};
use super::effort::{
    effort_budget, effort_thinking_budget, thinking_budget, with_thinking_budget, THINKING_STRATEGY,
};
use super::error::ValidationError;
use super::fields::{logit_adjustments, refuse_unsupported};
use super::types::{
    ChatCompletionRequest, CommonParams, CompletionRequest, PromptField, ReasonBody, StopField,
};
use crate::reason::ReasonRequest;
use crate::router::MeasuredDefaults;
use ponder_engine::MAX_TOP_LOGPROBS;

/// This server's limits.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Largest request body in bytes.
    pub max_body_bytes: usize,
    /// Most choices per request.
    pub max_n: usize,
    /// Largest `max_tokens` / `max_completion_tokens`.
    pub max_completion_tokens: usize,
    /// Largest `budget_tokens`.
    pub max_budget_tokens: u64,
    /// Most alternatives per token.
    pub max_top_logprobs: usize,
    /// Most stop strings.
    pub max_stop: usize,
    /// Longest stop string in bytes.
    pub max_stop_bytes: usize,
    /// Generation requests running at once.
    pub max_running: usize,
    /// Generation requests waiting for a slot; beyond that, 429.
    pub max_queue: usize,
    /// `Retry-After` seconds sent with a 429.
    pub retry_after_s: u64,
    /// Completion tokens when the request sets none.
    pub default_max_tokens: usize,
    /// Budget when the request sets neither `budget_tokens` nor `reasoning_effort`.
    pub default_budget_tokens: u64,
    /// Strategy run by `/v1/reason` without `strategy`, and by a chat request that sets a budget,
    /// where no measured defaults apply (the built-in default).
    pub default_strategy: String,
    /// What a search that names no strategy runs at each budget, as validation measured it
    /// (`ponder serve` loads `data/router/defaults.json`; `None`: `default_strategy` always).
    pub measured_defaults: Option<Arc<MeasuredDefaults>>,
    /// SSE keep-alive interval.
    pub keep_alive: Duration,
    /// Worked examples a search (`/v1/reason`, or a chat or completion with a strategy) is
    /// shown when it sets no `shots` (`--shots`); `None`: see [`Limits::shots_for`].
    pub default_shots: Option<usize>,
    /// Worked examples `auto`'s calibration rows were measured with
    /// ([`crate::router::Router::auto_shots`]; 0 without a router).
    pub auto_shots: usize,
}

impl Limits {
    /// Worked examples a search of `strategy` that sets no `shots` is shown
    /// ([`crate::router::default_shots`]).
    pub fn shots_for(&self, strategy: &str) -> usize {
        crate::router::default_shots(strategy, self.default_shots, self.auto_shots)
    }

    /// The budget of a request that names none: the default, within the operator's cap.
    pub fn default_budget(&self) -> u64 {
        self.default_budget_tokens.min(self.max_budget_tokens)
    }

    /// What a search of `budget` tokens that names no strategy runs: the measured default of
    /// that budget (its strategy, its parameters as measured, and the worked examples it was
    /// measured with unless `--shots` sets a count), else `default_strategy` with its own
    /// parameters and the server's rule for its examples.
    pub fn default_search(&self, budget: u64) -> DefaultSearch {
        match self
            .measured_defaults
            .as_deref()
            .and_then(|d| d.for_budget(budget))
        {
            Some(entry) => DefaultSearch {
                strategy: entry.strategy.clone(),
                params: entry.params.clone(),
                shots: match (self.default_shots, entry.shots) {
                    (None, Some(k)) => k,
                    _ => self.shots_for(&entry.strategy),
                },
            },
            None => DefaultSearch {
                strategy: self.default_strategy.clone(),
                params: Value::Null,
                shots: self.shots_for(&self.default_strategy),
            },
        }
    }
}

/// The search a request that names no strategy runs ([`Limits::default_search`]).
#[derive(Debug, Clone, PartialEq)]
pub struct DefaultSearch {
    /// A registered strategy name.
    pub strategy: String,
    /// Its parameters (`null`: its own defaults).
    pub params: Value,
    /// Worked examples shown when the request sets no `shots`.
    pub shots: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_body_bytes: 1 << 20,
            max_n: 16,
            max_completion_tokens: 4096,
            max_budget_tokens: 200_000,
            max_top_logprobs: MAX_TOP_LOGPROBS,
            max_stop: 4,
            max_stop_bytes: 256,
            max_running: 8,
            max_queue: 64,
            retry_after_s: 1,
            default_max_tokens: 256,
            default_budget_tokens: 4096,
            default_strategy: "self_consistency".into(),
            measured_defaults: None,
            keep_alive: Duration::from_secs(5),
            default_shots: None,
            auto_shots: 0,
        }
    }
}

/// What to continue.
#[derive(Debug, Clone)]
pub(crate) enum PromptIn {
    /// A conversation, rendered with the model's chat template.
    Chat(Vec<Turn>),
    /// Raw text.
    Text(String),
    /// Token ids of the model's vocabulary, as given (`/v1/completions` only).
    Tokens(Vec<u32>),
}

/// A strategy run asked for by `strategy`, `ponder/<strategy>`, a budget or a reasoning effort.
#[derive(Debug, Clone)]
pub(crate) struct ValidStrategy {
    /// Registered name.
    pub name: String,
    /// Parameters (`null` for defaults).
    pub params: Value,
    /// Token budget.
    pub budget_tokens: u64,
    /// Deadline in milliseconds.
    pub deadline_ms: Option<u64>,
    /// Return the search tree.
    pub return_trace: bool,
    /// Worked examples to choose for the question.
    pub shots: usize,
    /// The request's sampling fields, over the strategy's own.
    pub sampling: SamplingOverride,
}

/// A validated chat or completion request.
#[derive(Debug, Clone)]
pub(crate) struct ValidGeneration {
    /// The model name as sent (echoed back).
    pub model: String,
    /// What to continue.
    pub prompt: PromptIn,
    /// Most completion tokens, if set.
    pub max_tokens: Option<usize>,
    /// Sampling of each choice (its seed is the base seed: choice i samples with seed + i).
    pub sampling: Sampling,
    /// Penalties and biases applied to every choice's logits.
    pub logits: LogitAdjust,
    /// Choices.
    pub n: usize,
    /// Stop strings.
    pub stop: Vec<String>,
    /// Stream over SSE.
    pub stream: bool,
    /// Send usage in a last chunk.
    pub include_usage: bool,
    /// Return logprobs.
    pub logprobs: bool,
    /// `/v1/completions` `echo`: the reply starts with the prompt (and, with `logprobs`, the
    /// prompt's logprobs, the first token's null).
    pub echo: bool,
    /// Run a strategy rather than plain decoding.
    pub strategy: Option<ValidStrategy>,
    /// Chat: the chat template's variables (`chat_template_kwargs`), for plain decoding's
    /// prompt and every prompt of a search.
    pub template_kwargs: ChatTemplateKwargs,
    /// Chat: how the reply's thinking is split off (`reasoning_parser`; `None`: the server's).
    pub reasoning: Option<ReasoningChoice>,
}

pub(super) fn int_in(
    field: &'static str,
    v: i64,
    lo: i64,
    limit: u64,
) -> Result<u64, ValidationError> {
    if v < lo {
        return Err(ValidationError::invalid(
            field,
            format!("must be at least {lo}, got {v}"),
        ));
    }
    let v = v as u64;
    if v > limit {
        return Err(ValidationError::OverLimit {
            field,
            limit,
            got: v,
        });
    }
    Ok(v)
}

/// Validates the shared fields; `top_logprobs` is already read from the flavour's field.
fn common(
    c: &CommonParams,
    prompt: PromptIn,
    logprobs: bool,
    top_logprobs: Option<i64>,
    limits: &Limits,
    registry: &Registry,
    model_id: &str,
) -> Result<ValidGeneration, ValidationError> {
    refuse_unsupported(c)?;
    let model_strategy = match c.model.as_str() {
        "ponder" => None,
        m if m == model_id => None,
        m => match m.strip_prefix("ponder/") {
            Some(s) if registry.contains(s) => Some(s.to_string()),
            _ => return Err(ValidationError::UnknownModel(m.to_string())),
        },
    };
    let max_tokens = match c.max_completion_tokens.or(c.max_tokens) {
        Some(v) => Some(int_in(
            "max_completion_tokens",
            v,
            1,
            limits.max_completion_tokens as u64,
        )? as usize),
        None => None,
    };
    let asked = sampling_fields(
        SamplingFields {
            temperature: c.temperature,
            top_p: c.top_p,
            top_k: c.top_k,
            min_p: c.min_p,
            stop: c.stop.as_ref(),
            max_tokens: None,
        },
        limits,
    )?;
    let n = int_in("n", c.n.unwrap_or(1), 1, limits.max_n as u64)? as usize;
    let top = match top_logprobs {
        Some(v) => int_in("top_logprobs", v, 0, limits.max_top_logprobs as u64)? as usize,
        None => 0,
    };
    let seed = match &c.seed {
        Some(s) => seed_of(s)?,
        None => random_seed(),
    };
    let stream = c.stream.unwrap_or(false);
    let include_usage = c.stream_options.as_ref().is_some_and(|o| o.include_usage);
    let effort = match &c.reasoning_effort {
        Some(e) => Some(effort_budget(e)?),
        None => None,
    };
    let budget = match (c.budget_tokens, effort) {
        (Some(b), _) => Some(int_in("budget_tokens", b, 1, limits.max_budget_tokens)?),
        // An effort level names a budget; the operator's cap still bounds it.
        (None, Some(Some(e))) => Some(e.min(limits.max_budget_tokens)),
        (None, Some(None) | None) => None,
    };
    let deadline_ms = match c.deadline_ms {
        Some(d) => Some(int_in("deadline_ms", d, 1, 3_600_000)?),
        None => None,
    };
    let thinking = thinking_budget(c, limits.max_budget_tokens)?;
    // The measured default's parameters and examples, when the request names no strategy.
    let mut defaulted = None;
    let name = match (&c.strategy, model_strategy) {
        (Some(s), _) => {
            if !registry.contains(s) {
                return Err(ValidationError::invalid(
                    "strategy",
                    format!(
                        "unknown strategy {s:?}; valid strategies: {}",
                        registry.names().join(", ")
                    ),
                ));
            }
            Some(s.clone())
        }
        (None, Some(s)) => Some(s),
        // A thinking budget is budget forcing's maximum.
        (None, None) if thinking.is_some() => Some(THINKING_STRATEGY.to_string()),
        (None, None) if budget.is_some() || c.strategy_params.is_some() => {
            let search = limits.default_search(budget.unwrap_or(limits.default_budget()));
            let name = search.strategy.clone();
            defaulted = Some(search);
            Some(name)
        }
        (None, None) => None,
    };
    if let (Some((_, field)), Some(other)) = (thinking, name.as_deref()) {
        if other != THINKING_STRATEGY {
            return Err(ValidationError::invalid(
                field,
                format!("bounds {THINKING_STRATEGY}'s thinking; the request asks for {other}"),
            ));
        }
    }
    // The thinking budget: the request's, else the one its effort names.
    let thinking_params = match (thinking, effort) {
        (Some((t, field)), _) => Some((t, Some(field))),
        (None, Some(Some(e))) => Some((
            effort_thinking_budget(e.min(limits.max_budget_tokens)),
            None,
        )),
        _ => None,
    }
    .filter(|_| name.as_deref() == Some(THINKING_STRATEGY));
    if name.is_some() && effort == Some(None) {
        return Err(ValidationError::invalid(
            "reasoning_effort",
            "\"none\" asks for no search, but the request asks for one (a strategy, a \
             ponder/<strategy> model, a budget or strategy_params): drop one of them",
        ));
    }
    let shots = match c.shots {
        Some(k) => int_in("shots", k, 0, crate::router::MAX_SHOTS as u64)? as usize,
        None => match &defaulted {
            Some(search) => search.shots,
            None => name.as_deref().map_or(0, |n| limits.shots_for(n)),
        },
    };
    // Fields of a search alone: refused, not dropped, in plain decoding.
    for (field, set) in [
        ("shots", c.shots.is_some_and(|k| k > 0)),
        ("deadline_ms", c.deadline_ms.is_some()),
        ("return_trace", c.return_trace == Some(true)),
    ] {
        if name.is_none() && set {
            return Err(ValidationError::invalid(
                field,
                "applies to a search: set a strategy (or a budget) with it",
            ));
        }
    }
    let mut params = match (&c.strategy_params, defaulted) {
        (Some(p), _) => p.clone(),
        (None, Some(search)) => search.params,
        (None, None) => Value::Null,
    };
    if let Some((t, field)) = thinking_params {
        params = with_thinking_budget(params, t, field)?;
    }
    let strategy = name.map(|name| ValidStrategy {
        name,
        params,
        budget_tokens: budget.unwrap_or(limits.default_budget()),
        deadline_ms,
        return_trace: c.return_trace.unwrap_or(false),
        shots,
        sampling: SamplingOverride {
            max_tokens,
            ..asked.clone()
        },
    });
    let adjust = logit_adjustments(c)?;
    if let (Some(_), Some(field)) = (&strategy, adjust.field) {
        return Err(ValidationError::invalid(
            field,
            "is not applied by strategies (they sample with their own parameters); \
             send it without a strategy, or set the strategy's parameters in strategy_params",
        ));
    }
    if strategy.is_some() && n > 1 {
        return Err(ValidationError::invalid(
            "n",
            "must be 1 when a strategy runs (the strategy chooses one answer)",
        ));
    }
    if strategy.is_some() && logprobs {
        return Err(ValidationError::invalid(
            "logprobs",
            "is not returned when a strategy runs (its answer is chosen among many sampled \
             branches, not one sequence of tokens); send it without a strategy",
        ));
    }
    if strategy.is_some() && matches!(prompt, PromptIn::Tokens(_)) {
        return Err(ValidationError::invalid(
            "prompt",
            "a strategy reads its question as text: send the prompt as a string",
        ));
    }
    Ok(ValidGeneration {
        model: c.model.clone(),
        prompt,
        max_tokens,
        echo: false,
        sampling: Sampling {
            // OpenAI's defaults where the request sets none.
            temperature: asked.temperature.unwrap_or(1.0),
            top_p: asked.top_p.unwrap_or(1.0),
            top_k: asked.top_k.unwrap_or(0),
            min_p: asked.min_p.unwrap_or(0.0),
            seed,
            top_logprobs: if logprobs { top } else { 0 },
        },
        logits: adjust.logits,
        n,
        stop: asked.stop,
        stream,
        include_usage,
        logprobs,
        strategy,
        template_kwargs: ChatTemplateKwargs::default(),
        reasoning: None,
    })
}

/// A request's sampling fields as sent, before they are checked.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SamplingFields<'a> {
    pub(crate) temperature: Option<f64>,
    pub(crate) top_p: Option<f64>,
    pub(crate) top_k: Option<i64>,
    pub(crate) min_p: Option<f64>,
    pub(crate) stop: Option<&'a StopField>,
    pub(crate) max_tokens: Option<i64>,
}

/// Checks the sampling fields a plain request and a search share, each against its range or
/// this server's limit: what is unset stays unset (plain decoding then takes OpenAI's
/// defaults, a search its strategy's own).
pub(crate) fn sampling_fields(
    f: SamplingFields<'_>,
    limits: &Limits,
) -> Result<SamplingOverride, ValidationError> {
    let ranged = |field: &'static str, v: Option<f64>, ok: fn(f64) -> bool, range: &str| match v {
        Some(x) if !ok(x) => Err(ValidationError::invalid(
            field,
            format!("must be in {range}, got {x}"),
        )),
        _ => Ok(v),
    };
    let temperature = ranged(
        "temperature",
        f.temperature,
        |t| (0.0..=2.0).contains(&t),
        "[0, 2]",
    )?;
    let top_p = ranged("top_p", f.top_p, |p| p > 0.0 && p <= 1.0, "(0, 1]")?;
    let min_p = ranged("min_p", f.min_p, |p| (0.0..=1.0).contains(&p), "[0, 1]")?;
    let top_k = match f.top_k {
        Some(k) => Some(int_in("top_k", k, 0, u64::from(u32::MAX))? as usize),
        None => None,
    };
    let max_tokens = match f.max_tokens {
        Some(v) => Some(int_in("max_tokens", v, 1, limits.max_completion_tokens as u64)? as usize),
        None => None,
    };
    let stop = match f.stop {
        None => Vec::new(),
        Some(StopField::One(s)) => vec![s.clone()],
        Some(StopField::Many(v)) => v.clone(),
    };
    if stop.len() > limits.max_stop {
        return Err(ValidationError::OverLimit {
            field: "stop",
            limit: limits.max_stop as u64,
            got: stop.len() as u64,
        });
    }
    if let Some(s) = stop
        .iter()
        .find(|s| s.is_empty() || s.len() > limits.max_stop_bytes)
    {
        return Err(ValidationError::invalid(
            "stop",
            format!(
                "each stop string must be 1..={} bytes, got {}",
                limits.max_stop_bytes,
                s.len()
            ),
        ));
    }
    Ok(SamplingOverride {
        temperature,
        top_p,
        top_k,
        min_p,
        stop,
        max_tokens,
    })
}

/// A seed from any 64-bit integer (negative ones wrap, as OpenAI's are signed).
fn seed_of(n: &serde_json::Number) -> Result<u64, ValidationError> {
    n.as_u64()
        .or_else(|| n.as_i64().map(|i| i as u64))
        .ok_or_else(|| {
            ValidationError::invalid("seed", format!("must be a 64-bit integer, got {n}"))
        })
}

fn random_seed() -> u64 {
    use rand::Rng;
    rand::rng().random()
}

/// Validates a chat request.
pub(crate) fn chat(
    req: &ChatCompletionRequest,
    limits: &Limits,
    registry: &Registry,
    model_id: &str,
) -> Result<ValidGeneration, ValidationError> {
    let prompt = PromptIn::Chat(messages(&req.messages)?);
    let logprobs = req.logprobs.unwrap_or(false);
    if req.top_logprobs.is_some_and(|t| t > 0) && !logprobs {
        return Err(ValidationError::invalid(
            "top_logprobs",
            "requires logprobs: true",
        ));
    }
    let template_kwargs = template_kwargs(req.chat_template_kwargs.as_ref())?;
    let reasoning = match &req.reasoning_parser {
        Some(name) => Some(
            ReasoningChoice::named(name)
                .map_err(|e| ValidationError::invalid("reasoning_parser", e.to_string()))?,
        ),
        None => None,
    };
    Ok(ValidGeneration {
        template_kwargs,
        reasoning,
        ..common(
            &req.common,
            prompt,
            logprobs,
            req.top_logprobs,
            limits,
            registry,
            model_id,
        )?
    })
}

/// Validates a legacy completion request.
pub(crate) fn completion(
    req: &CompletionRequest,
    limits: &Limits,
    registry: &Registry,
    model_id: &str,
) -> Result<ValidGeneration, ValidationError> {
    let one = |len: usize| {
        ValidationError::invalid(
            "prompt",
            format!("must be one prompt, got a list of {len} (send one request per prompt)"),
        )
    };
    let prompt = match &req.prompt {
        PromptField::One(s) => PromptIn::Text(s.clone()),
        PromptField::Many(v) => match v.as_slice() {
            [s] => PromptIn::Text(s.clone()),
            _ => return Err(one(v.len())),
        },
        PromptField::Tokens(ids) => PromptIn::Tokens(ids.clone()),
        PromptField::ManyTokens(v) => match v.as_slice() {
            [ids] => PromptIn::Tokens(ids.clone()),
            _ => return Err(one(v.len())),
        },
    };
    match &prompt {
        PromptIn::Text(t) if t.trim().is_empty() => {
            return Err(ValidationError::invalid("prompt", "must not be empty"))
        }
        PromptIn::Tokens(ids) if ids.is_empty() => {
            return Err(ValidationError::invalid("prompt", "must not be empty"))
        }
        _ => {}
    }
    let echo = req.echo.unwrap_or(false);
    if !matches!(&req.suffix, None | Some(Value::Null)) {
        return Err(ValidationError::invalid("suffix", "is not supported"));
    }
    if let Some(b) = req.best_of {
        if b != req.common.n.unwrap_or(1) {
            return Err(ValidationError::invalid(
                "best_of",
                format!("is not supported: it must equal n, got {b}"),
            ));
        }
    }
    let searching = req.common.strategy.is_some() || req.common.model.starts_with("ponder/");
    let prompt = match prompt {
        // A strategy reasons about a problem: the prompt is its question.
        PromptIn::Text(text) if searching => PromptIn::Chat(vec![Turn::new("user", text)]),
        other => other,
    };
    let mut valid = common(
        &req.common,
        prompt,
        req.logprobs.is_some(),
        req.logprobs,
        limits,
        registry,
        model_id,
    )?;
    if echo {
        if valid.strategy.is_some() {
            return Err(ValidationError::invalid(
                "echo",
                "is not returned when a strategy runs (its prompt is a search's question, not \
                 the text continued); send it without a strategy",
            ));
        }
        valid.echo = true;
    }
    Ok(valid)
}

/// A `/v1/reason` body checked: the request (its `shots` still empty), how many worked
/// examples to choose for it, and its sampling fields (over the strategy's own).
pub(crate) fn reason(
    body: &ReasonBody,
    limits: &Limits,
    registry: &Registry,
) -> Result<(ReasonRequest, usize, SamplingOverride), ValidationError> {
    if body.problem.trim().is_empty() {
        return Err(ValidationError::invalid("problem", "must not be empty"));
    }
    let sampling = sampling_fields(
        SamplingFields {
            temperature: body.temperature,
            top_p: body.top_p,
            top_k: body.top_k,
            min_p: body.min_p,
            stop: body.stop.as_ref(),
            max_tokens: body.max_tokens,
        },
        limits,
    )?;
    let budget = int_in(
        "budget_tokens",
        body.budget_tokens.unwrap_or(limits.default_budget() as i64),
        1,
        limits.max_budget_tokens,
    )?;
    // The measured default of the budget when the body names no strategy.
    let (strategy, defaulted) = match &body.strategy {
        Some(s) => (s.clone(), None),
        None => {
            let search = limits.default_search(budget);
            (search.strategy.clone(), Some(search))
        }
    };
    if !registry.contains(&strategy) {
        return Err(ValidationError::invalid(
            "strategy",
            format!(
                "unknown strategy {strategy:?}; valid strategies: {}",
                registry.names().join(", ")
            ),
        ));
    }
    let deadline_ms = match body.deadline_ms {
        Some(d) => Some(int_in("deadline_ms", d, 1, 3_600_000)?),
        None => None,
    };
    let shots = match body.shots {
        Some(k) => int_in("shots", k, 0, crate::router::MAX_SHOTS as u64)? as usize,
        None => match &defaulted {
            Some(search) => search.shots,
            None => limits.shots_for(&strategy),
        },
    };
    let req = ReasonRequest {
        problem: body.problem.clone(),
        history: Vec::new(),
        shots: Vec::new(),
        strategy,
        params: match defaulted {
            Some(search) if body.params.is_null() => search.params,
            _ => body.params.clone(),
        },
        budget_tokens: budget,
        deadline_ms,
        seed: match &body.seed {
            Some(s) => seed_of(s)?,
            None => 0,
        },
    };
    Ok((req, shots, sampling))
}

/// The problem a strategy answers: the last user message, and the whole conversation before it
/// (system message and earlier turns, in order; see `ReasonRequest::validate`). Messages after
/// the last user message (an assistant prefix) are not part of the question.
pub(crate) fn problem_of(prompt: &PromptIn) -> (String, Vec<Turn>) {
    match prompt {
        PromptIn::Text(t) => (t.clone(), Vec::new()),
        // Refused with a strategy (`common`): a search reads its question as text.
        PromptIn::Tokens(_) => (String::new(), Vec::new()),
        PromptIn::Chat(msgs) => {
            let Some(last) = msgs.iter().rposition(|m| m.role == "user") else {
                return (String::new(), Vec::new());
            };
            let question = msgs
                .get(last)
                .map(|m| m.content.clone())
                .unwrap_or_default();
            let history = msgs.get(..last).unwrap_or_default().to_vec();
            (question, history)
        }
    }
}

/// Parses and validates `bytes` as the body of `route` (`/v1/chat/completions`,
/// `/v1/completions` or `/v1/reason`) as its handler does, and builds the strategy a valid request
/// names, running nothing. The entry point of the property tests and the fuzz targets.
#[doc(hidden)]
pub fn check_body(
    route: &str,
    bytes: &[u8],
    limits: &Limits,
    registry: &Registry,
) -> Result<(), super::AppError> {
    use super::AppError;
    let parse_err = |e: serde_json::Error| AppError::MalformedJson(e.to_string());
    let build = |v: ValidGeneration| -> Result<(), AppError> {
        match v.strategy {
            Some(s) => registry
                .build(&s.name, s.params)
                .map(drop)
                .map_err(AppError::from),
            None => Ok(()),
        }
    };
    match route {
        "/v1/chat/completions" => build(chat(
            &serde_json::from_slice(bytes).map_err(parse_err)?,
            limits,
            registry,
            "local",
        )?),
        "/v1/completions" => build(completion(
            &serde_json::from_slice(bytes).map_err(parse_err)?,
            limits,
            registry,
            "local",
        )?),
        "/v1/reason" => {
            let (r, _shots, _sampling) = reason(
                &serde_json::from_slice(bytes).map_err(parse_err)?,
                limits,
                registry,
            )?;
            registry
                .build(&r.strategy, r.params)
                .map(drop)
                .map_err(AppError::from)
        }
        _ => Err(AppError::NotFound),
    }
}
