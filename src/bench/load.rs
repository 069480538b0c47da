//! `ponder bench load`: Ponder's own load generator. `clients` concurrent loops drive a running
//! server over HTTP for a fixed time with a seeded mix of request kinds — plain and streamed chat,
//! legacy completions, streams the client drops after two chunks (cancellation), strategies under
//! small budgets that the meter stops (`best_of_n`, `self_consistency`), strategies with room to
//! finish (streamed or not), and
//! budgets over the server's limit (refused, 400) — then report requests by status, 5xx, error
//! events inside streams and transport errors, latency percentiles, a per-window timeline (to see
//! a fault come and go), the server's RSS over time (read from `/proc/PID/status` when given its
//! pid), and the `/metrics` gauges once the server is idle again. Transport-level outcomes are
//! counted, never unwrapped; a request that outlives the timeout is a transport error, so a hung
//! request cannot hide.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use serde_json::{json, Value};

/// What to run: the load test's clients, duration and request mix (not the engine's
/// `LoadOptions`, which say how to load a model).
#[derive(Debug, Clone)]
pub struct LoadTestOptions {
    /// The server's base URL, e.g. `http://127.0.0.1:8080`.
    pub url: String,
    /// Concurrent client loops.
    pub clients: usize,
    /// How long to send requests.
    pub duration: Duration,
    /// The server's pid, for its resident memory.
    pub pid: Option<u32>,
    /// A bearer key, when the server requires one.
    pub api_key: Option<String>,
    /// Base seed of the request mix.
    pub seed: u64,
    /// How long to wait for the gauges to return to idle after the run.
    pub settle: Duration,
    /// The request kinds to cycle through (empty: all of [`Kind::ALL`]).
    pub kinds: Vec<Kind>,
    /// Per-request timeout; a request still unanswered then counts as a transport error.
    pub timeout: Duration,
}

impl LoadTestOptions {
    /// `clients` loops against `url` for `duration`: the full mix, seed 0, 60 s to settle, 300 s
    /// per request.
    pub fn new(url: impl Into<String>, clients: usize, duration: Duration) -> Self {
        Self {
            url: url.into(),
            clients,
            duration,
            pid: None,
            api_key: None,
            seed: 0,
            settle: Duration::from_secs(60),
            kinds: Vec::new(),
            timeout: Duration::from_secs(300),
        }
    }
}

/// The kinds of request in the mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
#[value(rename_all = "snake_case")]
pub enum Kind {
    /// Non-streamed chat completion.
    Chat,
    /// Streamed chat completion read to `[DONE]`.
    Streamed,
    /// Streamed chat dropped after two chunks.
    Cancelled,
    /// A strategy whose budget runs out before it would finish.
    SmallBudget,
    /// `budget_tokens` over the server's limit: must be refused with 400.
    OverLimit,
    /// Legacy `/v1/completions`.
    Completion,
    /// A strategy (`best_of_n`, 2 samples) with budget enough to finish.
    Strategy,
    /// The same, streamed with its progress events and read to `[DONE]`.
    StreamedStrategy,
}

impl Kind {
    /// The default mix, in the order each client cycles through it.
    pub const ALL: [Kind; 8] = [
        Kind::Chat,
        Kind::Streamed,
        Kind::Cancelled,
        Kind::SmallBudget,
        Kind::OverLimit,
        Kind::Completion,
        Kind::Strategy,
        Kind::StreamedStrategy,
    ];
}

/// Requests that started in one window of the run, by outcome.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Window {
    /// Seconds into the run at which the window starts.
    pub start_s: f64,
    /// 2xx responses (streams included, whatever they carried).
    pub ok: u64,
    /// 4xx responses.
    pub client_errors: u64,
    /// 5xx responses.
    pub server_errors: u64,
    /// 200 streams that carried an error event.
    pub stream_errors: u64,
    /// No status: refused, reset, timed out.
    pub transport_errors: u64,
}

/// Width of a timeline window.
const WINDOW: Duration = Duration::from_secs(5);

/// The run's figures.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LoadReport {
    /// Client loops.
    pub clients: usize,
    /// Seconds requests were sent for.
    pub duration_s: f64,
    /// Requests sent.
    pub requests: u64,
    /// Requests by HTTP status (`"transport"`: no status, e.g. a reset connection).
    pub by_status: BTreeMap<String, u64>,
    /// Requests by kind.
    pub by_kind: BTreeMap<String, u64>,
    /// Responses with a 5xx status.
    pub server_errors: u64,
    /// Requests that failed below HTTP (refused or reset connections, bad stream framing).
    pub transport_errors: u64,
    /// Streams answered 200 that did not end with `data: [DONE]` (cancelled ones excluded).
    pub truncated_streams: u64,
    /// Streams answered 200 that carried an error event (e.g. a backend died mid-search); they
    /// still end with `[DONE]`.
    pub stream_errors: u64,
    /// Median latency of completed (not cancelled) requests, milliseconds.
    pub p50_ms: f64,
    /// 99th percentile latency of completed requests, milliseconds.
    pub p99_ms: f64,
    /// Slowest completed request, milliseconds.
    pub max_ms: f64,
    /// Completed requests per second.
    pub throughput_rps: f64,
    /// Server RSS (KiB) when the warm-up ended: at one minute, or half the run if shorter.
    pub rss_warm_kib: Option<u64>,
    /// Server RSS (KiB) at the end of the run.
    pub rss_end_kib: Option<u64>,
    /// Highest RSS seen (KiB).
    pub rss_peak_kib: Option<u64>,
    /// Growth from the warm sample to the end, percent.
    pub rss_growth_pct: Option<f64>,
    /// `ponder:num_requests_running` after the run settled.
    pub running_after: Option<f64>,
    /// `ponder:num_requests_waiting` after the run settled.
    pub queued_after: Option<f64>,
    /// `ponder_kv_blocks_used` before the run.
    pub kv_blocks_used_before: Option<f64>,
    /// `ponder_kv_blocks_used` after the run settled.
    pub kv_blocks_used_after: Option<f64>,
    /// Seconds the gauges took to settle.
    pub settle_s: f64,
    /// Outcomes by the window the request started in.
    pub timeline: Vec<Window>,
}

impl LoadReport {
    /// Whether the server returned to idle: nothing running or queued, KV back to its baseline.
    pub fn idle_after(&self) -> bool {
        self.running_after == Some(0.0)
            && self.queued_after == Some(0.0)
            && self.kv_blocks_used_after.is_some()
            && self.kv_blocks_used_after == self.kv_blocks_used_before
    }
}

/// One finished request.
#[derive(Debug)]
struct Sample {
    kind: Kind,
    status: Option<u16>,
    /// When the request was sent, from the start of the run.
    sent: Duration,
    latency: Duration,
    truncated: bool,
    /// A 200 stream carried an error event.
    stream_error: bool,
}

/// The resident set size of `pid` in KiB, from `/proc/PID/status`.
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// A sample line's value (`name value`) in Prometheus text.
fn gauge(text: &str, name: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        let rest = l.strip_prefix(name)?;
        // Any label set (`{model_name="…"}`) between the name and the value.
        let rest = match rest.strip_prefix('{') {
            Some(labels) => labels.split_once('}')?.1,
            None => rest,
        };
        rest.strip_prefix(' ')?.trim().parse().ok()
    })
}

fn body(kind: Kind, rng: &mut ChaCha8Rng, client: usize) -> (&'static str, Value, bool) {
    let topics = [
        "the sea",
        "a prime number",
        "bread",
        "a robot",
        "autumn",
        "trains",
    ];
    let topic = topics[rng.random_range(0..topics.len())];
    let seed: u64 = rng.random();
    let chat = |content: String, extra: Value| {
        let mut b = json!({"model": "ponder", "messages": [{"role": "user", "content": content}], "seed": seed});
        if let (Some(b), Some(e)) = (b.as_object_mut(), extra.as_object()) {
            b.extend(e.clone());
        }
        b
    };
    match kind {
        Kind::Chat => (
            "/v1/chat/completions",
            chat(
                format!("Write one sentence about {topic}."),
                json!({"max_tokens": rng.random_range(8..32)}),
            ),
            false,
        ),
        Kind::Streamed => (
            "/v1/chat/completions",
            chat(
                format!("Describe {topic} briefly."),
                json!({"max_tokens": rng.random_range(8..40), "stream": true, "stream_options": {"include_usage": true}}),
            ),
            true,
        ),
        Kind::Cancelled => (
            "/v1/chat/completions",
            chat(
                format!("Tell a long story about {topic}."),
                json!({"max_tokens": 400, "stream": true}),
            ),
            true,
        ),
        Kind::SmallBudget => {
            let strategy = ["best_of_n", "self_consistency"][client % 2];
            let extra = json!({"strategy": strategy, "strategy_params": {"n": 3, "max_tokens": 48}, "budget_tokens": rng.random_range(120..260)});
            (
                "/v1/chat/completions",
                chat(
                    format!(
                        "What is {} + {}?",
                        rng.random_range(1..50),
                        rng.random_range(1..50)
                    ),
                    extra,
                ),
                false,
            )
        }
        Kind::OverLimit => (
            "/v1/chat/completions",
            chat("What is 2 + 2?".into(), json!({"budget_tokens": i64::MAX})),
            false,
        ),
        Kind::Completion => (
            "/v1/completions",
            json!({"model": "ponder", "prompt": format!("A list of facts about {topic}:\n1."), "max_tokens": rng.random_range(4..24), "seed": seed}),
            false,
        ),
        Kind::Strategy | Kind::StreamedStrategy => {
            let stream = kind == Kind::StreamedStrategy;
            let extra = json!({"strategy": "best_of_n", "strategy_params": {"n": 2, "max_tokens": 32}, "budget_tokens": 1000, "stream": stream});
            (
                "/v1/chat/completions",
                chat(
                    format!(
                        "What is {} times {}?",
                        rng.random_range(2..12),
                        rng.random_range(2..12)
                    ),
                    extra,
                ),
                stream,
            )
        }
    }
}

async fn one(
    http: &reqwest::Client,
    opts: &LoadTestOptions,
    kind: Kind,
    rng: &mut ChaCha8Rng,
    client: usize,
    run_start: Instant,
) -> Sample {
    let (path, payload, stream) = body(kind, rng, client);
    let start = Instant::now();
    let mut req = http.post(format!("{}{path}", opts.url)).json(&payload);
    if let Some(k) = &opts.api_key {
        req = req.bearer_auth(k);
    }
    let sent = start.duration_since(run_start);
    let mut stream_error = false;
    let done = |status: Option<u16>, truncated: bool, stream_error: bool| Sample {
        kind,
        status,
        sent,
        latency: start.elapsed(),
        truncated,
        stream_error,
    };
    let response = match req.send().await {
        Ok(r) => r,
        Err(_) => return done(None, false, false),
    };
    let status = response.status().as_u16();
    if !stream || status != 200 {
        return match response.bytes().await {
            Ok(_) => done(Some(status), false, false),
            Err(_) => done(None, false, false),
        };
    }
    let mut chunks = response.bytes_stream();
    let mut tail: Vec<u8> = Vec::new();
    let mut seen = 0usize;
    while let Some(chunk) = chunks.next().await {
        let Ok(chunk) = chunk else {
            return done(None, false, stream_error);
        };
        seen += 1;
        if kind == Kind::Cancelled && seen >= 2 {
            // Dropping the stream closes the connection mid-generation.
            return done(Some(status), false, false);
        }
        // Error events are `data: {"error": …}` (a chunk boundary could split the marker; the
        // tail carries the previous chunk's end across).
        tail.extend_from_slice(&chunk);
        stream_error |= String::from_utf8_lossy(&tail).contains("{\"error\":");
        if tail.len() > 64 {
            tail.drain(..tail.len() - 64);
        }
    }
    let ended = String::from_utf8_lossy(&tail)
        .trim_end()
        .ends_with("data: [DONE]");
    done(
        Some(status),
        kind != Kind::Cancelled && !ended,
        stream_error,
    )
}

async fn metrics_text(http: &reqwest::Client, opts: &LoadTestOptions) -> Option<String> {
    let mut req = http.get(format!("{}/metrics", opts.url));
    if let Some(k) = &opts.api_key {
        req = req.bearer_auth(k);
    }
    req.send().await.ok()?.text().await.ok()
}

pub(crate) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Runs the load and reports; errors only when the server cannot be reached at all.
pub async fn run(opts: &LoadTestOptions) -> Result<LoadReport, String> {
    let http = reqwest::Client::builder()
        .timeout(opts.timeout)
        .build()
        .map_err(|e| e.to_string())?;
    let before = metrics_text(&http, opts)
        .await
        .ok_or_else(|| format!("cannot read {}/metrics", opts.url))?;
    let samples: Arc<Mutex<Vec<Sample>>> = Arc::default();
    let start = Instant::now();
    let end = start + opts.duration;
    let mut loops = Vec::new();
    for client in 0..opts.clients {
        let (http, opts, samples) = (http.clone(), opts.clone(), Arc::clone(&samples));
        loops.push(tokio::spawn(async move {
            let mut rng = ChaCha8Rng::seed_from_u64(
                opts.seed ^ (client as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
            );
            let kinds: &[Kind] = if opts.kinds.is_empty() {
                &Kind::ALL
            } else {
                &opts.kinds
            };
            let mut i = client;
            while Instant::now() < end {
                let kind = kinds[i % kinds.len()];
                i += 1;
                let sample = one(&http, &opts, kind, &mut rng, client, start).await;
                if let Ok(mut s) = samples.lock() {
                    s.push(sample);
                }
            }
        }));
    }
    // RSS: sampled each second; the warm sample is at one minute (or half the run if shorter).
    let warm_at = opts.duration.min(Duration::from_secs(60)).mul_f64(
        if opts.duration > Duration::from_secs(60) {
            1.0
        } else {
            0.5
        },
    );
    let (mut rss_warm, mut rss_peak) = (None, None::<u64>);
    while Instant::now() < end {
        tokio::time::sleep(
            Duration::from_millis(500).min(end.saturating_duration_since(Instant::now())),
        )
        .await;
        if let Some(rss) = opts.pid.and_then(rss_kib) {
            rss_peak = Some(rss_peak.map_or(rss, |p| p.max(rss)));
            if rss_warm.is_none() && start.elapsed() >= warm_at {
                rss_warm = Some(rss);
            }
        }
    }
    for l in loops {
        let _ = l.await;
    }
    let duration_s = start.elapsed().as_secs_f64();
    let rss_end = opts.pid.and_then(rss_kib);
    // Idle again: poll the gauges until nothing runs and the KV blocks are back, or time out.
    let kv_before = gauge(&before, "ponder_kv_blocks_used");
    let settle_start = Instant::now();
    let mut after = String::new();
    while settle_start.elapsed() < opts.settle {
        after = metrics_text(&http, opts).await.unwrap_or_default();
        if gauge(&after, "ponder:num_requests_running") == Some(0.0)
            && gauge(&after, "ponder:num_requests_waiting") == Some(0.0)
            && gauge(&after, "ponder_kv_blocks_used") == kv_before
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let samples = samples
        .lock()
        .map(|mut s| std::mem::take(&mut *s))
        .unwrap_or_default();
    let mut report = LoadReport {
        clients: opts.clients,
        duration_s,
        requests: samples.len() as u64,
        ..LoadReport::default()
    };
    let mut latencies = Vec::new();
    for s in &samples {
        let key = s
            .status
            .map_or_else(|| "transport".to_string(), |c| c.to_string());
        *report.by_status.entry(key).or_default() += 1;
        let kind = serde_json::to_value(s.kind)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default();
        *report.by_kind.entry(kind).or_default() += 1;
        let w = (s.sent.as_secs_f64() / WINDOW.as_secs_f64()) as usize;
        while report.timeline.len() <= w {
            let start_s = (report.timeline.len() as f64) * WINDOW.as_secs_f64();
            report.timeline.push(Window {
                start_s,
                ..Window::default()
            });
        }
        let window = &mut report.timeline[w];
        match s.status {
            Some(c) if c >= 500 => {
                report.server_errors += 1;
                window.server_errors += 1;
            }
            Some(c) if c >= 400 => window.client_errors += 1,
            Some(_) if s.stream_error => window.stream_errors += 1,
            Some(_) => window.ok += 1,
            None => {
                report.transport_errors += 1;
                window.transport_errors += 1;
            }
        }
        report.truncated_streams += u64::from(s.truncated);
        report.stream_errors += u64::from(s.stream_error);
        if s.kind != Kind::Cancelled && s.status.is_some() {
            latencies.push(s.latency.as_secs_f64() * 1000.0);
        }
    }
    latencies.sort_by(f64::total_cmp);
    report.p50_ms = percentile(&latencies, 0.5);
    report.p99_ms = percentile(&latencies, 0.99);
    report.max_ms = latencies.last().copied().unwrap_or(0.0);
    report.throughput_rps = latencies.len() as f64 / duration_s.max(1e-9);
    report.rss_warm_kib = rss_warm;
    report.rss_end_kib = rss_end;
    report.rss_peak_kib = rss_peak.max(rss_end);
    report.rss_growth_pct = match (rss_warm, rss_end) {
        (Some(w), Some(e)) if w > 0 => Some((e as f64 - w as f64) / w as f64 * 100.0),
        _ => None,
    };
    report.running_after = gauge(&after, "ponder:num_requests_running");
    report.queued_after = gauge(&after, "ponder:num_requests_waiting");
    report.kv_blocks_used_before = kv_before;
    report.kv_blocks_used_after = gauge(&after, "ponder_kv_blocks_used");
    report.settle_s = settle_start.elapsed().as_secs_f64();
    Ok(report)
}
