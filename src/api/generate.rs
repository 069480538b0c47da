//! The generation endpoints. A request without a strategy runs straight through the executor
//! (its `n` choices are one group: the prompt is prefilled once and forked), so `stream: true`
//! yields real tokens as the batch produces them. A request with a strategy (`strategy`,
//! `ponder/<name>`, `budget_tokens` or `reasoning_effort`) runs the search on a task; streaming
//! sends its progress (leader, vote margin, spend) in the `ponder` extension field, then the
//! answer. Either way the request holds a queue [`Slot`] and the executor's group handle (or the
//! search's cancellation guard) inside the response future or stream, so a client that goes away
//! drops them: the group is cancelled and its KV blocks are freed at the next scheduler step.
#![deny(clippy::indexing_slicing)]

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures_util::Stream;
use ponder_strategies::{GeneratorError, Outcome, Progress, SearchFinish, Stops, StrategyError};
use serde_json::json;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::error::{AppError, Result, ValidationError};
use super::extract::ApiJson;
use super::guard::Slot;
use super::metrics::Metrics;
use super::responses::{
    ChatCompletion, ChoiceFinish, PonderChunkField, ProgressUpdate, SearchSummary, TextCompletion,
};
use super::sse::{data, done, ChoiceOut, Envelope, Flavor};
use super::types::{ChatCompletionRequest, CompletionRequest, ReasonBody, UsageOut};
use super::validate::{self, PromptIn, ValidGeneration};
use super::AppState;
use crate::backends::StopStrings;
use crate::engine::{
    encode_prompt, Event as EngineEvent, GroupHandle, GroupRequest, LoadedModel, SampledToken,
    SeqFinish, StopCondition,
};
use crate::reason::{reason_with_progress, ReasonRequest};

/// `POST /v1/chat/completions`.
#[utoipa::path(post, path = "/v1/chat/completions", tag = "completions",
    summary = "Chat completion (OpenAI-compatible, with budget extensions)",
    request_body = ChatCompletionRequest,
    responses((status = 200, description = "The completion, or with `stream: true` server-sent \
        events whose data are `ChatCompletionChunk`s (an `Error` if the run fails), then `[DONE]`",
        content((ChatCompletion = "application/json"), (String = "text/event-stream")))))]
pub(crate) async fn chat_completions(
    State(state): State<Arc<AppState>>,
    ApiJson(req): ApiJson<ChatCompletionRequest>,
) -> Result<Response> {
    let valid = validate::chat(&req, &state.limits, &state.registry, &state.model_id)?;
    generate(state, valid, Flavor::Chat).await
}

/// `POST /v1/completions`.
#[utoipa::path(post, path = "/v1/completions", tag = "completions",
    summary = "Text completion (OpenAI-compatible legacy API)",
    request_body = CompletionRequest,
    responses((status = 200, description = "The completion, or with `stream: true` server-sent \
        events whose data are `TextCompletionChunk`s (an `Error` if the run fails), then `[DONE]`",
        content((TextCompletion = "application/json"), (String = "text/event-stream")))))]
pub(crate) async fn completions(
    State(state): State<Arc<AppState>>,
    ApiJson(req): ApiJson<CompletionRequest>,
) -> Result<Response> {
    let valid = validate::completion(&req, &state.limits, &state.registry, &state.model_id)?;
    generate(state, valid, Flavor::Text).await
}

/// `POST /v1/reason`: the whole [`Outcome`].
#[utoipa::path(post, path = "/v1/reason", tag = "reason",
    summary = "Run a strategy and return the whole Outcome",
    request_body = ReasonBody,
    responses((status = 200, description = "The search's outcome", body = Outcome)))]
pub(crate) async fn reason(
    State(state): State<Arc<AppState>>,
    ApiJson(body): ApiJson<ReasonBody>,
) -> Result<Json<Outcome>> {
    let req = validate::reason(&body, &state.limits, &state.registry)?;
    check_question_fits(&state, &req.problem)?;
    let start = Instant::now();
    let slot = admit(&state).await?;
    let search = Search::spawn(&state, req, None)?;
    let outcome = search.finish().await?;
    state.metrics.search(&outcome);
    state.metrics.e2e(start.elapsed());
    drop(slot);
    Ok(Json(outcome))
}

pub(super) async fn admit(state: &Arc<AppState>) -> Result<Slot> {
    if state.is_draining() {
        return Err(AppError::Draining);
    }
    state.admission.admit(&state.metrics).await
}

async fn generate(
    state: Arc<AppState>,
    valid: ValidGeneration,
    flavor: Flavor,
) -> Result<Response> {
    let start = Instant::now();
    if valid.strategy.is_some() {
        return search(state, valid, flavor, start).await;
    }
    match (&state.remote, &state.runtime) {
        (Some(pool), _) => {
            let pool = Arc::clone(pool);
            super::generate_remote::direct(state, pool, valid, flavor, start).await
        }
        (None, Some(runtime)) => {
            let runtime = Arc::clone(runtime);
            direct(state, runtime, valid, flavor, start).await
        }
        (None, None) => Err(AppError::NoEngine),
    }
}

// ---------------------------------------------------------------------------------------------
// Plain decoding through the executor.

/// One choice's tokens so far and what of its text has been sent.
#[derive(Debug, Default)]
struct Choice {
    ids: Vec<u32>,
    tokens: Vec<SampledToken>,
    sent_bytes: usize,
    sent_tokens: usize,
    finish: Option<ChoiceFinish>,
    /// When its last token arrived (for the inter-token latency).
    last_token_at: Option<Instant>,
}

/// Decodes choices, cutting the text at the first stop string (which OpenAI does not return).
#[derive(Debug)]
struct Decoder {
    model: Arc<LoadedModel>,
    stop: Stops,
}

impl Decoder {
    fn text(&self, ids: &[u32]) -> String {
        self.text_and_stop(ids).0
    }

    /// The text up to the first stop string, and that stop string.
    fn text_and_stop(&self, ids: &[u32]) -> (String, Option<String>) {
        let mut text = self.model.tokenizer.decode(ids).unwrap_or_default();
        let first = self.stop.first_in(&text).map(|(at, s)| (at, s.to_string()));
        match first {
            Some((at, s)) => {
                text.truncate(at);
                (text, Some(s))
            }
            None => (text, None),
        }
    }

    /// Text of `choice` not yet sent; while it runs, holds back what could still turn out to be
    /// the start of a stop string or half of a multi-byte character.
    fn delta(&self, choice: &mut Choice, finished: bool) -> Option<String> {
        let text = self.text(&choice.ids);
        let mut end = text.len();
        if !finished {
            if text.ends_with('\u{FFFD}') {
                return None;
            }
            let hold = self.stop.hold_back();
            end = end.saturating_sub(hold);
            while end > 0 && !text.is_char_boundary(end) {
                end -= 1;
            }
        }
        if end <= choice.sent_bytes {
            return None;
        }
        let delta = text.get(choice.sent_bytes..end).map(str::to_string);
        choice.sent_bytes = end;
        delta
    }
}

fn finish_name(reason: SeqFinish) -> ChoiceFinish {
    match reason {
        SeqFinish::Length => ChoiceFinish::Length,
        SeqFinish::Stop | SeqFinish::Cancelled => ChoiceFinish::Stop,
    }
}

async fn direct(
    state: Arc<AppState>,
    runtime: Arc<crate::runtime::Runtime>,
    valid: ValidGeneration,
    flavor: Flavor,
    start: Instant,
) -> Result<Response> {
    let model = Arc::clone(&runtime.model);
    let text = match &valid.prompt {
        PromptIn::Chat(messages) => model.render_chat(messages)?,
        PromptIn::Text(t) => t.clone(),
    };
    let ids = encode_prompt(&model, &text)?;
    let vocab = model.model.config().vocab_size;
    if let Some((t, _)) = valid
        .sampling
        .logit_bias
        .iter()
        .find(|(t, _)| *t as usize >= vocab)
    {
        return Err(ValidationError::invalid(
            "logit_bias",
            format!("token {t} is not in the model's vocabulary of {vocab} tokens"),
        )
        .into());
    }
    let context = model.model.config().context_length;
    let prompt_len = ids.len();
    let room = context.saturating_sub(prompt_len);
    let max_tokens = valid
        .max_tokens
        .unwrap_or(state.limits.default_max_tokens.min(room));
    if room == 0 || max_tokens > room {
        return Err(ValidationError::ContextLength {
            prompt: prompt_len,
            tokens: prompt_len + max_tokens.max(1),
            context,
        }
        .into());
    }
    let stop_condition = (!valid.stop.is_empty()).then(|| {
        Arc::new(StopStrings::new(
            Arc::clone(&model),
            Stops::new(&valid.stop),
        )) as Arc<dyn StopCondition>
    });
    let samples = (0..valid.n as u64)
        .map(|i| crate::engine::SamplingParams {
            seed: valid.sampling.seed.wrapping_add(i),
            ..valid.sampling.clone()
        })
        .collect();
    let request = GroupRequest {
        prompt: ids,
        samples,
        max_new_tokens: max_tokens,
        stop_tokens: model.tokenizer.eos().to_vec(),
        stop_condition,
        priority: 0,
        keep: false,
        resume: None,
    };
    let slot = admit(&state).await?;
    let handle = runtime.executor.submit(request).await?;
    let env = Envelope::new(flavor, &valid.model);
    let decoder = Decoder {
        model,
        stop: Stops::new(&valid.stop),
    };
    if valid.stream {
        let interval = state.limits.keep_alive;
        let events = direct_stream(
            state,
            env,
            decoder,
            handle,
            slot,
            valid,
            prompt_len as u64,
            start,
        );
        return Ok(Sse::new(events)
            .keep_alive(keep_alive(&interval))
            .into_response());
    }
    let mut run = DirectRun::new(handle);
    while let Some((i, token)) = run.next().await? {
        if let Some(t) = token {
            run.time(i, &state.metrics, start);
            run.push(i, t);
        }
    }
    run.finished(&state.metrics, prompt_len as u64, start);
    let completion: u64 = run.choices.iter().map(|c| c.ids.len() as u64).sum();
    let usage = UsageOut::new(prompt_len as u64, completion, run.cached, 0);
    let choices = run
        .choices
        .iter()
        .map(|c| {
            let (text, stop_reason) = decoder.text_and_stop(&c.ids);
            let logprobs = valid
                .logprobs
                .then(|| env.logprobs(&decoder.model, &c.tokens, 0));
            ChoiceOut {
                text,
                logprobs,
                finish: c.finish.unwrap_or(ChoiceFinish::Stop),
                stop_reason,
            }
        })
        .collect();
    let body = env.response(choices, &usage, None);
    drop(slot);
    Ok(Json(body).into_response())
}

pub(super) fn keep_alive(interval: &std::time::Duration) -> KeepAlive {
    KeepAlive::new().interval(*interval).text("keep-alive")
}

/// The executor's events for one group, folded into choices.
struct DirectRun {
    handle: GroupHandle,
    index: HashMap<crate::engine::SeqId, usize>,
    choices: Vec<Choice>,
    open: usize,
    cached: u64,
    first_token: bool,
}

impl DirectRun {
    fn new(handle: GroupHandle) -> Self {
        let index = handle
            .seqs
            .iter()
            .enumerate()
            .map(|(i, s)| (*s, i))
            .collect();
        let n = handle.seqs.len();
        Self {
            handle,
            index,
            choices: (0..n).map(|_| Choice::default()).collect(),
            open: n,
            cached: 0,
            first_token: true,
        }
    }

    /// Times a token of choice `i` arriving: the request's first token, or the gap since the
    /// choice's last.
    fn time(&mut self, i: usize, metrics: &Metrics, start: Instant) {
        let now = Instant::now();
        if self.first_token {
            self.first_token = false;
            metrics.ttft(now - start);
        }
        if let Some(choice) = self.choices.get_mut(i) {
            if let Some(before) = choice.last_token_at.replace(now) {
                metrics.inter_token(now - before);
            }
        }
    }

    /// Counts every choice by its finish reason, and the request's end-to-end latency.
    fn finished(&self, metrics: &Metrics, prompt_tokens: u64, start: Instant) {
        for c in &self.choices {
            metrics.finished(
                c.finish.map_or("abort", ChoiceFinish::as_str),
                prompt_tokens,
                c.ids.len() as u64,
            );
        }
        metrics.e2e(start.elapsed());
    }

    /// Records a token of choice `i`.
    fn push(&mut self, i: usize, token: SampledToken) {
        if let Some(choice) = self.choices.get_mut(i) {
            choice.ids.push(token.token);
            choice.tokens.push(token);
        }
    }

    /// The next token of some choice (`Some((i, Some(token)))`), a choice finishing
    /// (`Some((i, None))`, its `finish` set), or `None` when every choice has finished.
    async fn next(&mut self) -> Result<Option<(usize, Option<SampledToken>)>> {
        loop {
            if self.open == 0 {
                return Ok(None);
            }
            let Some(event) = self.handle.events.recv().await else {
                return Err(AppError::Strategy(GeneratorError::Stopped.into()));
            };
            match event {
                EngineEvent::Token { seq, token } => {
                    if let Some(&i) = self.index.get(&seq) {
                        return Ok(Some((i, Some(token))));
                    }
                }
                EngineEvent::Prefill { reused, .. } => self.cached += reused,
                EngineEvent::Finished { seq, reason } => {
                    if let Some(&i) = self.index.get(&seq) {
                        self.open -= 1;
                        if let Some(choice) = self.choices.get_mut(i) {
                            choice.finish = Some(finish_name(reason));
                        }
                        return Ok(Some((i, None)));
                    }
                }
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn direct_stream(
    state: Arc<AppState>,
    env: Envelope,
    decoder: Decoder,
    handle: GroupHandle,
    slot: Slot,
    valid: ValidGeneration,
    prompt_tokens: u64,
    start: Instant,
) -> impl Stream<Item = std::result::Result<Event, Infallible>> {
    async_stream::stream! {
        let _slot = slot;
        let mut run = DirectRun::new(handle);
        if env.flavor == Flavor::Chat {
            for i in 0..run.choices.len() {
                yield Ok(data(&env.chunk(i, Some(""), true, None, None)));
            }
        }
        loop {
            let next = run.next().await;
            let (i, token) = match next {
                Ok(Some(x)) => x,
                Ok(None) => break,
                Err(e) => {
                    yield Ok(data(&json!(e.body())));
                    break;
                }
            };
            let finished = token.is_none();
            if let Some(t) = token {
                run.time(i, &state.metrics, start);
                run.push(i, t);
            }
            let Some(choice) = run.choices.get_mut(i) else { continue };
            let delta = decoder.delta(choice, finished);
            let logprobs = if valid.logprobs && (delta.is_some() || finished) {
                let from = choice.sent_tokens;
                choice.sent_tokens = choice.tokens.len();
                Some(env.logprobs(&decoder.model, choice.tokens.get(from..).unwrap_or_default(), 0))
            } else {
                None
            };
            if delta.is_some() || logprobs.is_some() {
                yield Ok(data(&env.chunk(i, Some(delta.as_deref().unwrap_or("")), false, logprobs, None)));
            }
            if finished {
                yield Ok(data(&env.chunk(i, None, false, None, choice.finish)));
            }
        }
        if valid.include_usage {
            let completion: u64 = run.choices.iter().map(|c| c.ids.len() as u64).sum();
            yield Ok(data(&env.bare_chunk(Some(&UsageOut::new(prompt_tokens, completion, run.cached, 0)), None)));
        }
        run.finished(&state.metrics, prompt_tokens, start);
        yield Ok(done());
    }
}

// ---------------------------------------------------------------------------------------------
// Strategy runs.

/// A search running on its own task; dropping this cancels it (its sequences are released and
/// its KV blocks freed).
struct Search {
    task: JoinHandle<std::result::Result<Outcome, StrategyError>>,
    _cancel: tokio_util::sync::DropGuard,
}

impl Search {
    fn spawn(
        state: &Arc<AppState>,
        req: ReasonRequest,
        progress: Option<mpsc::UnboundedSender<Progress>>,
    ) -> Result<Self> {
        let cancel = CancellationToken::new();
        let registry = Arc::clone(&state.registry);
        let generator = state.generator()?;
        let verifier = state.verifier.clone();
        // The LLM-as-PRM judges with a generator of this search's own, on the engine the search
        // runs on (the backends when configured, else the local model).
        let judge = state.generator()?;
        let token = cancel.clone();
        let span = tracing::info_span!(
            "search",
            strategy = %req.strategy,
            budget_tokens = req.budget_tokens,
            seed = req.seed,
        );
        let task = tokio::spawn(
            async move {
                let verifier = match verifier {
                    Some(v) => Some(v.for_search(judge).await.map_err(GeneratorError::Failed)?),
                    None => None,
                };
                let outcome =
                    reason_with_progress(&registry, generator, verifier, &req, token, progress)
                        .await;
                if let Ok(o) = &outcome {
                    tracing::debug!(
                        spent = o.usage.spent(),
                        finish_reason = ?o.finish_reason,
                        candidates = o.candidates.len(),
                        "search finished"
                    );
                }
                outcome
            }
            .instrument(span),
        );
        Ok(Self {
            task,
            _cancel: cancel.drop_guard(),
        })
    }

    async fn finish(mut self) -> Result<Outcome> {
        let joined = (&mut self.task).await;
        match joined {
            Ok(r) => Ok(r?),
            Err(e) => Err(AppError::Strategy(
                GeneratorError::Failed(format!("the search task failed: {e}")).into(),
            )),
        }
    }
}

/// Refuses a question longer than the local model's context before a slot is taken (over a
/// backend, its generator checks the rendered prompt against the backend model's context).
fn check_question_fits(state: &AppState, question: &str) -> Result<()> {
    let Some(runtime) = state.runtime.as_ref().filter(|_| state.remote.is_none()) else {
        return Ok(());
    };
    let tokens = runtime.model.tokenizer.encode(question)?.len();
    let context = runtime.model.model.config().context_length;
    if tokens >= context {
        return Err(ValidationError::ContextLength {
            prompt: tokens,
            tokens,
            context,
        }
        .into());
    }
    Ok(())
}

fn search_usage(outcome: &Outcome) -> UsageOut {
    let u = &outcome.usage;
    let shown = outcome
        .selected
        .and_then(|i| outcome.candidates.get(i))
        .map_or(0, |c| c.tokens as u64);
    UsageOut::new(
        u.prompt_tokens,
        u.generated_tokens,
        u.prefill_tokens_reused,
        u.generated_tokens.saturating_sub(shown),
    )
}

fn search_summary(outcome: &Outcome, trace: bool) -> SearchSummary {
    SearchSummary {
        answer: outcome.answer.clone(),
        candidates: outcome.candidates.len(),
        finish_reason: outcome.finish_reason,
        router: outcome.router.clone(),
        spent: outcome.usage.spent(),
        strategy: outcome.strategy.clone(),
        support: outcome.support,
        // As a `Value`, as it always was on the wire (its scores written as f64s).
        trace: trace.then(|| json!(outcome.tree)),
        usage: json!(outcome.usage),
    }
}

/// A progress event for a stream chunk's `ponder` field.
fn progress_field(p: Progress) -> PonderChunkField {
    // As a `Value`, as it always was on the wire (its scores written as f64s).
    PonderChunkField::Progress(ProgressUpdate { progress: json!(p) })
}

fn search_finish(outcome: &Outcome) -> ChoiceFinish {
    match outcome.finish_reason {
        SearchFinish::Budget | SearchFinish::Deadline => ChoiceFinish::Length,
        _ => ChoiceFinish::Stop,
    }
}

fn answer_text(outcome: &Outcome) -> String {
    outcome
        .text
        .clone()
        .or_else(|| outcome.answer.clone())
        .unwrap_or_default()
}

async fn search(
    state: Arc<AppState>,
    valid: ValidGeneration,
    flavor: Flavor,
    start: Instant,
) -> Result<Response> {
    let Some(strategy) = valid.strategy.clone() else {
        return Err(AppError::NotFound);
    };
    let (question, history) = validate::problem_of(&valid.prompt);
    check_question_fits(&state, &question)?;
    let req = ReasonRequest {
        problem: question,
        history,
        strategy: strategy.name.clone(),
        params: strategy.params.clone(),
        budget_tokens: strategy.budget_tokens as i64,
        deadline_ms: strategy.deadline_ms,
        seed: valid.sampling.seed,
    };
    // Parameters are checked before a slot is taken, so a bad request is a 400, not a queue spot.
    state.registry.build(&req.strategy, req.params.clone())?;
    let slot = admit(&state).await?;
    let env = Envelope::new(flavor, &valid.model);
    if valid.stream {
        let (tx, rx) = mpsc::unbounded_channel();
        let search = Search::spawn(&state, req, Some(tx))?;
        let interval = state.limits.keep_alive;
        let events = search_stream(
            state,
            env,
            search,
            rx,
            slot,
            valid.include_usage,
            strategy.return_trace,
            start,
        );
        return Ok(Sse::new(events)
            .keep_alive(keep_alive(&interval))
            .into_response());
    }
    let outcome = Search::spawn(&state, req, None)?.finish().await?;
    drop(slot);
    searched(&state, &outcome, start);
    let choice = ChoiceOut {
        text: answer_text(&outcome),
        logprobs: None,
        finish: search_finish(&outcome),
        stop_reason: None,
    };
    let body = env.response(
        vec![choice],
        &search_usage(&outcome),
        Some(search_summary(&outcome, strategy.return_trace)),
    );
    Ok(Json(body).into_response())
}

enum Next {
    Progress(Progress),
    ProgressClosed,
    // Boxed: an outcome is far larger than a progress event (clippy's large_enum_variant).
    Done(Box<Result<Outcome>>),
}

#[allow(clippy::too_many_arguments)]
fn search_stream(
    state: Arc<AppState>,
    env: Envelope,
    search: Search,
    mut rx: mpsc::UnboundedReceiver<Progress>,
    slot: Slot,
    include_usage: bool,
    trace: bool,
    start: Instant,
) -> impl Stream<Item = std::result::Result<Event, Infallible>> {
    async_stream::stream! {
        let _slot = slot;
        // Move the whole search in (not just its task): its guard cancels it when the stream drops.
        let mut search = search;
        if env.flavor == Flavor::Chat {
            yield Ok(data(&env.chunk(0, Some(""), true, None, None)));
        }
        let mut progress_open = true;
        let outcome = loop {
            let next = if progress_open {
                // Biased towards progress: events sent before the search ended go out first.
                tokio::select! {
                    biased;
                    p = rx.recv() => p.map_or(Next::ProgressClosed, Next::Progress),
                    r = &mut search.task => Next::Done(Box::new(join(r))),
                }
            } else {
                Next::Done(Box::new(join((&mut search.task).await)))
            };
            match next {
                Next::Progress(p) => yield Ok(data(&env.bare_chunk(None, Some(progress_field(p))))),
                Next::ProgressClosed => progress_open = false,
                Next::Done(r) => {
                    // The last events may still sit in the channel when the task's result lands.
                    while let Ok(p) = rx.try_recv() {
                        yield Ok(data(&env.bare_chunk(None, Some(progress_field(p)))));
                    }
                    break *r;
                }
            }
        };
        match outcome {
            Ok(outcome) => {
                searched(&state, &outcome, start);
                yield Ok(data(&env.chunk(0, Some(&answer_text(&outcome)), false, None, None)));
                let last = env
                    .chunk(0, None, false, None, Some(search_finish(&outcome)))
                    .with_ponder(PonderChunkField::Summary(search_summary(&outcome, trace)));
                yield Ok(data(&last));
                if include_usage {
                    yield Ok(data(&env.bare_chunk(Some(&search_usage(&outcome)), None)));
                }
            }
            Err(e) => yield Ok(data(&json!(e.body()))),
        }
        yield Ok(done());
    }
}

/// The metrics of a finished search behind a chat or completion request: its answer's first
/// token goes out now (TTFT), as one output with its finish reason; then the search's own.
fn searched(state: &AppState, outcome: &Outcome, start: Instant) {
    let m = &state.metrics;
    m.ttft(start.elapsed());
    m.finished(
        search_finish(outcome).as_str(),
        outcome.usage.prompt_tokens,
        outcome.usage.generated_tokens,
    );
    m.search(outcome);
    m.e2e(start.elapsed());
}

fn join(
    r: std::result::Result<std::result::Result<Outcome, StrategyError>, tokio::task::JoinError>,
) -> Result<Outcome> {
    match r {
        Ok(r) => Ok(r?),
        Err(e) => Err(AppError::Strategy(
            GeneratorError::Failed(format!("the search task failed: {e}")).into(),
        )),
    }
}
