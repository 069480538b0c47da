//! Plain decoding (no strategy) over the backends: the request's conversation is rendered in
//! the backend model's chat format (or sent as is for `/v1/completions`), its `n` choices are
//! continued through the same [`RemoteGenerator`] port strategies use (one branch per choice,
//! seeds `seed`, `seed + 1`, …, the prompt forked), and answered in OpenAI's shape. Usage is
//! in the backend's tokens. A stream sends each choice's text in one delta when the backend
//! returns it (backends are asked for whole completions, so that failover can retry them).
#![deny(clippy::indexing_slicing)]

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;

use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use ponder_strategies::{ExtendRequest, Extension, Generator, Sampling, StopKind, Stops};

use super::error::{Result, ValidationError};
use super::generate::{admit, keep_alive};
use super::responses::ChoiceFinish;
use super::sse::{data, done, ChoiceOut, Envelope, Flavor};
use super::types::UsageOut;
use super::validate::{PromptIn, ValidGeneration};
use super::AppState;
use crate::backends::{RemoteGenerator, RemotePool};

/// One finished choice: its text without the stop string, why it ended, the stop that did.
fn choice_out(ext: &Extension, stops: &Stops) -> ChoiceOut {
    let mut text = ext.text.clone();
    let mut stop_reason = None;
    if ext.stop == StopKind::Stop {
        if let Some(s) = stops.ending(&text) {
            text.truncate(text.len() - s.len());
            stop_reason = Some(s.to_string());
        }
    }
    ChoiceOut {
        text,
        logprobs: None,
        finish: if ext.stop == StopKind::Length {
            ChoiceFinish::Length
        } else {
            ChoiceFinish::Stop
        },
        stop_reason,
    }
}

/// `valid` (without a strategy) on `pool`.
pub(super) async fn direct(
    state: Arc<AppState>,
    pool: Arc<RemotePool>,
    valid: ValidGeneration,
    flavor: Flavor,
    start: Instant,
) -> Result<Response> {
    let generator = RemoteGenerator::new(Arc::clone(&pool));
    let text = match &valid.prompt {
        PromptIn::Chat(messages) => generator.render_messages(messages)?,
        PromptIn::Text(t) => t.clone(),
    };
    let (root, prompt_len) = generator.open_text(text).await?;
    let room = pool.context().map(|c| c.saturating_sub(prompt_len));
    let max_tokens = valid.max_tokens.unwrap_or(
        state
            .limits
            .default_max_tokens
            .min(room.unwrap_or(usize::MAX)),
    );
    if let (Some(room), Some(context)) = (room, pool.context()) {
        if room == 0 || max_tokens > room {
            return Err(ValidationError::ContextLength {
                prompt: prompt_len,
                tokens: prompt_len + max_tokens.max(1),
                context,
            }
            .into());
        }
    }
    let slot = admit(&state).await?;
    let mut requests = Vec::with_capacity(valid.n);
    for i in 0..valid.n as u64 {
        let seq = if i == 0 { root } else { generator.fork(root)? };
        let p = &valid.sampling;
        requests.push(ExtendRequest {
            seq,
            max_tokens,
            stop: valid.stop.clone(),
            sampling: Sampling {
                temperature: p.temperature,
                top_p: p.top_p,
                top_k: p.top_k,
                min_p: p.min_p,
                seed: p.seed.wrapping_add(i),
                top_logprobs: p.top_logprobs,
            },
        });
    }
    let env = Envelope::new(flavor, &valid.model);
    let exts = generator.extend(&requests).await?;
    for r in &requests {
        generator.release(r.seq);
    }
    drop(slot);
    state.metrics.ttft(start.elapsed());
    let completion: u64 = exts.iter().map(|e| e.cost.generated).sum();
    let usage = UsageOut::new(prompt_len as u64, completion, 0, 0);
    let stops = Stops::new(&valid.stop);
    let choices: Vec<ChoiceOut> = exts.iter().map(|e| choice_out(e, &stops)).collect();
    if !valid.stream {
        return Ok(Json(env.response(choices, &usage, None)).into_response());
    }
    let include_usage = valid.include_usage;
    let interval = state.limits.keep_alive;
    let events = async_stream::stream! {
        for (i, c) in choices.iter().enumerate() {
            if env.flavor == Flavor::Chat {
                yield Ok::<Event, Infallible>(data(&env.chunk(i, Some(""), true, None, None)));
            }
            yield Ok(data(&env.chunk(i, Some(&c.text), false, None, None)));
            yield Ok(data(&env.chunk(i, None, false, None, Some(c.finish))));
        }
        if include_usage {
            yield Ok(data(&env.bare_chunk(Some(&usage), None)));
        }
        state.metrics.e2e(start.elapsed());
        yield Ok(done());
    };
    Ok(Sse::new(events)
        .keep_alive(keep_alive(&interval))
        .into_response())
}
