//! [`RemotePool`]: the backends, their credentials, health and latency, and the HTTP client.
//!
//! Routing is rendezvous hashing over a *stable* hash: a sequence's affinity key is the first 8
//! bytes (big-endian) of SHA-256 of its rendered root prompt ([`affinity_key`]), and a
//! backend's score for a key is the first 8 bytes of SHA-256 of the key's 8 bytes followed by
//! the backend's base URL. Both are fixed by the algorithm, not by the build (unlike std's
//! `DefaultHasher`), so every Ponder replica — whatever its version or build — sends the
//! branches of one problem to the same backend, where their prefix is cached.
//!
//! A failed call (connection error, 5xx, 429, a stream idle past `--backend-idle-timeout` or
//! cut) marks that backend down for a cool-down — at least as long as its `Retry-After` — and
//! is retried on the next backend in the key's order after a jittered exponential backoff (full
//! jitter between half and all of the step, so replicas that failed together do not retry
//! together), never sooner than `Retry-After`. A 4xx other than 429 is the request's fault and
//! is not retried. How one call streams, fails over and resumes is `pool/call.rs`'s.
//!
//! TLS is rustls (Mozilla's roots, plus a CA given with `--backend-ca`). API keys are sent as
//! `Authorization: Bearer` headers marked sensitive; [`Secret`] never prints its value, and no
//! error or log line carries a key (URLs with user:password are refused).
#![deny(clippy::indexing_slicing)]

mod call;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use rand::Rng;
use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION, RETRY_AFTER};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::format::BackendFormat;

/// A credential: its value is sent, never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps `value`.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// API keys for the backends: one for all, and/or one per backend URL.
#[derive(Debug, Clone, Default)]
pub struct BackendKeys {
    all: Option<Secret>,
    per: Vec<(String, Secret)>,
}

impl BackendKeys {
    /// Parses entries separated by newlines or commas: `KEY` (every backend) or `URL KEY` (that
    /// backend). Blank entries and lines starting with `#` are skipped. The format of
    /// `--backend-key-file` and `PONDER_BACKEND_KEYS`.
    pub fn parse(text: &str) -> Self {
        let mut keys = Self::default();
        for entry in text.split(['\n', ',']).map(str::trim) {
            if entry.is_empty() || entry.starts_with('#') {
                continue;
            }
            match entry.split_once(char::is_whitespace) {
                Some((url, key)) => keys.per.push((base_url(url), Secret::new(key.trim()))),
                None => keys.all = Some(Secret::new(entry)),
            }
        }
        keys
    }

    /// Adds `other`'s keys (a per-backend key wins over a key for all).
    pub fn merge(mut self, other: Self) -> Self {
        if other.all.is_some() {
            self.all = other.all;
        }
        self.per.extend(other.per);
        self
    }

    fn for_base(&self, base: &str) -> Option<&Secret> {
        self.per
            .iter()
            .rev()
            .find(|(u, _)| u == base)
            .map(|(_, k)| k)
            .or(self.all.as_ref())
    }
}

/// How to reach the backends.
#[derive(Debug, Clone)]
pub struct RemoteOptions {
    /// Base URLs (`http(s)://host:port`, with or without `/v1`).
    pub urls: Vec<String>,
    /// The `model` field sent.
    pub model: String,
    /// How long connecting to a backend may take (`--backend-connect-timeout`).
    pub connect_timeout: Duration,
    /// How long a backend may send nothing on an open call (`--backend-idle-timeout`): each
    /// byte received restarts it, so there is no cap on a whole call. A call whose reply is
    /// not streamed waits for its first byte that long.
    pub idle_timeout: Duration,
    /// Attempts per call beyond the first (each on the next backend).
    pub retries: usize,
    /// First backoff; doubles per attempt (jittered).
    pub backoff: Duration,
    /// How long a failed backend is skipped (longer when it says `Retry-After`).
    pub cooldown: Duration,
    /// API keys.
    pub keys: BackendKeys,
    /// A PEM file of extra CA certificates to trust for `https://` backends.
    pub ca: Option<PathBuf>,
    /// The backend model's chat format and tokenizer (`--backend-tokenizer`).
    pub format: Option<Arc<BackendFormat>>,
    /// The backend model's context length, if known from elsewhere than `format`.
    pub context: Option<usize>,
}

impl RemoteOptions {
    /// Defaults for `urls`: model `ponder`, 10 s to connect, 300 s idle, 3 retries from 50 ms,
    /// 5 s cool-down, no keys, ChatML prompts.
    pub fn new(urls: Vec<String>) -> Self {
        Self {
            urls,
            model: "ponder".into(),
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(300),
            retries: 3,
            backoff: Duration::from_millis(50),
            cooldown: Duration::from_secs(5),
            keys: BackendKeys::default(),
            ca: None,
            format: None,
            context: None,
        }
    }
}

/// Labels of the per-backend metrics.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BackendLabels {
    backend: String,
}

/// Labels of `ponder_backend_requests`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    backend: String,
    /// `ok`, `error` (transport or 5xx), `throttled` (429) or `refused` (other 4xx).
    outcome: &'static str,
}

/// Per-backend health and latency, exported at `/metrics`.
struct PoolMetrics {
    registry: Registry,
    up: Family<BackendLabels, Gauge>,
    requests: Family<OutcomeLabels, Counter>,
    latency: Family<BackendLabels, Histogram, fn() -> Histogram>,
}

fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 16))
}

impl PoolMetrics {
    fn new() -> Self {
        let mut registry = Registry::default();
        let up = Family::<BackendLabels, Gauge>::default();
        let requests = Family::<OutcomeLabels, Counter>::default();
        let latency = Family::<BackendLabels, Histogram, fn() -> Histogram>::new_with_constructor(
            latency_histogram as fn() -> Histogram,
        );
        registry.register(
            "ponder_backend_up",
            "Whether the backend is taking requests (1) or cooling down after a failure (0)",
            up.clone(),
        );
        registry.register(
            "ponder_backend_requests",
            "Calls to the backend by outcome",
            requests.clone(),
        );
        registry.register(
            "ponder_backend_request_duration_seconds",
            "Latency of successful backend calls",
            latency.clone(),
        );
        Self {
            registry,
            up,
            requests,
            latency,
        }
    }
}

#[derive(Debug)]
struct Backend {
    base: String,
    /// Its key, to strip from anything the backend echoes back.
    key: Option<Secret>,
    auth: Option<HeaderValue>,
    down_until: Mutex<Option<Instant>>,
    /// Whether its completions are streamed: [`STREAM_UNKNOWN`] until a stream ends with its
    /// usage ([`STREAM_YES`]) or without ([`STREAM_NO`], for good).
    stream: AtomicU8,
}

/// A backend not yet streamed to.
const STREAM_UNKNOWN: u8 = 0;
/// A backend whose streams carry the usage.
const STREAM_YES: u8 = 1;
/// A backend whose streams lack the usage (llama-cpp-python): asked without streaming.
const STREAM_NO: u8 = 2;

impl Backend {
    /// Whether to ask it for a stream.
    fn streams(&self) -> bool {
        self.stream.load(Ordering::Relaxed) != STREAM_NO
    }

    /// Records what its stream carried; a backend once found lacking stays unstreamed.
    fn stream_has_usage(&self, yes: bool) {
        if yes {
            let _ = self.stream.compare_exchange(
                STREAM_UNKNOWN,
                STREAM_YES,
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        } else {
            self.stream.store(STREAM_NO, Ordering::Relaxed);
        }
    }

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

/// Which tokenize endpoint the backends offer (probed once).
const TOKENIZE_UNKNOWN: u8 = 0;
const TOKENIZE_NONE: u8 = 255;
/// llama.cpp server and vLLM: `/tokenize`; llama-cpp-python: `/extras/tokenize`.
const TOKENIZE_PATHS: [&str; 2] = ["/tokenize", "/extras/tokenize"];

/// The backends, their health and the HTTP client; shared by every request's generator.
pub struct RemotePool {
    client: reqwest::Client,
    backends: Vec<Backend>,
    pub(super) opts: RemoteOptions,
    metrics: PoolMetrics,
    /// 0: not probed; 1..: index into [`TOKENIZE_PATHS`] plus one; 255: none.
    tokenize: AtomicU8,
}

impl std::fmt::Debug for RemotePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemotePool")
            .field(
                "backends",
                &self.backends.iter().map(|b| &b.base).collect::<Vec<_>>(),
            )
            .field("opts", &self.opts)
            .finish_non_exhaustive()
    }
}

/// `url` without a trailing `/` or `/v1`.
pub(super) fn base_url(url: &str) -> String {
    let u = url.trim().trim_end_matches('/');
    u.strip_suffix("/v1").unwrap_or(u).to_string()
}

/// The first 8 bytes of SHA-256 of `parts`, big-endian.
fn sha256_u64(parts: &[&[u8]]) -> u64 {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p);
    }
    let d = h.finalize();
    let mut b = [0u8; 8];
    b.copy_from_slice(d.get(..8).unwrap_or(&[0; 8]));
    u64::from_be_bytes(b)
}

/// The affinity key of a rendered root prompt (see the module doc).
pub fn affinity_key(prompt: &str) -> u64 {
    sha256_u64(&[prompt.as_bytes()])
}

/// A backend's rendezvous score for `key`.
fn score(key: u64, base: &str) -> u64 {
    sha256_u64(&[&key.to_be_bytes(), base.as_bytes()])
}

/// `Retry-After` in seconds (the HTTP-date form is not used by inference servers).
fn retry_after(r: &reqwest::Response) -> Option<Duration> {
    let s = r.headers().get(RETRY_AFTER)?.to_str().ok()?;
    s.trim().parse::<u64>().ok().map(Duration::from_secs)
}

/// A delay drawn uniformly from [step/2, step].
fn jittered(step: Duration) -> Duration {
    let ms = step.as_millis().min(u128::from(u64::MAX)) as u64;
    if ms < 2 {
        return step;
    }
    Duration::from_millis(rand::rng().random_range(ms / 2..=ms))
}

impl RemotePool {
    /// A pool over `opts.urls` (at least one).
    pub fn new(opts: RemoteOptions) -> Result<Self, String> {
        if opts.urls.is_empty() {
            return Err("at least one backend URL is needed".into());
        }
        let mut builder = reqwest::Client::builder()
            .connect_timeout(opts.connect_timeout)
            .read_timeout(opts.idle_timeout)
            .use_rustls_tls();
        if let Some(path) = &opts.ca {
            let pem = std::fs::read(path)
                .map_err(|e| format!("cannot read --backend-ca {}: {e}", path.display()))?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| {
                format!("--backend-ca {}: not PEM certificates: {e}", path.display())
            })?;
            for c in certs {
                builder = builder.add_root_certificate(c);
            }
        }
        let client = builder
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        let metrics = PoolMetrics::new();
        let mut backends = Vec::with_capacity(opts.urls.len());
        for u in &opts.urls {
            let parsed = reqwest::Url::parse(u.trim())
                .map_err(|e| format!("--backend {u:?} is not a URL: {e}"))?;
            if !matches!(parsed.scheme(), "http" | "https") {
                return Err(format!("--backend {u:?}: the scheme must be http or https"));
            }
            if !parsed.username().is_empty() || parsed.password().is_some() {
                return Err(
                    "--backend: credentials in the URL are refused; give the key with --backend-key-file or PONDER_BACKEND_KEYS".into(),
                );
            }
            let base = base_url(u);
            let key = opts.keys.for_base(&base).cloned();
            let auth = match &key {
                Some(Secret(k)) => {
                    let mut v = HeaderValue::from_str(&format!("Bearer {k}")).map_err(|_| {
                        format!("the API key for {base} has characters a header cannot carry")
                    })?;
                    v.set_sensitive(true);
                    Some(v)
                }
                None => None,
            };
            metrics
                .up
                .get_or_create(&BackendLabels {
                    backend: base.clone(),
                })
                .set(1);
            backends.push(Backend {
                base,
                key,
                auth,
                down_until: Mutex::new(None),
                stream: AtomicU8::new(STREAM_UNKNOWN),
            });
        }
        Ok(Self {
            client,
            backends,
            opts,
            metrics,
            tokenize: AtomicU8::new(TOKENIZE_UNKNOWN),
        })
    }

    /// The backends in rendezvous order for `key`: healthy ones first.
    fn order(&self, key: u64) -> Vec<&Backend> {
        let mut scored: Vec<(bool, u64, &Backend)> = self
            .backends
            .iter()
            .map(|b| (b.healthy(), score(key, &b.base), b))
            .collect();
        scored.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)));
        scored.into_iter().map(|(_, _, b)| b).collect()
    }

    /// The backend a key goes to now (`new` refuses an empty pool, so there is one).
    pub fn route(&self, key: u64) -> &str {
        self.order(key).first().map_or("", |b| &b.base)
    }

    /// The backend model's context length, when known.
    pub fn context(&self) -> Option<usize> {
        self.opts
            .context
            .or_else(|| self.opts.format.as_ref().and_then(|f| f.context()))
    }

    /// The source of the backend model's chat template (`--backend-tokenizer`'s), when known.
    pub fn chat_template_source(&self) -> Option<&str> {
        self.opts.format.as_ref()?.template_source()
    }

    fn set_up(&self, b: &Backend, up: bool) {
        if up {
            b.mark_up();
        }
        self.metrics
            .up
            .get_or_create(&BackendLabels {
                backend: b.base.clone(),
            })
            .set(i64::from(up));
    }

    fn count(&self, b: &Backend, outcome: &'static str) {
        self.metrics
            .requests
            .get_or_create(&OutcomeLabels {
                backend: b.base.clone(),
                outcome,
            })
            .inc();
    }

    fn get(&self, b: &Backend, path: &str) -> reqwest::RequestBuilder {
        let r = self.client.get(format!("{}{path}", b.base));
        match &b.auth {
            Some(v) => r.header(AUTHORIZATION, v.clone()),
            None => r,
        }
    }

    fn post(&self, b: &Backend, path: &str) -> reqwest::RequestBuilder {
        let r = self.client.post(format!("{}{path}", b.base));
        match &b.auth {
            Some(v) => r.header(AUTHORIZATION, v.clone()),
            None => r,
        }
    }

    /// Probes every backend's `/health` at once, marking each up or down; returns how many are
    /// up. A probe waits at most the connect and idle timeouts, so `/ready` answers within
    /// them however many backends are down.
    pub async fn check_health(&self) -> usize {
        let probes = self.backends.iter().map(|b| async move {
            let ok = self
                .get(b, "/health")
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            if !ok {
                b.mark_down(self.opts.cooldown);
            }
            self.set_up(b, ok);
            ok
        });
        futures_util::future::join_all(probes)
            .await
            .into_iter()
            .filter(|ok| *ok)
            .count()
    }

    /// Appends the backends' metrics (OpenMetrics text, without `# EOF`) to `out`.
    pub fn encode_metrics(&self, out: &mut String) {
        for b in &self.backends {
            self.set_up(b, b.healthy());
        }
        let mut text = String::new();
        if prometheus_client::encoding::text::encode(&mut text, &self.metrics.registry).is_ok() {
            out.push_str(text.trim_end().trim_end_matches("# EOF").trim_end());
            out.push('\n');
        }
    }

    /// Counts `text`'s tokens on the backend that `key` routes to (`/tokenize`, or
    /// llama-cpp-python's `/extras/tokenize`), sending `headers` too (a request's
    /// `traceparent`); `None` when the backends offer neither.
    pub async fn tokenize(&self, key: u64, text: &str, headers: &HeaderMap) -> Option<usize> {
        let known = self.tokenize.load(Ordering::Relaxed);
        if known == TOKENIZE_NONE {
            return None;
        }
        let b = *self.order(key).first()?;
        // One body every server reads its own field of (the others are ignored).
        let body = json!({
            "model": self.opts.model,
            "prompt": text,
            "content": text,
            "input": text,
            "add_special": true,
        });
        let candidates: Vec<(usize, &str)> = match known {
            TOKENIZE_UNKNOWN => TOKENIZE_PATHS.iter().copied().enumerate().collect(),
            i => TOKENIZE_PATHS
                .get(usize::from(i) - 1)
                .map(|p| vec![(usize::from(i) - 1, *p)])
                .unwrap_or_default(),
        };
        for (i, path) in candidates {
            let request = self.post(b, path).headers(headers.clone()).json(&body);
            let Ok(r) = request.send().await else {
                return None;
            };
            if !r.status().is_success() {
                continue;
            }
            let Ok(v) = r.json::<Value>().await else {
                continue;
            };
            let n = v
                .get("count")
                .and_then(Value::as_u64)
                .map(|n| n as usize)
                .or_else(|| v.get("tokens").and_then(Value::as_array).map(Vec::len));
            if let Some(n) = n {
                self.tokenize.store(i as u8 + 1, Ordering::Relaxed);
                return Some(n);
            }
        }
        if known == TOKENIZE_UNKNOWN {
            self.tokenize.store(TOKENIZE_NONE, Ordering::Relaxed);
        }
        None
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

    /// The hash is part of the deployment contract (replicas of different builds must agree):
    /// these values are SHA-256 prefixes and must never change.
    #[test]
    fn the_affinity_hash_is_sha256_and_fixed() {
        assert_eq!(affinity_key(""), 0xe3b0_c442_98fc_1c14);
        assert_eq!(affinity_key("abc"), 0xba78_16bf_8f01_cfea);
        let pool = RemotePool::new(RemoteOptions::new(vec![
            "http://a:1".into(),
            "http://b:2".into(),
        ]))
        .expect("pool");
        let expected = if score(7, "http://a:1") > score(7, "http://b:2") {
            "http://a:1"
        } else {
            "http://b:2"
        };
        assert_eq!(pool.route(7), expected);
    }

    #[test]
    fn keys_are_per_backend_or_for_all_and_never_printed() {
        let keys = BackendKeys::parse("# comment\nsk-all\nhttp://b:2/v1 sk-b\n, ");
        assert_eq!(keys.for_base("http://b:2"), Some(&Secret::new("sk-b")));
        assert_eq!(keys.for_base("http://a:1"), Some(&Secret::new("sk-all")));
        let shown = format!("{keys:?}");
        assert!(!shown.contains("sk-"), "{shown}");
        let opts = RemoteOptions {
            keys,
            ..RemoteOptions::new(vec!["http://a:1".into()])
        };
        let pool = RemotePool::new(opts).expect("pool");
        assert!(!format!("{pool:?}").contains("sk-"));
    }

    #[test]
    fn credentials_in_a_url_are_refused_without_echoing_them() {
        let err = RemotePool::new(RemoteOptions::new(vec!["https://u:sk-secret@h:1".into()]))
            .unwrap_err();
        assert!(!err.contains("sk-secret"), "{err}");
    }

    #[test]
    fn backends_that_never_answer_are_probed_at_once() {
        // Listening sockets nobody accepts on: the kernel completes the connection, no reply
        // ever comes, and each probe ends at the idle timeout.
        let silent: Vec<std::net::TcpListener> = (0..3)
            .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("bind"))
            .collect();
        let urls = silent
            .iter()
            .map(|l| format!("http://{}", l.local_addr().expect("addr")))
            .collect();
        let idle = Duration::from_millis(800);
        let pool = RemotePool::new(RemoteOptions {
            idle_timeout: idle,
            ..RemoteOptions::new(urls)
        })
        .expect("pool");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let started = Instant::now();
        assert_eq!(rt.block_on(pool.check_health()), 0);
        let took = started.elapsed();
        assert!(
            took >= idle,
            "{took:?}: a probe gave up before the idle timeout"
        );
        assert!(
            took < idle * 2,
            "{took:?}: the probes ran one after another"
        );
        assert!(pool.backends.iter().all(|b| !b.healthy()));
    }

    #[test]
    fn jitter_stays_within_half_to_all_of_the_step() {
        for _ in 0..100 {
            let d = jittered(Duration::from_millis(100));
            assert!(
                d >= Duration::from_millis(50) && d <= Duration::from_millis(100),
                "{d:?}"
            );
        }
    }
}
