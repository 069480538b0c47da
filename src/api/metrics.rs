//! Prometheus metrics (`GET /metrics`, OpenMetrics text via `prometheus-client`): request counts
//! by route and status, time-to-first-token and end-to-end latency histograms, queue depth and
//! running requests, and — read from the executor at scrape time — KV blocks used / cached /
//! free, prefix-cache hit rate, preemptions and tokens by kind, plus budget spent per strategy.
//!
//! Engine counters are cumulative in the executor; at each scrape their growth since the last
//! scrape is added to the Prometheus counters (under a mutex never held across an `.await`).

use std::sync::atomic::{AtomicI64, AtomicU64};
use std::sync::Mutex;
use std::time::Duration;

use ponder_kvcache::KvCacheStats;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::engine::SchedulerCounters;

/// Labels of `ponder_requests`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct RequestLabels {
    /// The matched route.
    pub(crate) route: String,
    /// The HTTP status code.
    pub(crate) status: u16,
}

/// Labels of per-route histograms.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct RouteLabels {
    /// The matched route.
    pub(crate) route: String,
}

/// Labels of `ponder_tokens`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct KindLabels {
    /// `generated`, `prefill_computed` or `prefill_reused`.
    pub(crate) kind: &'static str,
}

/// Labels of `ponder_budget_spent_tokens`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct StrategyLabels {
    /// The strategy.
    pub(crate) strategy: String,
}

fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 16))
}

/// Every metric the server exports.
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    ttft: Family<RouteLabels, Histogram, fn() -> Histogram>,
    e2e: Family<RouteLabels, Histogram, fn() -> Histogram>,
    running: Gauge<i64, AtomicI64>,
    queued: Gauge<i64, AtomicI64>,
    kv_used: Gauge<i64, AtomicI64>,
    kv_cached: Gauge<i64, AtomicI64>,
    kv_free: Gauge<i64, AtomicI64>,
    kv_total: Gauge<i64, AtomicI64>,
    hit_rate: Gauge<f64, AtomicU64>,
    preemptions: Counter,
    tokens: Family<KindLabels, Counter>,
    budget_spent: Family<StrategyLabels, Counter>,
    last_engine: Mutex<SchedulerCounters>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Registers every metric under the `ponder_` prefix.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("ponder");
        let m = Self {
            requests: Family::default(),
            ttft: Family::new_with_constructor(latency_histogram as fn() -> Histogram),
            e2e: Family::new_with_constructor(latency_histogram as fn() -> Histogram),
            running: Gauge::default(),
            queued: Gauge::default(),
            kv_used: Gauge::default(),
            kv_cached: Gauge::default(),
            kv_free: Gauge::default(),
            kv_total: Gauge::default(),
            hit_rate: Gauge::default(),
            preemptions: Counter::default(),
            tokens: Family::default(),
            budget_spent: Family::default(),
            last_engine: Mutex::new(SchedulerCounters::default()),
            registry: Registry::default(),
        };
        registry.register(
            "requests",
            "HTTP requests by route and status",
            m.requests.clone(),
        );
        registry.register(
            "time_to_first_token_seconds",
            "Seconds from request to the first generated token",
            m.ttft.clone(),
        );
        registry.register(
            "request_duration_seconds",
            "Seconds from request to the end of the response",
            m.e2e.clone(),
        );
        registry.register(
            "running_requests",
            "Generation requests admitted and running",
            m.running.clone(),
        );
        registry.register(
            "queued_requests",
            "Generation requests waiting for a slot",
            m.queued.clone(),
        );
        registry.register(
            "kv_blocks_used",
            "KV blocks referenced by live sequences",
            m.kv_used.clone(),
        );
        registry.register(
            "kv_blocks_cached",
            "KV blocks held only by the prefix index",
            m.kv_cached.clone(),
        );
        registry.register(
            "kv_blocks_free",
            "KV blocks on the free list",
            m.kv_free.clone(),
        );
        registry.register(
            "kv_blocks_total",
            "KV blocks in the pool",
            m.kv_total.clone(),
        );
        registry.register(
            "prefix_cache_hit_rate",
            "Prefill tokens served from cache / all prefill tokens",
            m.hit_rate.clone(),
        );
        registry.register(
            "preemptions",
            "Sequences preempted for lack of KV blocks",
            m.preemptions.clone(),
        );
        registry.register(
            "tokens",
            "Tokens by kind (generated, prefill_computed, prefill_reused)",
            m.tokens.clone(),
        );
        registry.register(
            "budget_spent_tokens",
            "Budget tokens spent, per strategy",
            m.budget_spent.clone(),
        );
        Self { registry, ..m }
    }

    /// Counts a finished request.
    pub fn request(&self, route: &str, status: u16) {
        self.requests
            .get_or_create(&RequestLabels {
                route: route.into(),
                status,
            })
            .inc();
    }

    /// Records a time to first token.
    pub fn ttft(&self, route: &str, d: Duration) {
        self.ttft
            .get_or_create(&RouteLabels {
                route: route.into(),
            })
            .observe(d.as_secs_f64());
    }

    /// Records an end-to-end latency.
    pub fn e2e(&self, route: &str, d: Duration) {
        self.e2e
            .get_or_create(&RouteLabels {
                route: route.into(),
            })
            .observe(d.as_secs_f64());
    }

    /// Adds budget spent by `strategy`.
    pub fn budget_spent(&self, strategy: &str, tokens: u64) {
        self.budget_spent
            .get_or_create(&StrategyLabels {
                strategy: strategy.into(),
            })
            .inc_by(tokens);
    }

    /// The running-requests gauge.
    pub fn running(&self) -> &Gauge<i64, AtomicI64> {
        &self.running
    }

    /// The queued-requests gauge.
    pub fn queued(&self) -> &Gauge<i64, AtomicI64> {
        &self.queued
    }

    /// Updates the engine gauges and counters from a fresh reading.
    pub fn observe_engine(&self, counters: Option<SchedulerCounters>, kv: Option<KvCacheStats>) {
        if let Some(kv) = kv {
            self.kv_used.set(kv.used_blocks as i64);
            self.kv_cached.set(kv.cached_blocks as i64);
            self.kv_free.set(kv.free_blocks as i64);
            self.kv_total.set(kv.total_blocks as i64);
        }
        if let Some(now) = counters {
            let mut last = self.last_engine.lock().unwrap_or_else(|p| p.into_inner());
            self.preemptions
                .inc_by(now.preemptions.saturating_sub(last.preemptions));
            let kinds = [
                ("generated", now.tokens_generated, last.tokens_generated),
                (
                    "prefill_computed",
                    now.prefill_tokens_computed,
                    last.prefill_tokens_computed,
                ),
                (
                    "prefill_reused",
                    now.prefill_tokens_reused,
                    last.prefill_tokens_reused,
                ),
            ];
            for (kind, now, before) in kinds {
                self.tokens
                    .get_or_create(&KindLabels { kind })
                    .inc_by(now.saturating_sub(before));
            }
            let prefill = now.prefill_tokens_computed + now.prefill_tokens_reused;
            self.hit_rate.set(if prefill == 0 {
                0.0
            } else {
                now.prefill_tokens_reused as f64 / prefill as f64
            });
            *last = now;
        }
    }

    /// The OpenMetrics text of every metric.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}
