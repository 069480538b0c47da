//! One `/v1/completions` call on the backends: streamed where a backend's stream carries what
//! Ponder needs, failed over along the key's order, and resumed from what a broken stream
//! delivered.
//!
//! - **Streaming.** A backend is asked with `stream: true` (and `include_usage`); the chunks
//!   are folded into one reply by [`stream`]. A stream that ends without the usage
//!   (llama-cpp-python, whose stream cannot tell a stop string from EOS either) is asked again
//!   at once without streaming, and that backend is not streamed to again: the choice is per
//!   backend URL, made once. A backend that answers a streamed request with plain JSON is read
//!   as such.
//! - **Timeouts.** reqwest's read timeout is the idle timeout: it restarts with every byte, so
//!   a stream runs as long as chunks keep coming, with no cap on the whole call; a reply that
//!   is not streamed must begin within it.
//! - **Resumption.** A stream that breaks after delivering text (idle past the timeout, the
//!   connection cut, an error event that is not the request's fault) is continued by the next
//!   attempt, on the next backend in the key's order: the prompt plus the text delivered, with
//!   `max_tokens` less the tokens delivered. The result is the concatenation; its generated
//!   tokens are those delivered plus the continuation's, each charged once; its prompt tokens
//!   are the continuation's less those delivered. The continuing engine matches stop strings
//!   in its own text only, so a stop string cut in two by the break goes unseen.
//!
//! [`stream`]: super::super::stream
#![deny(clippy::indexing_slicing)]

use std::time::{Duration, Instant};

use futures_util::TryStreamExt;
use ponder_strategies::{GeneratorError, StopKind, TokenInfo};
use reqwest::header::{HeaderMap, CONTENT_TYPE};
use serde_json::Value;

use super::super::format::BackendFormat;
use super::super::response::{self, Completion as Parsed};
use super::super::stream::{self, Received, StreamEnd};
use super::super::wire;
use super::{jittered, retry_after, Backend, BackendLabels, RemotePool, Secret};

/// What broken streams delivered, over the attempts of one call.
#[derive(Debug, Default)]
struct Delivered {
    text: String,
    tokens: Vec<TokenInfo>,
    /// Tokens delivered, in the backend's tokens where known.
    count: usize,
}

impl Delivered {
    /// Adds what a broken stream delivered: its tokens counted by their logprobs, else by the
    /// backend tokenizer, else one per chunk.
    fn add(&mut self, r: &Received, format: Option<&BackendFormat>) {
        let tokens = r.tokens();
        let n = if !tokens.is_empty() {
            tokens.len()
        } else {
            format
                .and_then(|f| f.count_appended(&r.text))
                .unwrap_or(r.text_chunks)
        };
        self.text.push_str(&r.text);
        self.tokens.extend(tokens);
        self.count += n;
    }

    /// The delivered text followed by the continuation `c`, charged once.
    fn join(self, c: Parsed) -> Parsed {
        if self.text.is_empty() && self.count == 0 {
            return c;
        }
        let count = self.count as u64;
        let prompt_tokens = c.prompt_tokens.map(|p| p.saturating_sub(count));
        let mut tokens = self.tokens;
        tokens.extend(c.tokens);
        Parsed {
            text: self.text + &c.text,
            stop: c.stop,
            tokens,
            prompt_tokens,
            cached_tokens: c.cached_tokens.min(prompt_tokens.unwrap_or(0)),
            completion_tokens: c.completion_tokens.map(|n| n + count),
        }
    }

    /// What was delivered, as a completion cut at `max_tokens`.
    fn at_length(self) -> Parsed {
        Parsed {
            text: self.text,
            stop: StopKind::Length,
            tokens: self.tokens,
            prompt_tokens: None,
            cached_tokens: 0,
            completion_tokens: Some(self.count as u64),
        }
    }
}

/// How one attempt on one backend went.
enum Attempt {
    Done(Parsed),
    /// A failure another backend may not share: this one is marked down and the call goes on.
    Failed {
        /// What a broken stream delivered.
        received: Option<Received>,
        error: String,
        /// `error` or `throttled`, for the metrics.
        outcome: &'static str,
        retry_after: Duration,
    },
    /// The request's fault, or a reply that is no completion: the call's answer.
    Fatal(GeneratorError),
}

impl Attempt {
    fn failed(error: String) -> Self {
        Self::Failed {
            received: None,
            error,
            outcome: "error",
            retry_after: Duration::ZERO,
        }
    }
}

impl RemotePool {
    /// Runs `call` for the sequence with affinity `key`, with `headers` added to each request
    /// (the module doc says how it streams, fails over and resumes).
    pub(in crate::backends::remote) async fn complete(
        &self,
        key: u64,
        call: wire::Completion<'_>,
        headers: &HeaderMap,
    ) -> Result<Parsed, GeneratorError> {
        let order = self.order(key);
        let mut delivered = Delivered::default();
        let mut last = String::new();
        let mut step = self.opts.backoff;
        let mut wait_at_least = Duration::ZERO;
        for (attempt, b) in (0..=self.opts.retries).zip(order.iter().cycle()) {
            if attempt > 0 {
                tokio::time::sleep(jittered(step).max(wait_at_least)).await;
                step *= 2;
            }
            let prompt;
            let this = if delivered.text.is_empty() {
                call
            } else {
                prompt = format!("{}{}", call.prompt, delivered.text);
                wire::Completion {
                    prompt: &prompt,
                    max_tokens: call.max_tokens.saturating_sub(delivered.count),
                    ..call
                }
            };
            let started = Instant::now();
            match self.attempt(b, this, headers).await {
                Attempt::Done(c) => {
                    self.set_up(b, true);
                    self.count(b, "ok");
                    self.metrics
                        .latency
                        .get_or_create(&BackendLabels {
                            backend: b.base.clone(),
                        })
                        .observe(started.elapsed().as_secs_f64());
                    return Ok(delivered.join(c));
                }
                Attempt::Failed {
                    received,
                    error,
                    outcome,
                    retry_after,
                } => {
                    wait_at_least = retry_after;
                    b.mark_down(self.opts.cooldown.max(retry_after));
                    self.set_up(b, false);
                    self.count(b, outcome);
                    last = format!("{}: {error}", b.base);
                    if let Some(r) = received {
                        delivered.add(&r, self.opts.format.as_deref());
                        if delivered.count >= call.max_tokens {
                            return Ok(delivered.at_length());
                        }
                    }
                }
                Attempt::Fatal(e) => return Err(e),
            }
        }
        Err(GeneratorError::Unavailable {
            attempts: self.opts.retries + 1,
            last,
        })
    }

    /// One attempt on `b`: streamed unless `b` is known not to stream usefully; a stream that
    /// lacks the usage is asked again at once without.
    async fn attempt(
        &self,
        b: &Backend,
        call: wire::Completion<'_>,
        headers: &HeaderMap,
    ) -> Attempt {
        loop {
            let streamed = b.streams();
            let body = wire::Completion {
                stream: streamed,
                ..call
            }
            .body();
            let request = self
                .post(b, "/v1/completions")
                .headers(headers.clone())
                .json(&body);
            let r = match request.send().await {
                Ok(r) => r,
                Err(e) => return Attempt::failed(e.without_url().to_string()),
            };
            let status = r.status();
            if status.is_server_error() || status.as_u16() == 429 {
                let throttled = status.as_u16() == 429;
                return Attempt::Failed {
                    received: None,
                    error: format!("HTTP {status}"),
                    outcome: if throttled { "throttled" } else { "error" },
                    retry_after: retry_after(&r)
                        .unwrap_or(Duration::ZERO)
                        .min(self.opts.idle_timeout),
                };
            }
            if !status.is_success() {
                // A 4xx is the request's fault: another backend would refuse it too.
                let text = r.text().await.unwrap_or_default();
                return Attempt::Fatal(self.refusal(b, status.as_u16(), text));
            }
            let is_stream = r
                .headers()
                .get(CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|t| t.starts_with("text/event-stream"));
            if !is_stream {
                return match r.json::<Value>().await {
                    Ok(v) => match response::parse(&v, call.stops) {
                        Ok(c) => Attempt::Done(c),
                        Err(e) => Attempt::Fatal(e),
                    },
                    Err(e) => Attempt::failed(format!("unreadable response: {}", e.without_url())),
                };
            }
            let body = r.bytes_stream().map_err(reqwest::Error::without_url);
            match stream::read(body).await {
                StreamEnd::Done(received) if received.has_usage() => {
                    b.stream_has_usage(true);
                    return match response::parse(&received.response(), call.stops) {
                        Ok(c) => Attempt::Done(c),
                        Err(e) => Attempt::Fatal(e),
                    };
                }
                StreamEnd::Done(_) => {
                    tracing::debug!(
                        backend = %b.base,
                        "the stream carried no usage; this backend is asked without streaming"
                    );
                    b.stream_has_usage(false);
                }
                StreamEnd::Broken { received, error } => {
                    return Attempt::Failed {
                        received: Some(received),
                        error,
                        outcome: "error",
                        retry_after: Duration::ZERO,
                    }
                }
                StreamEnd::Refused { status, message } => {
                    return Attempt::Fatal(self.refusal(b, status, message))
                }
            }
        }
    }

    /// `b`'s refusal with `status` and `text`, counted, its key redacted (a backend may echo the
    /// key it refused: it is never passed on).
    fn refusal(&self, b: &Backend, status: u16, mut text: String) -> GeneratorError {
        self.count(b, "refused");
        if let Some(Secret(k)) = &b.key {
            text = text.replace(k.as_str(), "<redacted>");
        }
        GeneratorError::Refused {
            backend: b.base.clone(),
            status,
            body: text.chars().take(500).collect(),
        }
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn parsed(text: &str, prompt: u64, completion: u64) -> Parsed {
        Parsed {
            text: text.into(),
            stop: StopKind::Eos,
            tokens: Vec::new(),
            prompt_tokens: Some(prompt),
            cached_tokens: prompt,
            completion_tokens: Some(completion),
        }
    }

    #[test]
    fn a_continuation_is_joined_and_charged_once() {
        let mut d = Delivered::default();
        let mut r = Received::default();
        r.text = "ab".into();
        r.text_chunks = 2;
        d.add(&r, None);
        let c = d.join(parsed("cd", 12, 3));
        assert_eq!(c.text, "abcd");
        assert_eq!(c.completion_tokens, Some(5));
        assert_eq!(c.prompt_tokens, Some(10));
        assert_eq!(c.cached_tokens, 10);
        assert_eq!(
            Delivered::default().join(parsed("x", 4, 1)),
            parsed("x", 4, 1)
        );
    }
}
