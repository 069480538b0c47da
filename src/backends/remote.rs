//! [`RemoteGenerator`]: the strategies' `Generator` port over OpenAI-compatible completion
//! servers (vLLM, SGLang, llama.cpp server, or another `ponder serve`), so Ponder can run as a
//! stateless orchestrator in front of engines it does not own.
//!
//! A sequence is text: the rendered prompt (ChatML, SmolLM2 / Qwen style, unless another
//! template is given) plus everything generated or appended since. `extend` sends one
//! `/v1/completions` request per branch (prompt continuation, `max_tokens`, `stop`, `seed`,
//! `logprobs`) — fanned out rather than `n > 1`, because each branch has its own seed and many
//! servers reject or ignore per-choice seeds — and all branches of a call run concurrently.
//!
//! Routing: [`RemotePool`] holds several backend URLs. Every sequence carries an affinity key
//! (a hash of its root prompt, inherited by forks), and rendezvous hashing sends a key to the
//! same healthy backend every time, so the branches of one problem land where their prefix is
//! cached. A failed call (connection error, 5xx) marks that backend down for a cool-down and is
//! retried with exponential backoff on the next backend in the key's order (failover); when all
//! fail, the call fails with [`UNAVAILABLE`] in its message (the API answers 502).
#![deny(clippy::indexing_slicing)]

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use ponder_strategies::{
    Cost, ExtendRequest, Extension, Generator, Prompt, Result, SeqHandle, StopKind, StrategyError,
    TokenInfo,
};
use serde_json::{json, Value};

/// Prefix of the error message when no backend could serve a call.
pub const UNAVAILABLE: &str = "backend unavailable";

/// How to reach the backends.
#[derive(Debug, Clone)]
pub struct RemoteOptions {
    /// Base URLs (`http://host:port`, with or without `/v1`).
    pub urls: Vec<String>,
    /// The `model` field sent.
    pub model: String,
    /// Per-request timeout.
    pub timeout: Duration,
    /// Attempts per call beyond the first (each on the next backend).
    pub retries: usize,
    /// First backoff; doubles per attempt.
    pub backoff: Duration,
    /// How long a failed backend is skipped.
    pub cooldown: Duration,
}

impl RemoteOptions {
    /// Defaults for `urls`: model `ponder`, 300 s timeout, 3 retries from 50 ms, 5 s cool-down.
    pub fn new(urls: Vec<String>) -> Self {
        Self {
            urls,
            model: "ponder".into(),
            timeout: Duration::from_secs(300),
            retries: 3,
            backoff: Duration::from_millis(50),
            cooldown: Duration::from_secs(5),
        }
    }
}

#[derive(Debug)]
struct Backend {
    base: String,
    down_until: Mutex<Option<Instant>>,
}

impl Backend {
    fn healthy(&self) -> bool {
        self.down_until
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_none_or(|t| Instant::now() >= t)
    }

    fn mark_down(&self, cooldown: Duration) {
        *self.down_until.lock().unwrap_or_else(|p| p.into_inner()) =
            Some(Instant::now() + cooldown);
    }

    fn mark_up(&self) {
        *self.down_until.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }
}

/// The backends, their health and the HTTP client; shared by every request's generator.
#[derive(Debug)]
pub struct RemotePool {
    client: reqwest::Client,
    backends: Vec<Backend>,
    opts: RemoteOptions,
}

fn base_url(url: &str) -> String {
    let u = url.trim_end_matches('/');
    u.strip_suffix("/v1").unwrap_or(u).to_string()
}

impl RemotePool {
    /// A pool over `opts.urls` (at least one).
    pub fn new(opts: RemoteOptions) -> std::result::Result<Self, String> {
        if opts.urls.is_empty() {
            return Err("at least one backend URL is needed".into());
        }
        let client = reqwest::Client::builder()
            .timeout(opts.timeout)
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        let backends = opts
            .urls
            .iter()
            .map(|u| Backend {
                base: base_url(u),
                down_until: Mutex::new(None),
            })
            .collect();
        Ok(Self {
            client,
            backends,
            opts,
        })
    }

    /// The backends in rendezvous order for `key`: healthy ones first.
    fn order(&self, key: u64) -> Vec<&Backend> {
        let mut scored: Vec<(bool, u64, &Backend)> = self
            .backends
            .iter()
            .map(|b| {
                let mut h = DefaultHasher::new();
                (key, &b.base).hash(&mut h);
                (b.healthy(), h.finish(), b)
            })
            .collect();
        scored.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)));
        scored.into_iter().map(|(_, _, b)| b).collect()
    }

    /// The backend a key goes to now (`new` refuses an empty pool, so there is one).
    pub fn route(&self, key: u64) -> &str {
        self.order(key).first().map_or("", |b| &b.base)
    }

    /// Probes every backend's `/health`, marking each up or down; returns how many are up.
    pub async fn check_health(&self) -> usize {
        let mut up = 0;
        for b in &self.backends {
            let ok = self
                .client
                .get(format!("{}/health", b.base))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            if ok {
                b.mark_up();
                up += 1;
            } else {
                b.mark_down(self.opts.cooldown);
            }
        }
        up
    }

    /// POSTs `body` to `/v1/completions`, with failover and backoff along `key`'s order.
    async fn complete(&self, key: u64, body: &Value) -> Result<Value> {
        let order = self.order(key);
        let mut last = String::new();
        let mut backoff = self.opts.backoff;
        for (attempt, b) in (0..=self.opts.retries).zip(order.iter().cycle()) {
            if attempt > 0 {
                tokio::time::sleep(backoff).await;
                backoff *= 2;
            }
            match self
                .client
                .post(format!("{}/v1/completions", b.base))
                .json(body)
                .send()
                .await
            {
                Ok(r) if r.status().is_success() => match r.json::<Value>().await {
                    Ok(v) => {
                        b.mark_up();
                        return Ok(v);
                    }
                    Err(e) => {
                        b.mark_down(self.opts.cooldown);
                        last = format!("{}: unreadable response: {e}", b.base);
                    }
                },
                Ok(r) if r.status().is_server_error() || r.status().as_u16() == 429 => {
                    b.mark_down(self.opts.cooldown);
                    last = format!("{}: HTTP {}", b.base, r.status());
                }
                Ok(r) => {
                    // A 4xx is the request's fault: another backend would refuse it too.
                    let status = r.status();
                    let text = r.text().await.unwrap_or_default();
                    return Err(StrategyError::Generator(format!(
                        "backend {} refused the request ({status}): {text}",
                        b.base
                    )));
                }
                Err(e) => {
                    b.mark_down(self.opts.cooldown);
                    last = format!("{}: {e}", b.base);
                }
            }
        }
        Err(StrategyError::Generator(format!(
            "{UNAVAILABLE}: {} attempts failed; last: {last}",
            self.opts.retries + 1
        )))
    }
}

#[derive(Debug, Clone)]
struct RemoteSeq {
    text: String,
    affinity: u64,
    /// Upper bound on its tokens not yet known to be cached by the backend.
    uncached: usize,
}

/// The `Generator` port over a [`RemotePool`]; one per request (it owns that request's
/// sequences), all sharing the pool.
#[derive(Debug)]
pub struct RemoteGenerator {
    pool: Arc<RemotePool>,
    seqs: Mutex<HashMap<u64, RemoteSeq>>,
    next: AtomicU64,
}

/// Renders a prompt in ChatML (SmolLM2, Qwen2.5): what their chat templates produce.
pub fn chatml(prompt: &Prompt) -> String {
    let mut s = String::new();
    if let Some(system) = &prompt.system {
        s.push_str(&format!("<|im_start|>system\n{system}<|im_end|>\n"));
    }
    s.push_str(&format!(
        "<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n",
        prompt.user
    ));
    s
}

impl RemoteGenerator {
    /// A generator for one request over `pool`.
    pub fn new(pool: Arc<RemotePool>) -> Self {
        Self {
            pool,
            seqs: Mutex::new(HashMap::new()),
            next: AtomicU64::new(1),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, RemoteSeq>> {
        self.seqs.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn get(&self, seq: SeqHandle) -> Result<RemoteSeq> {
        self.lock()
            .get(&seq.0)
            .cloned()
            .ok_or_else(|| StrategyError::Generator(format!("unknown sequence {}", seq.0)))
    }

    fn insert(&self, seq: RemoteSeq) -> SeqHandle {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.lock().insert(id, seq);
        SeqHandle(id)
    }

    async fn extend_one(&self, req: &ExtendRequest) -> Result<(String, Extension)> {
        let seq = self.get(req.seq)?;
        let s = &req.sampling;
        let mut body = json!({
            "model": self.pool.opts.model,
            "prompt": seq.text,
            "max_tokens": req.max_tokens,
            "temperature": s.temperature,
            "top_p": s.top_p,
            "seed": s.seed,
            "logprobs": s.top_logprobs,
        });
        if let Some(fields) = body.as_object_mut() {
            if s.top_k > 0 {
                fields.insert("top_k".into(), json!(s.top_k));
            }
            if s.min_p > 0.0 {
                fields.insert("min_p".into(), json!(s.min_p));
            }
            let stops: Vec<&String> = req.stop.iter().filter(|x| !x.is_empty()).collect();
            if !stops.is_empty() {
                fields.insert("stop".into(), json!(stops));
            }
        }
        let v = self.pool.complete(seq.affinity, &body).await?;
        let bad =
            |what: &str| StrategyError::Generator(format!("backend response without {what}: {v}"));
        let choice = v
            .get("choices")
            .and_then(|c| c.get(0))
            .ok_or_else(|| bad("choices"))?;
        let mut text = choice
            .get("text")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("choices[0].text"))?
            .to_string();
        // vLLM and Ponder report the stop string that matched; it is part of the step.
        let matched = choice
            .get("stop_reason")
            .and_then(Value::as_str)
            .map(str::to_string);
        let stop = match (
            choice.get("finish_reason").and_then(Value::as_str),
            &matched,
        ) {
            (Some("length"), _) => StopKind::Length,
            (_, Some(m)) => {
                text.push_str(m);
                StopKind::Stop
            }
            _ => StopKind::Eos,
        };
        let tokens = choice.get("logprobs").map(token_infos).unwrap_or_default();
        let count = |path: &str| v.pointer(path).and_then(Value::as_u64);
        let prompt_tokens = count("/usage/prompt_tokens").unwrap_or(0);
        let cached = count("/usage/prompt_tokens_details/cached_tokens")
            .unwrap_or(0)
            .min(prompt_tokens);
        let completion = count("/usage/completion_tokens").unwrap_or(tokens.len() as u64);
        let cost = Cost {
            generated: completion + u64::from(stop == StopKind::Eos),
            prefill_computed: prompt_tokens - cached,
            prefill_reused: cached,
            // The server's cache is not visible: what it computed counts as new.
            recomputed: 0,
            tree: prompt_tokens - cached + completion,
        };
        Ok((
            text.clone(),
            Extension {
                text,
                tokens,
                stop,
                cost,
            },
        ))
    }
}

/// Per-token logprobs from a completions `logprobs` object (`token_logprobs`, `top_logprobs`).
fn token_infos(lp: &Value) -> Vec<TokenInfo> {
    let Some(lps) = lp.get("token_logprobs").and_then(Value::as_array) else {
        return Vec::new();
    };
    let tops = lp.get("top_logprobs").and_then(Value::as_array);
    lps.iter()
        .enumerate()
        .map(|(i, l)| {
            let mut top: Vec<(String, f32)> = tops
                .and_then(|t| t.get(i))
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .filter_map(|(k, v)| v.as_f64().map(|f| (k.clone(), f as f32)))
                        .collect()
                })
                .unwrap_or_default();
            top.sort_by(|a, b| b.1.total_cmp(&a.1));
            TokenInfo {
                logprob: l.as_f64().unwrap_or(0.0) as f32,
                top,
            }
        })
        .collect()
}

#[async_trait]
impl Generator for RemoteGenerator {
    async fn open(&self, prompt: &Prompt) -> Result<(SeqHandle, usize)> {
        if prompt.user.trim().is_empty() {
            return Err(StrategyError::Generator(
                "invalid prompt: the user message is empty".into(),
            ));
        }
        let text = chatml(prompt);
        let mut h = DefaultHasher::new();
        text.hash(&mut h);
        // Bytes bound tokens from above (every token covers at least one byte).
        let bound = text.len();
        Ok((
            self.insert(RemoteSeq {
                affinity: h.finish(),
                uncached: bound,
                text,
            }),
            bound,
        ))
    }

    fn fork(&self, seq: SeqHandle) -> Result<SeqHandle> {
        let copy = self.get(seq)?;
        Ok(self.insert(copy))
    }

    fn append(&self, seq: SeqHandle, text: &str) -> Result<usize> {
        let mut seqs = self.lock();
        let s = seqs
            .get_mut(&seq.0)
            .ok_or_else(|| StrategyError::Generator(format!("unknown sequence {}", seq.0)))?;
        s.text.push_str(text);
        s.uncached += text.len();
        Ok(text.len())
    }

    fn prefill_bound(&self, seq: SeqHandle) -> Result<usize> {
        Ok(self.get(seq)?.uncached)
    }

    async fn extend(&self, batch: &[ExtendRequest]) -> Result<Vec<Extension>> {
        let results =
            futures_util::future::join_all(batch.iter().map(|r| self.extend_one(r))).await;
        let mut out = Vec::with_capacity(batch.len());
        for (req, r) in batch.iter().zip(results) {
            let (text, ext) = r?;
            let mut seqs = self.lock();
            if let Some(s) = seqs.get_mut(&req.seq.0) {
                s.text.push_str(&text);
                // The backend now caches the prefix; the new text is at most this many tokens.
                s.uncached = text.len();
            }
            drop(seqs);
            out.push(ext);
        }
        Ok(out)
    }

    fn release(&self, seq: SeqHandle) {
        self.lock().remove(&seq.0);
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn rendezvous_routing_is_stable_and_fails_over() {
        let pool = RemotePool::new(RemoteOptions::new(vec![
            "http://a:1".into(),
            "http://b:2/v1".into(),
            "http://c:3/".into(),
        ]))
        .expect("pool");
        let first = pool.route(42).to_string();
        assert_eq!(pool.route(42), first, "same key, same backend");
        let i = pool
            .backends
            .iter()
            .position(|b| b.base == first)
            .expect("known");
        pool.backends[i].mark_down(Duration::from_secs(60));
        assert_ne!(pool.route(42), first, "a down backend is skipped");
        pool.backends[i].mark_up();
        assert_eq!(pool.route(42), first);
        assert!(pool.backends.iter().any(|b| b.base == "http://b:2"));
    }

    #[test]
    fn logprobs_are_read_best_first() {
        let v = json!({"token_logprobs": [-0.5], "top_logprobs": [{"a": -2.0, "b": -0.5}]});
        let t = token_infos(&v);
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].top[0].0, "b");
    }
}
