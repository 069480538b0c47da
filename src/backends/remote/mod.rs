//! [`RemoteGenerator`]: the strategies' `Generator` port over OpenAI-compatible completion
//! servers (vLLM, SGLang, llama.cpp's server, llama-cpp-python's server, or another
//! `ponder serve`), so Ponder can run as a stateless orchestrator in front of engines it does
//! not own.
//!
//! A sequence is text: the rendered conversation — in the backend model's own chat format when
//! `--backend-tokenizer` names it ([`format`]), else ChatML — plus everything generated or
//! appended since. `extend` sends one `/v1/completions` request per branch (prompt
//! continuation, `max_tokens`, `stop`, `seed`, `logprobs`) — fanned out rather than `n > 1`,
//! because each branch has its own seed and many servers reject or ignore per-choice seeds —
//! and all branches of a call run concurrently. Every field sent stays inside each engine's
//! own request model ([`wire`]: seeds masked to int64, at most 20 logprobs, at most four stop
//! strings — the generator cuts the text at any further ones itself). Each engine's way
//! of saying which stop string ended a step is read by [`response`]. Calls stream where the
//! backend's stream carries the usage ([`stream`]); one cut or idle past the idle timeout is
//! continued on another backend from the text it delivered, charged once (`pool::call`). The
//! client request's `traceparent` and `x-request-id` go with every call
//! ([`RemoteGenerator::with_headers`]).
//!
//! Accounting is in the backend's tokens: generated tokens are its `usage.completion_tokens`;
//! a prompt's length is counted by the backend tokenizer (`--backend-tokenizer`, else the
//! backend's `/tokenize`; only where neither exists is it bounded by bytes until the first
//! response reports `usage.prompt_tokens`). Prefill is charged as the local generator charges
//! it — as if this search ran alone on an engine with a prefix cache: the tokens of a sequence
//! this search has not sent before (a new prompt once, however many branches share it in one
//! call; then what was appended or generated since), the rest counted as reused. The
//! reservation for the next call ([`Generator::prefill_bound`]) is that same figure.
//!
//! Routing, failover, credentials and TLS are [`RemotePool`]'s ([`pool`]).
#![deny(clippy::indexing_slicing)]

mod format;
mod pool;
mod response;
mod stream;
mod wire;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use ponder_strategies::{
    ChatTemplateKwargs, Cost, ExtendRequest, Extension, Generator, GeneratorError, Prompt, Result,
    SeqHandle, StopKind, Stops, StrategyError, Turn,
};
use reqwest::header::{HeaderMap, HeaderName};

pub use format::{chatml, BackendFormat, FormatError};
pub use pool::{affinity_key, BackendKeys, RemoteOptions, RemotePool, Secret};

#[derive(Debug, Clone)]
struct RemoteSeq {
    text: String,
    affinity: u64,
    /// Tokens in `text` (exact when counted by a tokenizer or the backend's usage; an upper
    /// bound while only bytes are known).
    tokens: usize,
    /// Tokens at the end of `text` this search has not sent to a backend yet (what the next
    /// extend computes as prefill).
    uncached: usize,
}

/// The `Generator` port over a [`RemotePool`]; one per request (it owns that request's
/// sequences), all sharing the pool.
#[derive(Debug)]
pub struct RemoteGenerator {
    pool: Arc<RemotePool>,
    seqs: Mutex<HashMap<u64, RemoteSeq>>,
    next: AtomicU64,
    /// Sent with every backend call (the client request's trace headers).
    headers: HeaderMap,
}

/// The headers of a client's request passed on to the backends: W3C trace context and the
/// request id, so a backend's logs and traces join the request's.
const FORWARDED_HEADERS: [&str; 3] = ["traceparent", "tracestate", "x-request-id"];

impl RemoteGenerator {
    /// A generator for one request over `pool`.
    pub fn new(pool: Arc<RemotePool>) -> Self {
        Self {
            pool,
            seqs: Mutex::new(HashMap::new()),
            next: AtomicU64::new(1),
            headers: HeaderMap::new(),
        }
    }

    /// Sends those of `headers` that carry a trace or request id (`traceparent`, `tracestate`,
    /// `x-request-id`) with every backend call.
    pub fn with_headers(mut self, headers: &HeaderMap) -> Self {
        for name in FORWARDED_HEADERS {
            let name = HeaderName::from_static(name);
            if let Some(v) = headers.get(&name) {
                self.headers.insert(name, v.clone());
            }
        }
        self
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, RemoteSeq>> {
        self.seqs.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn get(&self, seq: SeqHandle) -> Result<RemoteSeq> {
        self.lock()
            .get(&seq.0)
            .cloned()
            .ok_or_else(|| StrategyError::from(GeneratorError::UnknownSequence(seq.0)))
    }

    fn insert(&self, seq: RemoteSeq) -> SeqHandle {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.lock().insert(id, seq);
        SeqHandle(id)
    }

    /// The text of `prompt` as the backend model is prompted, with the request's `template`
    /// variables.
    pub fn render(&self, prompt: &Prompt, template: &ChatTemplateKwargs) -> Result<String> {
        self.render_messages(&prompt.turns(), template)
    }

    /// `messages` as the backend model is prompted (chat format, ending where it replies):
    /// `--backend-tokenizer`'s template with the request's variables, else ChatML (which
    /// reads no variables).
    fn render_messages(&self, messages: &[Turn], template: &ChatTemplateKwargs) -> Result<String> {
        match &self.pool.opts.format {
            Some(f) => f
                .render_messages(messages, template)
                .map_err(|e| GeneratorError::Engine(Box::new(e)).into()),
            None => Ok(format::chatml_messages(messages)),
        }
    }

    /// The pool this generator runs on.
    pub fn pool(&self) -> &Arc<RemotePool> {
        &self.pool
    }

    /// Tokens of a whole prompt: the backend tokenizer's count, the backend's `/tokenize`, else
    /// the bytes (an upper bound).
    async fn count_prompt(&self, key: u64, text: &str) -> usize {
        if let Some(n) = self.pool.opts.format.as_ref().and_then(|f| f.count(text)) {
            return n;
        }
        match self.pool.tokenize(key, text, &self.headers).await {
            Some(n) => n,
            None => text.len(),
        }
    }

    async fn extend_one(&self, req: &ExtendRequest, charged: bool) -> Result<Extension> {
        let seq = self.get(req.seq)?;
        let mut max_tokens = req.max_tokens;
        if let Some(context) = self.pool.context() {
            max_tokens = max_tokens.min(context.saturating_sub(seq.tokens + 1));
        }
        if max_tokens == 0 {
            return Ok(Extension {
                text: String::new(),
                tokens: Vec::new(),
                stop: StopKind::Length,
                cost: Cost::default(),
            });
        }
        // The first stop strings go on the wire; any beyond what engines take end the text here.
        let stops = Stops::new(req.stop.iter().take(wire::MAX_WIRE_STOPS));
        let beyond = Stops::new(req.stop.iter().skip(wire::MAX_WIRE_STOPS));
        let call = wire::Completion {
            model: &self.pool.opts.model,
            prompt: &seq.text,
            max_tokens,
            sampling: &req.sampling,
            logits: &req.logits,
            stops: &stops,
            // The pool streams where the backend's stream serves (`pool::call`).
            stream: true,
        };
        let mut c = self
            .pool
            .complete(seq.affinity, call, &self.headers)
            .await?;
        let cut = cut_at_stops(&mut c, &beyond);
        let prompt_tokens = c.prompt_tokens.unwrap_or(seq.tokens as u64);
        let generated = match c.completion_tokens {
            Some(n) => n,
            None => match self
                .pool
                .opts
                .format
                .as_ref()
                .and_then(|f| f.count_appended(&c.text))
            {
                Some(n) => n as u64,
                None => c.tokens.len() as u64,
            },
        };
        // Prefill as this search alone would compute it with a prefix cache (module doc).
        let computed = if charged {
            (seq.uncached as u64).min(prompt_tokens)
        } else {
            0
        };
        {
            let mut seqs = self.lock();
            if let Some(x) = seqs.get_mut(&req.seq.0) {
                // Cut at a stop string the wire could not carry, the sequence holds the kept text
                // (its tokens counted as `append` counts them); the generated ones stay billed.
                let kept = match (cut, self.pool.opts.format.as_ref()) {
                    (false, _) => generated as usize,
                    (true, Some(f)) => f.count_appended(&c.text).unwrap_or(c.tokens.len()),
                    (true, None) => c.tokens.len(),
                };
                x.text.push_str(&c.text);
                x.tokens = prompt_tokens as usize + kept;
                x.uncached = kept;
            }
        }
        Ok(Extension {
            text: c.text,
            tokens: c.tokens,
            stop: c.stop,
            cost: Cost {
                generated,
                prefill_computed: computed,
                prefill_reused: prompt_tokens - computed,
                // The server's cache is not visible: what it computed counts as new.
                recomputed: 0,
                tree: computed + generated,
            },
        })
    }
}

/// Ends `c` at the first of `stops` in its text, if any is there (keeping the stop string, as
/// every generator's text does, and the tokens up to it): the stop strings a request had
/// beyond [`wire::MAX_WIRE_STOPS`]. Whether it cut.
fn cut_at_stops(c: &mut response::Completion, stops: &Stops) -> bool {
    let Some((at, stop)) = stops.first_in(&c.text) else {
        return false;
    };
    let end = at + stop.len();
    c.text.truncate(end);
    c.stop = StopKind::Stop;
    let mut start = 0;
    c.tokens.retain(|t| {
        let keep = start < end;
        start += t.text.len();
        keep
    });
    true
}

#[async_trait]
impl Generator for RemoteGenerator {
    async fn open(
        &self,
        prompt: &Prompt,
        template: &ChatTemplateKwargs,
    ) -> Result<(SeqHandle, usize)> {
        if prompt.user.trim().is_empty() {
            return Err(GeneratorError::InvalidPrompt("the user message is empty".into()).into());
        }
        let text = self.render(prompt, template)?;
        self.open_text(&text).await
    }

    fn fork(&self, seq: SeqHandle) -> Result<SeqHandle> {
        let copy = self.get(seq)?;
        Ok(self.insert(copy))
    }

    fn append(&self, seq: SeqHandle, text: &str) -> Result<usize> {
        // Exact with a backend tokenizer; else the bytes bound it (`append` cannot wait on the
        // backend) until the next response's usage replaces it.
        let n = self
            .pool
            .opts
            .format
            .as_ref()
            .and_then(|f| f.count_appended(text))
            .unwrap_or(text.len());
        let mut seqs = self.lock();
        let s = seqs
            .get_mut(&seq.0)
            .ok_or_else(|| StrategyError::from(GeneratorError::UnknownSequence(seq.0)))?;
        s.text.push_str(text);
        s.tokens += n;
        s.uncached += n;
        Ok(n)
    }

    fn prefill_bound(&self, seq: SeqHandle) -> Result<usize> {
        Ok(self.get(seq)?.uncached)
    }

    fn prefill_bound_batch(&self, seqs: &[SeqHandle]) -> Result<usize> {
        // Branches of one call continuing the same text are charged once (see `extend`).
        let mut distinct: Vec<RemoteSeq> = Vec::new();
        for seq in seqs {
            let s = self.get(*seq)?;
            if !distinct.iter().any(|d| d.text == s.text) {
                distinct.push(s);
            }
        }
        Ok(distinct.iter().map(|s| s.uncached).sum())
    }

    async fn extend(&self, batch: &[ExtendRequest]) -> Result<Vec<Extension>> {
        // The first request continuing each distinct text carries its prefill charge.
        let mut seen: Vec<String> = Vec::new();
        let mut charged = Vec::with_capacity(batch.len());
        for req in batch {
            let text = self.get(req.seq)?.text;
            charged.push(!seen.contains(&text));
            if !seen.contains(&text) {
                seen.push(text);
            }
        }
        let results = futures_util::future::join_all(
            batch
                .iter()
                .zip(charged)
                .map(|(r, charged)| self.extend_one(r, charged)),
        )
        .await;
        results.into_iter().collect()
    }

    fn release(&self, seq: SeqHandle) {
        self.lock().remove(&seq.0);
    }

    fn render_chat(&self, turns: &[Turn], template: &ChatTemplateKwargs) -> Result<String> {
        self.render_messages(turns, template)
    }

    async fn open_text(&self, text: &str) -> Result<(SeqHandle, usize)> {
        if text.trim().is_empty() {
            return Err(GeneratorError::InvalidPrompt("the prompt is empty".into()).into());
        }
        let affinity = affinity_key(text);
        let tokens = self.count_prompt(affinity, text).await;
        if let Some(context) = self.pool.context() {
            if tokens >= context {
                return Err(GeneratorError::InvalidPrompt(format!(
                    "{tokens} tokens do not fit the backend model's context of {context}"
                ))
                .into());
            }
        }
        Ok((
            self.insert(RemoteSeq {
                affinity,
                tokens,
                uncached: tokens,
                text: text.to_string(),
            }),
            tokens,
        ))
    }

    fn context_length(&self) -> Option<usize> {
        self.pool.context()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ponder_strategies::TokenInfo;

    fn token(text: &str) -> TokenInfo {
        TokenInfo {
            text: text.into(),
            logprob: 0.0,
            top: Vec::new(),
        }
    }

    #[test]
    fn a_stop_string_beyond_the_wires_four_ends_the_text_and_its_tokens() {
        let mut c = response::Completion {
            text: "3 + 4 = 7. END then more".into(),
            stop: StopKind::Length,
            tokens: ["3 + 4", " = 7.", " END", " then", " more"]
                .map(token)
                .to_vec(),
            prompt_tokens: None,
            cached_tokens: 0,
            completion_tokens: Some(5),
        };
        assert!(!cut_at_stops(&mut c.clone(), &Stops::new(["nowhere"])));
        assert!(cut_at_stops(&mut c, &Stops::new(["more", "END"])));
        assert_eq!(c.text, "3 + 4 = 7. END");
        assert_eq!(c.stop, StopKind::Stop);
        assert_eq!(c.tokens.len(), 3);
    }
}
