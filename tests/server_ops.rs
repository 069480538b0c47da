//! Operating the server as one runs vLLM: a request id ties a request's access log line to its
//! search and its executor sequences; `/metrics` follows vLLM's names, types and `model_name`
//! label (the list is vLLM's); the Grafana dashboard reads only metrics the server exports; and
//! the OpenAI sampling fields are honoured (penalties, `logit_bias`) or refused by name.

use std::io::Write;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tracing_subscriber::fmt::MakeWriter;

use crate::server::TestServer;

/// Every log line the server's threads write.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut v) = self.0.lock() {
            v.extend_from_slice(buf);
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

fn chat(content: &str, extra: Value) -> Value {
    let mut body = json!({"model": "ponder", "messages": [{"role": "user", "content": content}]});
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    body
}

/// A best-of-2 search small enough for a test.
fn search_request() -> Value {
    chat(
        "What is 2 + 3?",
        json!({"model": "ponder/best_of_n", "strategy_params": {"n": 2, "max_tokens": 12},
               "budget_tokens": 600, "seed": 3}),
    )
}

#[test]
fn one_request_id_ties_the_access_log_the_search_and_the_executor_sequences() {
    let logs = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .with_writer(logs.clone())
        .finish();
    let dispatch = tracing::Dispatch::new(subscriber);
    // Also the process-wide default: with only thread-scoped subscribers, tests running in
    // parallel race tracing's per-callsite interest cache and events can be dropped. Other
    // tests' events then land here too; the assertions only read lines with this request's id.
    let _ = tracing::dispatcher::set_global_default(dispatch.clone());
    let on_start = dispatch.clone();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .on_thread_start(move || std::mem::forget(tracing::dispatcher::set_default(&on_start)))
        .build()
        .expect("tokio");
    // Also the executor thread, which logs where the thread that started it logs.
    let _guard = tracing::dispatcher::set_default(&dispatch);
    let server = TestServer::start_on(rt, |b| b);
    let client = reqwest::Client::new();
    let id = "ops-trace-7f3a";
    let (status, echoed) = server.block_on(async {
        let r = client
            .post(server.url("/v1/chat/completions"))
            .header("x-request-id", id)
            .json(&search_request())
            .send()
            .await
            .expect("send");
        let echoed = r.headers().get("x-request-id").cloned();
        (r.status().as_u16(), echoed)
    });
    assert_eq!(status, 200);
    assert_eq!(echoed.as_ref().and_then(|v| v.to_str().ok()), Some(id));
    // Without the header, the server makes one up and returns it.
    let fresh = server.block_on(async {
        let r = client
            .get(server.url("/health"))
            .send()
            .await
            .expect("send");
        r.headers()
            .get("x-request-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    });
    assert!(
        fresh
            .as_deref()
            .is_some_and(|f| f.len() == 32 && f.chars().all(|c| c.is_ascii_hexdigit())),
        "{fresh:?}"
    );
    drop(server);
    let text = logs
        .0
        .lock()
        .map(|v| String::from_utf8_lossy(&v).into_owned())
        .unwrap_or_default();
    let ours: Vec<&str> = text.lines().filter(|l| l.contains(id)).collect();
    assert!(
        !ours.is_empty(),
        "no line with the request id; the first lines:\n{}",
        text.lines().take(40).collect::<Vec<_>>().join("\n")
    );
    let has = |what: &str, pred: &dyn Fn(&str) -> bool| {
        assert!(
            ours.iter().any(|l| pred(l)),
            "no {what} line with the request id in:\n{}",
            ours.join("\n")
        );
    };
    has("access", &|l| {
        l.contains(" access") && l.contains("status=200")
    });
    has("search", &|l| {
        l.contains(":search{") && l.contains("search finished")
    });
    has("extend", &|l| l.contains(":extend{"));
    has("executor sequence", &|l| {
        l.contains(":sequence{") && l.contains("ponder_engine::executor") && l.contains("finished")
    });
}

/// vLLM's serving metrics that Ponder exports under `ponder:` with the same meaning, type and
/// `model_name` label. Names and types as listed in vLLM's docs/design/metrics.md ("v1
/// Metrics") and registered in vllm/v1/metrics/loggers.py (`PrometheusStatLogger`), prefix
/// `vllm:` there; counters are written with `_total` on their samples.
const VLLM_METRICS: &[(&str, &str)] = &[
    ("num_requests_running", "gauge"),
    ("num_requests_waiting", "gauge"),
    ("kv_cache_usage_perc", "gauge"),
    ("prefix_cache_queries", "counter"),
    ("prefix_cache_hits", "counter"),
    ("num_preemptions", "counter"),
    ("prompt_tokens", "counter"),
    ("generation_tokens", "counter"),
    ("request_success", "counter"),
    ("request_prompt_tokens", "histogram"),
    ("request_generation_tokens", "histogram"),
    ("time_to_first_token_seconds", "histogram"),
    ("inter_token_latency_seconds", "histogram"),
    ("e2e_request_latency_seconds", "histogram"),
    ("request_queue_time_seconds", "histogram"),
];

/// The sum of every sample of `series` (a name, optionally with the start of a label set).
fn total(text: &str, series: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(series))
        .filter_map(|l| l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()))
        .sum()
}

#[test]
fn metrics_follow_vllms_names_types_and_model_label_after_a_strategy_request() {
    let server = TestServer::start(|b| b);
    let client = reqwest::Client::new();
    let (status, body) = server.send(
        client
            .post(server.url("/v1/chat/completions"))
            .json(&search_request()),
    );
    assert_eq!(status, 200, "{body}");
    let metrics = server.metrics();
    for (name, kind) in VLLM_METRICS {
        let type_line = format!("# TYPE ponder:{name} {kind}");
        assert!(
            metrics.contains(&type_line),
            "missing {type_line} in\n{metrics}"
        );
    }
    let model = "{model_name=\"smollm2\"";
    for series in [
        "ponder:time_to_first_token_seconds_count",
        "ponder:inter_token_latency_seconds_count",
        "ponder:request_queue_time_seconds_count",
        "ponder:e2e_request_latency_seconds_count",
        "ponder:generation_tokens_total",
        "ponder:prefix_cache_queries_total",
    ] {
        assert!(
            total(&metrics, &format!("{series}{model}")) >= 1.0,
            "no {series} with model_name in\n{metrics}"
        );
    }
    // The search generated many tokens per branch: many inter-token gaps.
    assert!(
        total(
            &metrics,
            &format!("ponder:inter_token_latency_seconds_count{model}")
        ) >= 4.0
    );
    let finished = body["choices"][0]["finish_reason"]
        .as_str()
        .expect("finish");
    let success = format!(
        "ponder:request_success_total{{model_name=\"smollm2\",finished_reason=\"{finished}\"}}"
    );
    assert_eq!(total(&metrics, &success), 1.0, "{success} in\n{metrics}");
    // Ponder's own, per strategy.
    let strategy = "{model_name=\"smollm2\",strategy=\"best_of_n\"";
    assert!(
        total(
            &metrics,
            &format!("ponder:budget_spent_tokens_total{strategy}")
        ) > 0.0
    );
    assert_eq!(
        total(&metrics, &format!("ponder:search_width_count{strategy}")),
        1.0
    );
    assert_eq!(
        total(&metrics, &format!("ponder:search_finished_total{strategy}")),
        1.0
    );
    // Every metric the shipped dashboard queries exists.
    let dashboard = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/grafana/ponder.json"),
    )
    .expect("dashboard");
    let mut queried = 0;
    for part in dashboard.split("ponder:").skip(1) {
        let name: String = part
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
            .collect();
        if name.is_empty() {
            continue; // prose ("the ponder: prefix")
        }
        let family = ["_bucket", "_total"]
            .iter()
            .find_map(|s| name.strip_suffix(s))
            .unwrap_or(&name);
        assert!(
            metrics.contains(&format!("# TYPE ponder:{family} ")),
            "the dashboard queries ponder:{name}, which /metrics lacks"
        );
        queried += 1;
    }
    assert!(queried >= 12, "{queried}");
}

#[test]
fn penalties_and_logit_bias_change_what_is_sampled_and_unknown_tokens_are_refused() {
    let server = TestServer::start(|b| b);
    let client = reqwest::Client::new();
    let ask =
        |body: Value| server.send(client.post(server.url("/v1/chat/completions")).json(&body));
    let prompt = "Repeat after me: la la la la la la la la la la";
    let greedy = |extra: Value| {
        let mut base = json!({"max_tokens": 16, "temperature": 0, "logprobs": true});
        if let (Some(b), Some(e)) = (base.as_object_mut(), extra.as_object()) {
            b.extend(e.clone());
        }
        let (status, body) = ask(chat(prompt, base));
        assert_eq!(status, 200, "{body}");
        let tokens: Vec<String> = body["choices"][0]["logprobs"]["content"]
            .as_array()
            .expect("logprobs")
            .iter()
            .map(|t| t["token"].as_str().expect("token").to_string())
            .collect();
        assert!(!tokens.is_empty(), "{body}");
        tokens
    };
    let plain = greedy(json!({}));
    // Each penalty changes the greedy continuation of a repetitive prompt.
    for extra in [
        json!({"frequency_penalty": 2.0}),
        json!({"presence_penalty": 2.0}),
        json!({"repetition_penalty": 1.8}),
    ] {
        assert_ne!(greedy(extra.clone()), plain, "{extra} changed nothing");
    }
    // -100 bans the greedy first token; +100 forces a token at every step, even sampling.
    let model = crate::util::smollm2();
    let first = model
        .tokenizer
        .encode(&plain.concat())
        .expect("encode")
        .first()
        .copied()
        .expect("a token");
    let banned = greedy(json!({"logit_bias": {(first.to_string()): -100}}));
    assert_ne!(
        banned.first(),
        plain.first(),
        "token {first} was not banned"
    );
    let forced = greedy(json!({"logit_bias": {"1000": 100}, "temperature": 1.0, "seed": 9}));
    assert!(forced.iter().all(|t| *t == forced[0]), "{forced:?}");
    let vocab = model.model.config().vocab_size;
    let (status, err) = ask(chat(
        prompt,
        json!({"max_tokens": 2, "logit_bias": {(vocab.to_string()): 5}}),
    ));
    assert_eq!(status, 400, "{err}");
    assert_eq!(err["error"]["param"], "logit_bias", "{err}");
    let (status, err) = ask(chat(
        prompt,
        json!({"response_format": {"type": "json_object"}}),
    ));
    assert_eq!(status, 400, "{err}");
    assert_eq!(err["error"]["param"], "response_format", "{err}");
}
