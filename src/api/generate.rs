//! The generation endpoints. A request without a strategy is plain decoding through the
//! generator port, on the local model or the backends alike: the conversation rendered by the
//! generator, opened once, forked into its `n` choices (the prompt is prefilled once) and
//! continued by one `extend_streamed`, so `stream: true` yields real tokens as the batch
//! produces them. A request with a strategy (`strategy`, `ponder/<name>`, `budget_tokens` or
//! `reasoning_effort`) is validated once into a `ValidReasonRequest` and runs the search on a
//! task; streaming sends its progress (leader, vote margin, spend) in the `ponder` extension
//! field, then the answer. Either way the request holds a queue [`Slot`] and its work (the
//! generator call, or the search's cancellation guard) inside the response future or stream,
//! so a client that goes away drops them: its sequences are cancelled and their KV blocks are
//! freed at the next scheduler step.
#![deny(clippy::indexing_slicing)]

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures_util::Stream;
use ponder_strategies::{
    CostTally, ExtendRequest, GeneratorError, Outcome, Progress, Sampling, SearchFinish, Stops,
    StrategyError,
};
use serde_json::json;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::echo::echo_of;
use super::error::{AppError, Result, ValidationError};
use super::extract::ApiJson;
use super::guard::Slot;
use super::plain::PlainRun;
use super::responses::{
    ChatCompletion, ChoiceFinish, PonderChunkField, ProgressUpdate, SearchSummary, TextCompletion,
};
use super::sse::{data, done, ChoiceOut, Envelope, Flavor};
use super::thinking::{self, StreamSplit};
use super::types::{ChatCompletionRequest, CompletionRequest, ReasonBody, UsageOut};
use super::validate::{self, PromptIn, ValidGeneration};
use super::AppState;
use crate::reason::{run_valid, ReasonRequest, ValidReasonRequest};
use ponder_verifiers::ReasoningParser;

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
    let (mut req, shots, sampling) = validate::reason(&body, &state.limits, &state.registry)?;
    check_question_fits(&state, &req.problem)?;
    req.shots = state.worked_examples(&req.problem, shots).await?;
    let req = req
        .validate(&state.registry, state.limits.max_budget_tokens)?
        .with_sampling(sampling);
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
    direct(state, valid, flavor, start).await
}

// ---------------------------------------------------------------------------------------------
// Plain decoding, through the generator port.

/// A request without a strategy, on whichever engine serves (the local model or the
/// backends): the conversation rendered in the model's chat format (or the text sent as is),
/// opened once and forked into `n` choices with seeds `seed`, `seed + 1`, …, continued in one
/// streamed `extend`.
async fn direct(
    state: Arc<AppState>,
    valid: ValidGeneration,
    flavor: Flavor,
    start: Instant,
) -> Result<Response> {
    let generator = state.generator()?;
    if let Some(vocab) = generator.vocab_size() {
        valid
            .logits
            .check_vocab(vocab)
            .map_err(StrategyError::from)?;
    }
    // A chat reply's thinking is split off its content; whether it starts inside a block is
    // read from the rendered prompt. Text completions stay whole.
    let parser = state
        .reasoning_parser(valid.reasoning.as_ref())
        .filter(|_| flavor == Flavor::Chat);
    let mut opened = false;
    let (root, prompt_len) = match &valid.prompt {
        PromptIn::Chat(turns) => {
            let rendered = generator.render_chat(turns, &valid.template_kwargs)?;
            opened = parser.as_ref().is_some_and(|p| p.opens_in(&rendered));
            generator.open_text(&rendered).await?
        }
        PromptIn::Text(t) => generator.open_text(t).await?,
        PromptIn::Tokens(ids) => generator.open_tokens(ids).await?,
    };
    let echo = match echo_of(&generator, &valid, root).await {
        Ok(echo) => echo,
        Err(e) => {
            generator.release(root);
            return Err(e);
        }
    };
    let context = generator.context_length();
    let room = context.map(|c| c.saturating_sub(prompt_len));
    let max_tokens = valid.max_tokens.unwrap_or(
        state
            .limits
            .default_max_tokens
            .min(room.unwrap_or(usize::MAX)),
    );
    if let (Some(room), Some(context)) = (room, context) {
        if room == 0 || max_tokens > room {
            generator.release(root);
            return Err(ValidationError::ContextLength {
                prompt: prompt_len,
                tokens: prompt_len + max_tokens.max(1),
                context,
            }
            .into());
        }
    }
    let mut requests = Vec::with_capacity(valid.n);
    for i in 0..valid.n as u64 {
        let seq = if i == 0 { root } else { generator.fork(root)? };
        requests.push(ExtendRequest {
            seq,
            max_tokens,
            stop: valid.stop.clone(),
            sampling: Sampling {
                seed: valid.sampling.seed.wrapping_add(i),
                ..valid.sampling
            },
            logits: valid.logits.clone(),
        });
    }
    let slot = admit(&state).await?;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let tally = Arc::new(CostTally::default());
    // The call, owning the sender: the channel closes once it has sent its last piece. It runs
    // inside the response (future or stream), so a client that goes away drops it, and the
    // generator cancels its sequences and frees their KV at once.
    let work = {
        let tally = Arc::clone(&tally);
        async move {
            let out = generator.extend_streamed(&requests, &tally, &tx).await;
            for r in &requests {
                generator.release(r.seq);
            }
            out
        }
    };
    let env = Envelope::new(flavor, &valid.model);
    let mut run = PlainRun::new(valid.n, Stops::new(&valid.stop));
    let prompt_tokens = prompt_len as u64;
    let mut splits: Vec<StreamSplit> = (0..valid.n)
        .map(|_| StreamSplit::new(parser.as_ref().filter(|_| echo.is_none()), opened))
        .collect();
    if valid.stream {
        let interval = state.limits.keep_alive;
        let events = async_stream::stream! {
            let _slot = slot;
            let mut work = std::pin::pin!(work);
            let mut result = None;
            if env.flavor == Flavor::Chat {
                for i in 0..run.choices.len() {
                    yield Ok::<Event, Infallible>(data(&env.chunk(i, Some(""), true, None, None)));
                }
            }
            // `echo`: each choice's first chunk is the prompt (with its logprobs), as vLLM
            // streams it; the generated tokens' offsets then count the prompt's text.
            if let Some(echo) = &echo {
                for i in 0..run.choices.len() {
                    let logprobs = echo.logprobs.as_ref().map(|prompt| {
                        super::sse::echoed_logprobs(prompt, env.logprobs(&[], echo.text.len()))
                    });
                    yield Ok(data(&env.chunk(i, Some(&echo.text), false, logprobs, None)));
                }
            }
            let text_start = echo.as_ref().map_or(0, |e| e.text.len());
            loop {
                let piece = match result {
                    // Pieces as they come while the call runs; then the rest, until closed.
                    None => tokio::select! {
                        biased;
                        piece = rx.recv() => piece,
                        r = &mut work => {
                            result = Some(r);
                            continue;
                        }
                    },
                    Some(_) => rx.recv().await,
                };
                let Some(piece) = piece else { break };
                let Some(i) = run.push(piece, &state.metrics, start) else { continue };
                let delta = run.delta(i);
                let Some(choice) = run.choices.get_mut(i) else { continue };
                let finished = choice.finish.is_some();
                let logprobs = if valid.logprobs && (delta.is_some() || finished) {
                    let from = choice.sent_tokens;
                    choice.sent_tokens = choice.tokens.len();
                    let sent = text_start + choice.sent_token_bytes;
                    let new = choice.tokens.get(from..).unwrap_or_default();
                    choice.sent_token_bytes += new.iter().map(|t| t.text.len()).sum::<usize>();
                    Some(env.logprobs(new, sent))
                } else {
                    None
                };
                let mut split = delta.as_deref().map(|d| splits.get_mut(i).map(|s| s.push(d)).unwrap_or_default()).unwrap_or_default();
                if finished {
                    if let Some(rest) = splits.get_mut(i).map(StreamSplit::finish) {
                        split.reasoning.push_str(&rest.reasoning);
                        split.content.push_str(&rest.content);
                    }
                }
                let thinking = (!split.reasoning.is_empty()).then_some(split.reasoning.as_str());
                if !split.content.is_empty() || thinking.is_some() || logprobs.is_some() {
                    let content = (!split.content.is_empty() || thinking.is_none()).then_some(split.content.as_str());
                    yield Ok(data(&env.chunk(i, content, false, logprobs, None).with_reasoning(thinking)));
                }
                if finished {
                    let stop = choice.cut(&run.stops).1;
                    let last = env.chunk(i, None, false, None, choice.finish_reason());
                    yield Ok(data(&last.with_stop_reason(stop)));
                }
            }
            match result {
                Some(Ok(exts)) => {
                    let completion: Vec<u64> = exts.iter().map(|e| e.cost.generated).collect();
                    if valid.include_usage {
                        let thinking = run.reasoning_tokens(parser.as_ref().filter(|_| echo.is_none()), opened);
                        let usage = UsageOut::new(prompt_tokens, completion.iter().sum(), tally.get().prefill_reused, thinking);
                        yield Ok(data(&env.bare_chunk(Some(&usage), None)));
                    }
                    run.finished(&state.metrics, prompt_tokens, &completion, start);
                }
                Some(Err(e)) => yield Ok(data(&json!(AppError::from(e).body()))),
                None => {}
            }
            yield Ok(done());
        };
        return Ok(Sse::new(events)
            .keep_alive(keep_alive(&interval))
            .into_response());
    }
    let (exts, ()) = tokio::join!(work, async {
        while let Some(piece) = rx.recv().await {
            run.push(piece, &state.metrics, start);
        }
    });
    let exts = exts?;
    drop(slot);
    let completion: Vec<u64> = exts.iter().map(|e| e.cost.generated).collect();
    run.finished(&state.metrics, prompt_tokens, &completion, start);
    let usage = UsageOut::new(
        prompt_tokens,
        completion.iter().sum(),
        tally.get().prefill_reused,
        run.reasoning_tokens(parser.as_ref().filter(|_| echo.is_none()), opened),
    );
    let choices = run
        .choices
        .iter()
        .map(|c| {
            let Some(echo) = &echo else {
                let logprobs = valid.logprobs.then(|| env.logprobs(&c.tokens, 0));
                let mut out = c.out(&run.stops, logprobs);
                let split = thinking::split(parser.as_ref(), &out.text, opened);
                out.text = split.content;
                out.reasoning = split.reasoning;
                return out;
            };
            let generated = env.logprobs(&c.tokens, echo.text.len());
            let logprobs = echo
                .logprobs
                .as_ref()
                .map(|prompt| super::sse::echoed_logprobs(prompt, generated));
            let mut out = c.out(&run.stops, logprobs);
            out.text.insert_str(0, &echo.text);
            out
        })
        .collect();
    Ok(Json(env.response(choices, &usage, None)).into_response())
}

pub(super) fn keep_alive(interval: &std::time::Duration) -> KeepAlive {
    KeepAlive::new().interval(*interval).text("keep-alive")
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
        req: ValidReasonRequest,
        progress: Option<mpsc::UnboundedSender<Progress>>,
    ) -> Result<Self> {
        let cancel = CancellationToken::new();
        let generator = state.generator()?;
        let verifier = state.verifier.clone();
        // The LLM-as-PRM judges with a generator of this search's own, on the engine the search
        // runs on (the backends when configured, else the local model).
        let judge = state.generator()?;
        let token = cancel.clone();
        let span = tracing::info_span!(
            "search",
            strategy = %req.strategy_name(),
            budget_tokens = req.budget_tokens(),
            seed = req.seed(),
        );
        let task = tokio::spawn(
            async move {
                let verifier = match verifier {
                    Some(v) => Some(v.for_search(judge).await.map_err(judge_failed)?),
                    None => None,
                };
                let outcome = run_valid(req, generator, verifier, token, progress).await;
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
            Err(e) => Err(task_failed(e)),
        }
    }
}

/// Refuses a question longer than the local model's context before a slot is taken or a
/// stream starts (over a backend, its generator checks the rendered prompt against the backend
/// model's context). The question is tokenized once, by the generator that opens the search's
/// prompts: every token of a tokenizer covers at least one byte of the text (byte-level BPE,
/// byte fallback), so a question of fewer bytes than the context, less the special tokens a
/// tokenizer adds around it, fits without being tokenized here; only a longer one is counted.
fn check_question_fits(state: &AppState, question: &str) -> Result<()> {
    /// Tokens a tokenizer may add around a text (BOS, EOS, a prefix space), with room to spare.
    const ADDED_TOKENS: usize = 4;
    let Some(runtime) = state.runtime.as_ref().filter(|_| state.remote.is_none()) else {
        return Ok(());
    };
    let context = runtime.model.model.config().context_length;
    if question.len() + ADDED_TOKENS < context {
        return Ok(());
    }
    let tokens = runtime.model.tokenizer.encode(question)?.len();
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

/// The share of `text` that is `split`'s content (1 when nothing was split off).
fn content_share(text: &str, split: &thinking::Split) -> f64 {
    if split.reasoning.is_none() || text.is_empty() {
        return 1.0;
    }
    split.content.len() as f64 / text.len() as f64
}

/// A search's usage: its reasoning tokens are every generated token but the reply's content
/// (`content_share`: the content's share of the chosen text, less than 1 when a thinking block
/// was split off; its tokens are counted in proportion).
fn search_usage(outcome: &Outcome, content_share: f64) -> UsageOut {
    let u = &outcome.usage;
    let shown = outcome
        .selected
        .and_then(|i| outcome.candidates.get(i))
        .map_or(0, |c| (c.tokens as f64 * content_share).round() as u64);
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
        router: outcome.router.as_ref().map(|r| r.to_json()),
        shots: outcome.shots.clone(),
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

/// The reply's text: the chosen solution (or its answer), cut before the first of the
/// request's stop strings as plain decoding cuts it; and that stop string.
fn answer_text(outcome: &Outcome, stops: &Stops) -> (String, Option<String>) {
    let text = outcome
        .text
        .clone()
        .or_else(|| outcome.answer.clone())
        .unwrap_or_default();
    match stops.first_in(&text) {
        Some((at, stop)) => (
            text.get(..at).unwrap_or_default().to_string(),
            Some(stop.to_string()),
        ),
        None => (text, None),
    }
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
    let shots = state.worked_examples(&question, strategy.shots).await?;
    let req = ReasonRequest {
        problem: question,
        history,
        shots,
        strategy: strategy.name.clone(),
        params: strategy.params.clone(),
        budget_tokens: strategy.budget_tokens,
        deadline_ms: strategy.deadline_ms,
        seed: valid.sampling.seed,
    };
    // Checked (the strategy built) before a slot is taken, so a bad request is a 400, not a
    // queue spot.
    let req = req
        .validate(&state.registry, state.limits.max_budget_tokens)?
        .with_sampling(strategy.sampling.clone())
        .with_template_kwargs(valid.template_kwargs.clone());
    let parser = state
        .reasoning_parser(valid.reasoning.as_ref())
        .filter(|_| flavor == Flavor::Chat);
    let slot = admit(&state).await?;
    let env = Envelope::new(flavor, &valid.model);
    let stops = Stops::new(&valid.stop);
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
            SearchReply {
                stops,
                parser,
                include_usage: valid.include_usage,
                trace: strategy.return_trace,
            },
            start,
        );
        return Ok(Sse::new(events)
            .keep_alive(keep_alive(&interval))
            .into_response());
    }
    let outcome = Search::spawn(&state, req, None)?.finish().await?;
    drop(slot);
    searched(&state, &outcome, start);
    let (text, stop) = answer_text(&outcome, &stops);
    let split = thinking::split_searched(parser.as_ref(), &text);
    let share = content_share(&text, &split);
    let choice = ChoiceOut {
        text: split.content,
        logprobs: None,
        finish: search_finish(&outcome),
        stop_reason: stop,
        reasoning: split.reasoning,
    };
    let body = env.response(
        vec![choice],
        &search_usage(&outcome, share),
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

/// How a search's answer is written into the reply.
struct SearchReply {
    /// The request's stop strings (the answer is cut before the first).
    stops: Stops,
    /// Splits a chat reply's thinking off (`None`: whole).
    parser: Option<ReasoningParser>,
    /// Send the usage in a last chunk.
    include_usage: bool,
    /// Return the search tree.
    trace: bool,
}

fn search_stream(
    state: Arc<AppState>,
    env: Envelope,
    search: Search,
    mut rx: mpsc::UnboundedReceiver<Progress>,
    slot: Slot,
    reply: SearchReply,
    start: Instant,
) -> impl Stream<Item = std::result::Result<Event, Infallible>> {
    let SearchReply {
        stops,
        parser,
        include_usage,
        trace,
    } = reply;
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
                let (text, _stop) = answer_text(&outcome, &stops);
                let split = thinking::split_searched(parser.as_ref(), &text);
                let chunk = env.chunk(0, Some(&split.content), false, None, None);
                yield Ok(data(&chunk.with_reasoning(split.reasoning.as_deref())));
                let last = env
                    .chunk(0, None, false, None, Some(search_finish(&outcome)))
                    .with_ponder(PonderChunkField::Summary(search_summary(&outcome, trace)));
                yield Ok(data(&last));
                if include_usage {
                    yield Ok(data(&env.bare_chunk(Some(&search_usage(&outcome, content_share(&text, &split))), None)));
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
        Err(e) => Err(task_failed(e)),
    }
}

/// The judge model a verifier needs could not be set up for a search.
fn judge_failed(e: String) -> GeneratorError {
    GeneratorError::Helper {
        helper: "judge",
        source: e.into(),
    }
}

/// A search's task ended without its outcome (it panicked or was aborted).
fn task_failed(e: tokio::task::JoinError) -> AppError {
    AppError::Strategy(
        GeneratorError::Helper {
            helper: "search task",
            source: Box::new(e),
        }
        .into(),
    )
}
