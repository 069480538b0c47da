//! Prometheus metrics (`GET /metrics`, OpenMetrics text via `prometheus-client`).
//!
//! Serving metrics follow vLLM's (`vllm/v1/metrics/loggers.py`, `PrometheusStatLogger`): the same
//! meanings, types, histogram buckets and `model_name` label, under the `ponder:` prefix instead
//! of `vllm:` — `vllm:time_to_first_token_seconds` is `ponder:time_to_first_token_seconds`, and
//! so on — so a vLLM dashboard or alert carries over by renaming the prefix, and a Prometheus
//! that scrapes Ponder and the vLLM servers behind it (`--backend`) keeps the two apart.
//! README's "Metrics" section lists the mapping; `deploy/grafana/ponder.json` is a dashboard.
//!
//! Ponder's own metrics share the prefix: budget spent by kind, verifier calls, search depth and
//! width, how searches finished and how many branches they stopped early, all per strategy; and
//! what `auto` allocated (`router_allocations`: the bin of the row it ran, the strategy it
//! ran, what its probe saw, whether load narrowed it), read from the outcome's `router` object. The
//! `ponder_requests_total{route,status}` counter and the `ponder_kv_blocks_*` gauges (the KV
//! pool in blocks) have no vLLM counterpart.
//!
//! Engine counters are cumulative in the executor; at each scrape their growth since the last
//! scrape is added to the Prometheus counters (under a mutex never held across an `.await`).

use std::sync::atomic::{AtomicI64, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ponder_kvcache::KvCacheStats;
use ponder_strategies::{NodeStatus, Outcome};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::{Family, MetricConstructor};
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::router::Allocated;
use ponder_engine::SchedulerCounters;

/// vLLM's `time_to_first_token_seconds` buckets.
const TTFT_BUCKETS: [f64; 22] = [
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
];
/// vLLM's `inter_token_latency_seconds` (and `time_per_output_token_seconds`) buckets.
const ITL_BUCKETS: [f64; 19] = [
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0,
];
/// vLLM's `request_latency_buckets` (end-to-end, queue, inference time).
const REQUEST_LATENCY_BUCKETS: [f64; 21] = [
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
    480.0, 960.0, 1920.0, 7680.0,
];
/// Search depth in steps and width in nodes per depth.
const SEARCH_SHAPE_BUCKETS: [f64; 10] = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0];

/// vLLM's `build_1_2_5_buckets(max)`: 1, 2, 5, 10, 20, 50, … up to `max` (token counts).
fn buckets_1_2_5(max: u64) -> Vec<f64> {
    let mut out = Vec::new();
    let mut scale = 1u64;
    loop {
        for m in [1, 2, 5] {
            let v = m * scale;
            if v > max {
                return out;
            }
            out.push(v as f64);
        }
        scale = scale.saturating_mul(10);
    }
}

/// Labels of `ponder_requests`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct RequestLabels {
    /// The matched route.
    pub(crate) route: String,
    /// The HTTP status code.
    pub(crate) status: u16,
}

/// vLLM's label on every serving metric.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ModelLabels {
    /// The served model's id.
    pub(crate) model_name: String,
}

/// Labels of `request_success`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct FinishedLabels {
    /// The served model's id.
    pub(crate) model_name: String,
    /// OpenAI's `finish_reason` (`stop`, `length`) or `abort`, as vLLM labels it.
    pub(crate) finished_reason: &'static str,
}

/// Labels of per-strategy metrics.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct StrategyLabels {
    /// The served model's id.
    pub(crate) model_name: String,
    /// The strategy.
    pub(crate) strategy: String,
}

/// Labels of `budget_spent_tokens`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct SpendLabels {
    /// The served model's id.
    pub(crate) model_name: String,
    /// The strategy.
    pub(crate) strategy: String,
    /// `generated`, `prefill_computed` or `verifier` (they add up to the budget spent).
    pub(crate) kind: &'static str,
}

/// Labels of `search_finished`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct SearchFinishLabels {
    /// The served model's id.
    pub(crate) model_name: String,
    /// The strategy.
    pub(crate) strategy: String,
    /// `completed`, `budget`, `deadline` or `cancelled`.
    pub(crate) finish_reason: String,
}

/// Labels of `router_allocations`: one `auto` decision ([`Allocated`]).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct AllocationLabels {
    /// The served model's id.
    pub(crate) model_name: String,
    /// [`Allocated::difficulty`].
    pub(crate) difficulty: String,
    /// [`Allocated::strategy`].
    pub(crate) strategy: String,
    /// [`Allocated::probe`].
    pub(crate) probe: String,
    /// [`Allocated::degraded`], as `true` / `false`.
    pub(crate) degraded: &'static str,
}

impl AllocationLabels {
    fn of(model_name: &str, a: Allocated) -> Self {
        Self {
            model_name: model_name.to_string(),
            difficulty: a.difficulty,
            strategy: a.strategy,
            probe: a.probe,
            degraded: if a.degraded { "true" } else { "false" },
        }
    }
}

/// Makes the histograms of a family, all with the same buckets.
#[derive(Debug, Clone)]
pub(crate) struct Buckets(Arc<[f64]>);

impl MetricConstructor<Histogram> for Buckets {
    fn new_metric(&self) -> Histogram {
        Histogram::new(self.0.iter().copied())
    }
}

type Hist<L> = Family<L, Histogram, Buckets>;

fn histograms<L: Clone + std::hash::Hash + Eq>(buckets: Vec<f64>) -> Hist<L> {
    Family::new_with_constructor(Buckets(buckets.into()))
}

/// Every metric the server exports.
pub struct Metrics {
    registry: Registry,
    model: ModelLabels,
    requests: Family<RequestLabels, Counter>,
    running: Family<ModelLabels, Gauge<i64, AtomicI64>>,
    waiting: Family<ModelLabels, Gauge<i64, AtomicI64>>,
    kv_usage: Family<ModelLabels, Gauge<f64, AtomicU64>>,
    prefix_queries: Family<ModelLabels, Counter>,
    prefix_hits: Family<ModelLabels, Counter>,
    preemptions: Family<ModelLabels, Counter>,
    prompt_tokens: Family<ModelLabels, Counter>,
    generation_tokens: Family<ModelLabels, Counter>,
    success: Family<FinishedLabels, Counter>,
    request_prompt_tokens: Hist<ModelLabels>,
    request_generation_tokens: Hist<ModelLabels>,
    ttft: Hist<ModelLabels>,
    itl: Hist<ModelLabels>,
    e2e: Hist<ModelLabels>,
    queue: Hist<ModelLabels>,
    kv_used: Gauge<i64, AtomicI64>,
    kv_cached: Gauge<i64, AtomicI64>,
    kv_free: Gauge<i64, AtomicI64>,
    kv_total: Gauge<i64, AtomicI64>,
    budget_spent: Family<SpendLabels, Counter>,
    verifier_calls: Family<StrategyLabels, Counter>,
    search_depth: Hist<StrategyLabels>,
    search_width: Hist<StrategyLabels>,
    search_finished: Family<SearchFinishLabels, Counter>,
    stopped_early: Family<StrategyLabels, Counter>,
    allocations: Family<AllocationLabels, Counter>,
    last_engine: Mutex<SchedulerCounters>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics")
            .field("model_name", &self.model.model_name)
            .finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new("ponder-local", 8192)
    }
}

impl Metrics {
    /// Registers every metric for the model `model_name` (the `model_name` label) whose context
    /// holds `max_model_len` tokens (the top of the token-count buckets, as in vLLM).
    pub fn new(model_name: &str, max_model_len: usize) -> Self {
        let tokens = buckets_1_2_5(max_model_len as u64);
        let m = Self {
            registry: Registry::default(),
            model: ModelLabels {
                model_name: model_name.to_string(),
            },
            requests: Family::default(),
            running: Family::default(),
            waiting: Family::default(),
            kv_usage: Family::default(),
            prefix_queries: Family::default(),
            prefix_hits: Family::default(),
            preemptions: Family::default(),
            prompt_tokens: Family::default(),
            generation_tokens: Family::default(),
            success: Family::default(),
            request_prompt_tokens: histograms(tokens.clone()),
            request_generation_tokens: histograms(tokens),
            ttft: histograms(TTFT_BUCKETS.to_vec()),
            itl: histograms(ITL_BUCKETS.to_vec()),
            e2e: histograms(REQUEST_LATENCY_BUCKETS.to_vec()),
            queue: histograms(REQUEST_LATENCY_BUCKETS.to_vec()),
            kv_used: Gauge::default(),
            kv_cached: Gauge::default(),
            kv_free: Gauge::default(),
            kv_total: Gauge::default(),
            budget_spent: Family::default(),
            verifier_calls: Family::default(),
            search_depth: histograms(SEARCH_SHAPE_BUCKETS.to_vec()),
            search_width: histograms(SEARCH_SHAPE_BUCKETS.to_vec()),
            search_finished: Family::default(),
            stopped_early: Family::default(),
            allocations: Family::default(),
            last_engine: Mutex::new(SchedulerCounters::default()),
        };
        // Series that exist from the start, as vLLM's do (a dashboard shows 0, not "no data").
        for g in [&m.running, &m.waiting] {
            g.get_or_create(&m.model).set(0);
        }
        for reason in ["stop", "length", "abort"] {
            let _ = m.success.get_or_create(&FinishedLabels {
                model_name: m.model.model_name.clone(),
                finished_reason: reason,
            });
        }
        let mut registry = Registry::default();
        let r = &mut registry;
        r.register(
            "ponder:num_requests_running",
            "Generation requests admitted and running",
            m.running.clone(),
        );
        r.register(
            "ponder:num_requests_waiting",
            "Generation requests waiting for a slot",
            m.waiting.clone(),
        );
        r.register(
            "ponder:kv_cache_usage_perc",
            "KV-cache usage. 1 means 100 percent usage",
            m.kv_usage.clone(),
        );
        r.register(
            "ponder:prefix_cache_queries",
            "Prefix cache queries, in terms of number of queried tokens",
            m.prefix_queries.clone(),
        );
        r.register(
            "ponder:prefix_cache_hits",
            "Prefix cache hits, in terms of number of cached tokens",
            m.prefix_hits.clone(),
        );
        r.register(
            "ponder:num_preemptions",
            "Cumulative number of preemptions from the engine",
            m.preemptions.clone(),
        );
        r.register(
            "ponder:prompt_tokens",
            "Number of prefill tokens processed",
            m.prompt_tokens.clone(),
        );
        r.register(
            "ponder:generation_tokens",
            "Number of generation tokens processed",
            m.generation_tokens.clone(),
        );
        r.register(
            "ponder:request_success",
            "Count of successfully processed requests",
            m.success.clone(),
        );
        r.register(
            "ponder:request_prompt_tokens",
            "Number of prefill tokens processed, per request",
            m.request_prompt_tokens.clone(),
        );
        r.register(
            "ponder:request_generation_tokens",
            "Number of generation tokens processed, per request",
            m.request_generation_tokens.clone(),
        );
        r.register(
            "ponder:time_to_first_token_seconds",
            "Histogram of time to first token in seconds",
            m.ttft.clone(),
        );
        r.register(
            "ponder:inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds",
            m.itl.clone(),
        );
        r.register(
            "ponder:e2e_request_latency_seconds",
            "Histogram of e2e request latency in seconds",
            m.e2e.clone(),
        );
        r.register(
            "ponder:request_queue_time_seconds",
            "Histogram of time spent in WAITING phase for request",
            m.queue.clone(),
        );
        r.register(
            "ponder:budget_spent_tokens",
            "Budget tokens spent by searches, by strategy and kind",
            m.budget_spent.clone(),
        );
        r.register(
            "ponder:verifier_calls",
            "Verifier calls made by searches",
            m.verifier_calls.clone(),
        );
        r.register(
            "ponder:search_depth",
            "Deepest step of a search tree",
            m.search_depth.clone(),
        );
        r.register(
            "ponder:search_width",
            "Most nodes at one depth of a search tree",
            m.search_width.clone(),
        );
        r.register(
            "ponder:search_finished",
            "Searches by how they finished (completed, budget, deadline, cancelled)",
            m.search_finished.clone(),
        );
        r.register(
            "ponder:branches_stopped_early",
            "Branches a search pruned before they finished",
            m.stopped_early.clone(),
        );
        r.register(
            "ponder:router_allocations",
            "Searches auto allocated, by difficulty bin, strategy run, probe and load narrowing",
            m.allocations.clone(),
        );
        let own = r.sub_registry_with_prefix("ponder");
        own.register(
            "requests",
            "HTTP requests by route and status",
            m.requests.clone(),
        );
        own.register(
            "kv_blocks_used",
            "KV blocks referenced by live sequences",
            m.kv_used.clone(),
        );
        own.register(
            "kv_blocks_cached",
            "KV blocks held only by the prefix index",
            m.kv_cached.clone(),
        );
        own.register(
            "kv_blocks_free",
            "KV blocks on the free list",
            m.kv_free.clone(),
        );
        own.register(
            "kv_blocks_total",
            "KV blocks in the pool",
            m.kv_total.clone(),
        );
        Self { registry, ..m }
    }

    /// The `model_name` label's value.
    pub fn model_name(&self) -> &str {
        &self.model.model_name
    }

    /// Counts a finished HTTP request.
    pub fn request(&self, route: &str, status: u16) {
        self.requests
            .get_or_create(&RequestLabels {
                route: route.into(),
                status,
            })
            .inc();
    }

    /// Records a time to first token (from the request's arrival).
    pub fn ttft(&self, d: Duration) {
        self.ttft
            .get_or_create(&self.model)
            .observe(d.as_secs_f64());
    }

    /// Records the time between two successive tokens of one output.
    pub fn inter_token(&self, d: Duration) {
        self.itl.get_or_create(&self.model).observe(d.as_secs_f64());
    }

    /// Records a generation request's end-to-end latency.
    pub fn e2e(&self, d: Duration) {
        self.e2e.get_or_create(&self.model).observe(d.as_secs_f64());
    }

    /// Records how long a request waited for a slot.
    pub fn queue_time(&self, d: Duration) {
        self.queue
            .get_or_create(&self.model)
            .observe(d.as_secs_f64());
    }

    /// Counts a finished output (one per choice, as vLLM counts each of `n`) and its lengths.
    pub fn finished(&self, finished_reason: &'static str, prompt_tokens: u64, generated: u64) {
        self.success
            .get_or_create(&FinishedLabels {
                model_name: self.model.model_name.clone(),
                finished_reason,
            })
            .inc();
        self.request_prompt_tokens
            .get_or_create(&self.model)
            .observe(prompt_tokens as f64);
        self.request_generation_tokens
            .get_or_create(&self.model)
            .observe(generated as f64);
    }

    /// Records a finished search: what it spent by kind, its verifier calls, its tree's depth
    /// and width, how it finished and the branches it pruned; for `auto`, what it allocated.
    pub fn search(&self, outcome: &Outcome) {
        let strategy = StrategyLabels {
            model_name: self.model.model_name.clone(),
            strategy: outcome.strategy.clone(),
        };
        let u = &outcome.usage;
        for (kind, tokens) in [
            ("generated", u.generated_tokens),
            ("prefill_computed", u.prefill_tokens_computed),
            ("verifier", u.verifier_tokens),
        ] {
            self.budget_spent
                .get_or_create(&SpendLabels {
                    model_name: strategy.model_name.clone(),
                    strategy: strategy.strategy.clone(),
                    kind,
                })
                .inc_by(tokens);
        }
        self.verifier_calls
            .get_or_create(&strategy)
            .inc_by(u.verifier_calls);
        let mut per_depth = std::collections::BTreeMap::<usize, u64>::new();
        let mut pruned = 0;
        for n in outcome.tree.nodes().filter(|n| n.depth > 0) {
            *per_depth.entry(n.depth).or_default() += 1;
            pruned += u64::from(n.status == NodeStatus::Pruned);
        }
        let depth = per_depth.keys().next_back().copied().unwrap_or(0);
        let width = per_depth.values().copied().max().unwrap_or(0);
        self.search_depth
            .get_or_create(&strategy)
            .observe(depth as f64);
        self.search_width
            .get_or_create(&strategy)
            .observe(width as f64);
        self.stopped_early.get_or_create(&strategy).inc_by(pruned);
        let finish = serde_json::to_value(outcome.finish_reason)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        self.search_finished
            .get_or_create(&SearchFinishLabels {
                model_name: strategy.model_name.clone(),
                strategy: strategy.strategy.clone(),
                finish_reason: finish,
            })
            .inc();
        if let Some(allocated) = Allocated::of(outcome) {
            self.allocations
                .get_or_create(&AllocationLabels::of(&strategy.model_name, allocated))
                .inc();
        }
    }

    /// The running-requests gauge.
    pub fn running(&self) -> Gauge<i64, AtomicI64> {
        self.running.get_or_create(&self.model).clone()
    }

    /// The waiting-requests gauge.
    pub fn queued(&self) -> Gauge<i64, AtomicI64> {
        self.waiting.get_or_create(&self.model).clone()
    }

    /// Updates the engine gauges and counters from a fresh reading.
    pub fn observe_engine(&self, counters: Option<SchedulerCounters>, kv: Option<KvCacheStats>) {
        if let Some(kv) = kv {
            self.kv_used.set(kv.used_blocks as i64);
            self.kv_cached.set(kv.cached_blocks as i64);
            self.kv_free.set(kv.free_blocks as i64);
            self.kv_total.set(kv.total_blocks as i64);
            let usage = match kv.total_blocks {
                0 => 0.0,
                total => kv.used_blocks as f64 / total as f64,
            };
            self.kv_usage.get_or_create(&self.model).set(usage);
        }
        if let Some(now) = counters {
            let mut last = self.last_engine.lock().unwrap_or_else(|p| p.into_inner());
            let grew = |now: u64, before: u64| now.saturating_sub(before);
            let computed = grew(now.prefill_tokens_computed, last.prefill_tokens_computed);
            let reused = grew(now.prefill_tokens_reused, last.prefill_tokens_reused);
            let m = &self.model;
            self.preemptions
                .get_or_create(m)
                .inc_by(grew(now.preemptions, last.preemptions));
            self.prompt_tokens
                .get_or_create(m)
                .inc_by(computed + reused);
            self.prefix_queries
                .get_or_create(m)
                .inc_by(computed + reused);
            self.prefix_hits.get_or_create(m).inc_by(reused);
            self.generation_tokens
                .get_or_create(m)
                .inc_by(grew(now.tokens_generated, last.tokens_generated));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_buckets_are_vllms_1_2_5_series() {
        assert_eq!(
            buckets_1_2_5(100),
            vec![1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0]
        );
        assert_eq!(buckets_1_2_5(8192).last(), Some(&5000.0));
    }

    #[test]
    fn every_serving_series_carries_the_model_name() {
        let m = Metrics::new("smol", 2048);
        m.ttft(Duration::from_millis(30));
        m.inter_token(Duration::from_millis(12));
        m.queue_time(Duration::from_millis(1));
        m.e2e(Duration::from_millis(200));
        m.finished("stop", 10, 4);
        m.observe_engine(
            Some(SchedulerCounters {
                prefill_tokens_computed: 6,
                prefill_tokens_reused: 4,
                tokens_generated: 4,
                ..SchedulerCounters::default()
            }),
            None,
        );
        let text = m.encode();
        for line in text.lines().filter(|l| l.starts_with("ponder:")) {
            assert!(line.contains("model_name=\"smol\""), "{line}");
        }
        assert!(text.contains("ponder:prefix_cache_hits_total{model_name=\"smol\"} 4"));
        assert!(text.contains("ponder:prefix_cache_queries_total{model_name=\"smol\"} 10"));
        assert!(text.contains(
            "ponder:request_success_total{model_name=\"smol\",finished_reason=\"stop\"} 1"
        ));
    }

    fn auto_outcome(router: Option<crate::router::Decision>) -> Outcome {
        Outcome {
            strategy: "auto".into(),
            answer: Some("5".into()),
            text: None,
            selected: None,
            support: None,
            candidates: Vec::new(),
            usage: ponder_strategies::Usage::default(),
            finish_reason: ponder_strategies::SearchFinish::Completed,
            tree: ponder_strategies::SearchTree::new(),
            router: router.map(|d| {
                std::sync::Arc::new(d) as std::sync::Arc<dyn ponder_strategies::RoutingDecision>
            }),
            shots: Vec::new(),
        }
    }

    #[test]
    fn auto_allocations_are_counted_by_the_bin_the_probe_chose() {
        let m = Metrics::new("smol", 2048);
        use crate::router::{Allocation, CalibrationRow, Decision, ProbeReport};
        let object = Some;
        // The probe disagreed: the hard row ran, whatever the router predicted.
        let probed = object(Decision {
            difficulty: "medium".into(),
            allocation: Allocation {
                strategy: "weighted_best_of_n".into(),
                row: Some(CalibrationRow {
                    difficulty: "hard".into(),
                    ..CalibrationRow::default()
                }),
                ..Allocation::default()
            },
            probe: Some(ProbeReport {
                agree: false,
                bin: "hard".into(),
                ..ProbeReport::default()
            }),
            ..Decision::default()
        });
        m.search(&auto_outcome(probed.clone()));
        m.search(&auto_outcome(probed));
        // No probe (a chat question answered directly), narrowed by load.
        m.search(&auto_outcome(object(Decision {
            difficulty: "easy".into(),
            allocation: Allocation {
                strategy: "direct".into(),
                degraded: true,
                ..Allocation::default()
            },
            ..Decision::default()
        })));
        // A search that is not `auto`'s records no allocation.
        m.search(&auto_outcome(None));
        let text = m.encode();
        assert!(
            text.contains(
                "ponder:router_allocations_total{model_name=\"smol\",difficulty=\"hard\",\
             strategy=\"weighted_best_of_n\",probe=\"disagree\",degraded=\"false\"} 2"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "ponder:router_allocations_total{model_name=\"smol\",difficulty=\"easy\",\
             strategy=\"direct\",probe=\"none\",degraded=\"true\"} 1"
            ),
            "{text}"
        );
        assert_eq!(text.matches("ponder:router_allocations_total{").count(), 2);
    }
}
