//! The HTTP service end to end: a real server on a loopback port over the real default model,
//! spoken to with an HTTP client (reqwest). Covers the OpenAI-compatible endpoints (plain and
//! streamed), strategies by model name with streamed progress, `/v1/reason`, discovery and
//! metrics, the bad-input table (every error in OpenAI's shape, none a 500), and a user's plug-in
//! strategy registered on the server builder and called by name.

use crate::custom_strategy;

use std::future::Future;
use std::sync::Arc;

use ponder::api::{serve, ApiKeys, Limits, ServerBuilder};
use ponder_engine::{Runtime, RuntimeOptions};
use serde_json::{json, Value};
use tokio::sync::oneshot;

/// A server on 127.0.0.1:<free port> with its own runtime; stops when dropped.
pub(crate) struct TestServer {
    pub(crate) url: String,
    rt: tokio::runtime::Runtime,
    stop: Option<oneshot::Sender<()>>,
}

impl TestServer {
    pub(crate) fn start(configure: impl FnOnce(ServerBuilder) -> ServerBuilder) -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("tokio");
        Self::start_on(rt, configure)
    }

    /// A server on the given runtime (e.g. one whose threads log to a test subscriber).
    pub(crate) fn start_on(
        rt: tokio::runtime::Runtime,
        configure: impl FnOnce(ServerBuilder) -> ServerBuilder,
    ) -> Self {
        let opts = RuntimeOptions {
            model: crate::util::smollm2_path(),
            ..RuntimeOptions::for_model(ponder::models::default_llm_path())
        };
        let runtime = Arc::new(Runtime::start(&opts).expect("runtime"));
        Self::serving(rt, runtime, |b| configure(b.model_id("smollm2")))
    }

    /// A server over `runtime` (another model than the default) on `rt`.
    pub(crate) fn serving(
        rt: tokio::runtime::Runtime,
        runtime: Arc<Runtime>,
        configure: impl FnOnce(ServerBuilder) -> ServerBuilder,
    ) -> Self {
        let state = configure(ServerBuilder::new(runtime)).build();
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let (stop, stopped) = oneshot::channel::<()>();
        rt.spawn(serve(listener, Arc::clone(&state), async move {
            let _ = stopped.await;
        }));
        Self {
            url,
            rt,
            stop: Some(stop),
        }
    }

    pub(crate) fn block_on<F: Future>(&self, f: F) -> F::Output {
        self.rt.block_on(f)
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.url)
    }

    /// The text of `GET /metrics`.
    pub(crate) fn metrics(&self) -> String {
        self.block_on(async {
            let r = reqwest::get(self.url("/metrics")).await.expect("send");
            r.text().await.expect("text")
        })
    }

    /// Sends `request` and returns its status and JSON body (`Null` when the body is not JSON).
    pub(crate) fn send(&self, request: reqwest::RequestBuilder) -> (u16, Value) {
        self.block_on(async {
            let r = request.send().await.expect("send");
            let s = r.status().as_u16();
            (s, r.json::<Value>().await.unwrap_or(Value::Null))
        })
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

/// `data:` payloads of an SSE body, in order.
pub(crate) fn sse_data(body: &str) -> Vec<String> {
    body.lines()
        .filter_map(|l| l.strip_prefix("data: ").or_else(|| l.strip_prefix("data:")))
        .map(|s| s.trim().to_string())
        .collect()
}

/// The value of a sample line `name value` (no labels, or an exact label set) in metrics text.
pub(crate) fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        l.strip_prefix(name)
            .and_then(|rest| rest.strip_prefix(' '))
            .and_then(|v| v.trim().parse().ok())
    })
}

pub(crate) async fn post(client: &reqwest::Client, url: &str, body: Value) -> (u16, Value) {
    let r = client.post(url).json(&body).send().await.expect("send");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

pub(crate) fn chat(content: &str, extra: Value) -> Value {
    let mut body = json!({"model": "ponder", "messages": [{"role": "user", "content": content}]});
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    body
}

#[test]
fn chat_completions_answer_in_openai_shape_with_usage_and_replay_by_seed() {
    let server = TestServer::start(|b| b);
    let client = reqwest::Client::new();
    let url = server.url("/v1/chat/completions");
    let body = chat(
        "Name a colour.",
        json!({"max_tokens": 8, "n": 2, "seed": 7, "temperature": 0.8, "logprobs": true, "top_logprobs": 2}),
    );
    let (status, first) = server.block_on(post(&client, &url, body.clone()));
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["object"], "chat.completion");
    let choices = first["choices"].as_array().expect("choices");
    assert_eq!(choices.len(), 2);
    for c in choices {
        assert_eq!(c["message"]["role"], "assistant");
        assert!(c["message"]["content"].is_string());
        assert!(matches!(
            c["finish_reason"].as_str(),
            Some("stop" | "length")
        ));
        let lp = c["logprobs"]["content"].as_array().expect("logprobs");
        assert!(
            !lp.is_empty()
                && lp[0]["top_logprobs"]
                    .as_array()
                    .is_some_and(|t| t.len() == 2),
            "{c}"
        );
    }
    let usage = &first["usage"];
    let (p, c) = (
        usage["prompt_tokens"].as_u64().expect("prompt"),
        usage["completion_tokens"].as_u64().expect("completion"),
    );
    assert!(p > 0 && c > 0 && c <= 16, "{usage}");
    assert_eq!(usage["total_tokens"].as_u64(), Some(p + c));
    assert_eq!(usage["completion_tokens_details"]["reasoning_tokens"], 0);

    // The same seed replays the same choices; the prompt's blocks now come from the prefix cache.
    let (_, second) = server.block_on(post(&client, &url, body));
    for (a, b) in first["choices"]
        .as_array()
        .into_iter()
        .flatten()
        .zip(second["choices"].as_array().into_iter().flatten())
    {
        assert_eq!(a["message"]["content"], b["message"]["content"]);
    }
    assert!(
        second["usage"]["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap_or(0)
            > 0,
        "{}",
        second["usage"]
    );

    // The legacy completions endpoint continues raw text.
    let (status, text) =
        server.block_on(post(&client, &server.url("/v1/completions"), json!({"model": "smollm2", "prompt": "1, 2, 3,", "max_tokens": 4, "temperature": 0, "logprobs": 1})));
    assert_eq!(status, 200, "{text}");
    assert_eq!(text["object"], "text_completion");
    assert!(text["choices"][0]["text"].is_string());
    assert!(text["choices"][0]["logprobs"]["token_logprobs"]
        .as_array()
        .is_some_and(|v| !v.is_empty()));
}

#[test]
fn streamed_chat_matches_the_plain_answer_and_ends_with_usage_and_done() {
    let server = TestServer::start(|b| b);
    let client = reqwest::Client::new();
    let url = server.url("/v1/chat/completions");
    let base = json!({"max_tokens": 12, "temperature": 0, "stop": ["\n\n"]});
    let (_, plain) = server.block_on(post(
        &client,
        &url,
        chat("Count from one to five.", base.clone()),
    ));
    let mut streamed = base;
    streamed["stream"] = json!(true);
    streamed["stream_options"] = json!({"include_usage": true});
    let body = server.block_on(async {
        let r = client
            .post(&url)
            .json(&chat("Count from one to five.", streamed))
            .send()
            .await
            .expect("send");
        assert_eq!(r.status(), 200);
        assert!(r.headers()["content-type"]
            .to_str()
            .is_ok_and(|t| t.starts_with("text/event-stream")));
        r.text().await.expect("body")
    });
    let data = sse_data(&body);
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"), "{body}");
    let chunks: Vec<Value> = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).expect("chunk json"))
        .collect();
    assert!(chunks
        .iter()
        .all(|c| c["object"] == "chat.completion.chunk"));
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let text: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(
        text,
        plain["choices"][0]["message"]["content"]
            .as_str()
            .unwrap_or_default()
    );
    assert!(chunks
        .iter()
        .any(|c| c["choices"][0]["finish_reason"].is_string()));
    let usage = chunks
        .last()
        .map(|c| c["usage"].clone())
        .unwrap_or_default();
    assert_eq!(
        usage["completion_tokens"], plain["usage"]["completion_tokens"],
        "{usage}"
    );
}

#[test]
fn a_strategy_by_model_name_streams_progress_then_the_answer_within_budget() {
    let server = TestServer::start(|b| b);
    let client = reqwest::Client::new();
    let body = json!({
        "model": "ponder/self_consistency",
        "messages": [{"role": "user", "content": "What is 2+3?"}],
        "strategy_params": {"n": 2, "max_tokens": 48},
        "budget_tokens": 600,
        "seed": 3,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    let text = server.block_on(async {
        let r = client
            .post(server.url("/v1/chat/completions"))
            .json(&body)
            .send()
            .await
            .expect("send");
        assert_eq!(r.status(), 200);
        r.text().await.expect("body")
    });
    let data = sse_data(&text);
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
    let chunks: Vec<Value> = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).expect("json"))
        .collect();
    let progress: Vec<&Value> = chunks
        .iter()
        .filter_map(|c| c.get("ponder").and_then(|p| p.get("progress")))
        .collect();
    assert!(
        progress.iter().any(|p| p["event"] == "candidate"
            && p.get("vote_margin").is_some()
            && p.get("leader").is_some()),
        "{text}"
    );
    assert!(progress
        .iter()
        .all(|p| p["spent"].as_u64().is_some_and(|s| s <= 600)));
    let summary = chunks
        .iter()
        .find_map(|c| c.get("ponder").filter(|p| p.get("strategy").is_some()))
        .expect("summary");
    assert_eq!(summary["strategy"], "self_consistency");
    assert!(summary["spent"].as_u64().is_some_and(|s| s <= 600));
    let usage = chunks
        .last()
        .map(|c| c["usage"].clone())
        .unwrap_or_default();
    assert!(
        usage["completion_tokens"].as_u64().is_some_and(|c| c > 0),
        "{usage}"
    );
    assert!(usage["completion_tokens_details"]["reasoning_tokens"].is_u64());

    // The native endpoint returns the whole Outcome, tree included.
    let (status, outcome) = server.block_on(post(
        &client,
        &server.url("/v1/reason"),
        json!({"problem": "What is 2+3?", "strategy": "best_of_n", "params": {"n": 2, "max_tokens": 32}, "budget_tokens": 500, "seed": 1}),
    ));
    assert_eq!(status, 200, "{outcome}");
    assert_eq!(outcome["strategy"], "best_of_n");
    assert_eq!(outcome["candidates"].as_array().map(Vec::len), Some(2));
    assert!(
        outcome["tree"].is_object()
            && outcome["usage"]["generated_tokens"]
                .as_u64()
                .is_some_and(|g| g > 0)
    );
}

#[test]
fn discovery_health_metrics_and_openapi() {
    let server = TestServer::start(|b| b);
    let client = reqwest::Client::new();
    let get = |path: &str| {
        let url = server.url(path);
        let client = client.clone();
        server.block_on(async move {
            let r = client.get(url).send().await.expect("send");
            (r.status().as_u16(), r.text().await.expect("text"))
        })
    };
    assert_eq!(get("/health").0, 200);
    assert_eq!(get("/ready").0, 200);
    let (_, models) = get("/v1/models");
    let models: Value = serde_json::from_str(&models).expect("json");
    let ids: Vec<&str> = models["data"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["id"].as_str())
        .collect();
    assert!(
        ids.contains(&"ponder") && ids.contains(&"ponder/beam_search") && ids.contains(&"smollm2"),
        "{ids:?}"
    );
    let (_, strategies) = get("/v1/strategies");
    let strategies: Value = serde_json::from_str(&strategies).expect("json");
    let bon = strategies["data"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| s["name"] == "best_of_n")
        .expect("best_of_n");
    assert!(bon["defaults"]["n"].is_u64());
    let (_, doc) = get("/openapi.json");
    let doc: Value = serde_json::from_str(&doc).expect("json");
    assert_eq!(doc["openapi"], "3.1.0");
    assert!(doc["paths"]["/v1/chat/completions"]["post"].is_object());
    // This server's model id and a strategy's parameters are in the document.
    let plain = &doc["components"]["schemas"]["ChatCompletionRequest"]["anyOf"][0];
    assert_eq!(
        plain["properties"]["model"]["enum"],
        json!(["ponder", "smollm2"])
    );
    assert!(
        doc["components"]["schemas"]["StrategyParams.best_of_n"]["properties"]["n"].is_object()
    );

    let (s, _) = server.block_on(post(
        &client,
        &server.url("/v1/chat/completions"),
        chat("Hi", json!({"max_tokens": 2})),
    ));
    assert_eq!(s, 200);
    let (_, metrics) = get("/metrics");
    for name in [
        "ponder_requests_total{route=\"/v1/chat/completions\",status=\"200\"}",
        "ponder:num_requests_running{model_name=\"smollm2\"}",
        "ponder_kv_blocks_used",
        "ponder_kv_blocks_free",
        "ponder:prefix_cache_hits_total{model_name=\"smollm2\"}",
        "ponder:num_preemptions_total{model_name=\"smollm2\"}",
        "ponder:generation_tokens_total{model_name=\"smollm2\"}",
        "ponder:time_to_first_token_seconds_bucket",
        "ponder:e2e_request_latency_seconds_bucket",
    ] {
        assert!(metrics.contains(name), "missing {name} in\n{metrics}");
    }
    assert_eq!(
        metric(
            &metrics,
            "ponder:num_requests_running{model_name=\"smollm2\"}"
        ),
        Some(0.0)
    );
    assert!(metric(&metrics, "ponder_kv_blocks_free").is_some_and(|f| f > 0.0));
}

#[test]
fn bad_input_table_gets_openai_errors_with_the_right_codes() {
    let limits = Limits {
        max_body_bytes: 64 << 10,
        max_n: 4,
        max_budget_tokens: 10_000,
        ..Limits::default()
    };
    let server = TestServer::start(|b| b.limits(limits).api_keys(ApiKeys::new(["sk-test-key"])));
    let client = reqwest::Client::new();
    let url = server.url("/v1/chat/completions");
    let long_prompt = "hello ".repeat(9000); // ~9000 tokens: past SmolLM2's 8192 context, under 64 KiB
    type Case = (
        &'static str,
        reqwest::RequestBuilder,
        u16,
        Option<&'static str>,
    );
    let json_post = |body: Value| client.post(&url).bearer_auth("sk-test-key").json(&body);
    let cases: Vec<Case> = vec![
        (
            "malformed json",
            client
                .post(&url)
                .bearer_auth("sk-test-key")
                .header("content-type", "application/json")
                .body("{\"model\": "),
            400,
            Some("invalid_json"),
        ),
        (
            "missing messages",
            json_post(json!({"model": "ponder"})),
            400,
            Some("invalid_json"),
        ),
        (
            "wrong content type",
            client
                .post(&url)
                .bearer_auth("sk-test-key")
                .header("content-type", "text/plain")
                .body("hi"),
            415,
            Some("unsupported_media_type"),
        ),
        (
            "oversized body",
            json_post(chat(&"x".repeat(80 << 10), json!({}))),
            413,
            Some("payload_too_large"),
        ),
        (
            "unknown model",
            json_post(json!({"model": "gpt-9", "messages": [{"role": "user", "content": "hi"}]})),
            404,
            Some("model_not_found"),
        ),
        (
            "unknown strategy model",
            json_post(
                json!({"model": "ponder/nope", "messages": [{"role": "user", "content": "hi"}]}),
            ),
            404,
            Some("model_not_found"),
        ),
        (
            "prompt too long",
            json_post(chat(&long_prompt, json!({"max_tokens": 4}))),
            400,
            Some("context_length_exceeded"),
        ),
        (
            "question too long for a streamed search",
            json_post(chat(
                &long_prompt,
                json!({"strategy": "best_of_n", "stream": true}),
            )),
            400,
            Some("context_length_exceeded"),
        ),
        (
            "budget over limit",
            json_post(chat("hi", json!({"budget_tokens": 10_001}))),
            400,
            Some("limit_exceeded"),
        ),
        (
            "n over limit",
            json_post(chat("hi", json!({"n": 5}))),
            400,
            Some("limit_exceeded"),
        ),
        (
            "top_logprobs over limit",
            json_post(chat("hi", json!({"logprobs": true, "top_logprobs": 50}))),
            400,
            Some("limit_exceeded"),
        ),
        (
            "too many stops",
            json_post(chat("hi", json!({"stop": ["a", "b", "c", "d", "e"]}))),
            400,
            Some("limit_exceeded"),
        ),
        (
            "temperature out of range",
            json_post(chat("hi", json!({"temperature": 3.5}))),
            400,
            None,
        ),
        (
            "bad strategy params",
            json_post(chat(
                "hi",
                json!({"strategy": "best_of_n", "strategy_params": {"n": 0}}),
            )),
            400,
            None,
        ),
        (
            "empty messages",
            json_post(json!({"model": "ponder", "messages": []})),
            400,
            None,
        ),
        (
            "no key",
            client.post(&url).json(&chat("hi", json!({}))),
            401,
            Some("invalid_api_key"),
        ),
        (
            "bad key",
            client
                .post(&url)
                .bearer_auth("sk-wrong")
                .json(&chat("hi", json!({}))),
            401,
            Some("invalid_api_key"),
        ),
        (
            "unknown path",
            client
                .get(server.url("/v1/nope"))
                .bearer_auth("sk-test-key"),
            404,
            Some("not_found"),
        ),
    ];
    for (name, request, status, code) in cases {
        let (got, body) = server.send(request);
        assert_eq!(got, status, "{name}: {body}");
        let error = &body["error"];
        assert!(
            error["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{name}: {body}"
        );
        assert!(error["type"].is_string(), "{name}: {body}");
        if let Some(code) = code {
            assert_eq!(error["code"], code, "{name}: {body}");
        }
        assert!(
            !body.to_string().contains("sk-"),
            "{name}: a key leaked into {body}"
        );
    }
    // Probes stay open without a key.
    let health = server.block_on(async {
        client
            .get(server.url("/health"))
            .send()
            .await
            .expect("send")
            .status()
            .as_u16()
    });
    assert_eq!(health, 200);
}

#[test]
fn effort_levels_and_the_default_budget_stay_within_the_operators_cap() {
    // `reasoning_effort: high` names 16384 tokens and the default budget is 4096: both above a
    // 200-token cap, which must bound them instead of refusing a field the client never sent.
    // (Eight 48-token traces and their prompt need ~430 tokens: the cap is what keeps them short.)
    let limits = Limits {
        max_budget_tokens: 200,
        ..Limits::default()
    };
    let server = TestServer::start(|b| b.limits(limits));
    let client = reqwest::Client::new();
    let params = json!({"n": 8, "max_tokens": 48});
    let body = json!({
        "model": "ponder/self_consistency",
        "messages": [{"role": "user", "content": "What is 2+3?"}],
        "reasoning_effort": "high",
        "strategy_params": params,
        "seed": 5,
    });
    let (status, out) = server.block_on(post(&client, &server.url("/v1/chat/completions"), body));
    assert_eq!(status, 200, "{out}");
    assert!(
        out["ponder"]["spent"].as_u64().is_some_and(|s| s <= 200),
        "{out}"
    );
    let reason = json!({"problem": "What is 2+3?", "strategy": "self_consistency", "params": params, "seed": 5});
    let (status, out) = server.block_on(post(&client, &server.url("/v1/reason"), reason));
    assert_eq!(status, 200, "{out}");
    let spent = [
        "generated_tokens",
        "prefill_tokens_computed",
        "verifier_tokens",
    ]
    .iter()
    .filter_map(|k| out["usage"][k].as_u64())
    .sum::<u64>();
    assert!(spent <= 200, "{out}");
}

#[test]
fn a_plugin_strategy_registered_on_the_builder_is_callable_by_name() {
    let server = TestServer::start(|b| b.register(custom_strategy::register));
    let client = reqwest::Client::new();
    let (_, strategies) = server.block_on(async {
        let r = client
            .get(server.url("/v1/strategies"))
            .send()
            .await
            .expect("send");
        (r.status(), r.json::<Value>().await.expect("json"))
    });
    assert!(strategies["data"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|s| s["name"] == "confident_greedy"));
    let body = json!({
        "model": "ponder/confident_greedy",
        "messages": [{"role": "user", "content": "What is 2+3?"}],
        "strategy_params": {"min_mean_logprob": 0.0, "n": 2, "max_tokens": 32},
        "budget_tokens": 1500,
        "seed": 1,
        "return_trace": true,
    });
    let (status, out) = server.block_on(post(&client, &server.url("/v1/chat/completions"), body));
    assert_eq!(status, 200, "{out}");
    assert_eq!(out["ponder"]["strategy"], "confident_greedy");
    assert_eq!(out["ponder"]["candidates"], 3, "greedy plus two samples");
    assert!(out["ponder"]["trace"].is_object());
    assert!(out["choices"][0]["message"]["content"].is_string());
}

#[test]
fn a_completion_prompt_may_be_token_ids_as_lm_evaluation_harness_sends_it() {
    let server = TestServer::start(|b| b);
    let client = reqwest::Client::new();
    let ids =
        ponder_engine::forward::encode_prompt(crate::util::smollm2(), "1, 2, 3,").expect("ids");
    let url = server.url("/v1/completions");
    let ask = |prompt: Value| {
        let body = json!({"model": "smollm2", "prompt": prompt, "max_tokens": 6, "temperature": 0});
        server.block_on(post(&client, &url, body))
    };
    let (status, text) = ask(json!("1, 2, 3,"));
    assert_eq!(status, 200, "{text}");
    for prompt in [json!(ids), json!([ids])] {
        let (status, tokens) = ask(prompt);
        assert_eq!(status, 200, "{tokens}");
        assert_eq!(tokens["choices"][0]["text"], text["choices"][0]["text"]);
        assert_eq!(
            tokens["usage"]["prompt_tokens"].as_u64(),
            Some(ids.len() as u64)
        );
    }
    // Outside the vocabulary, several prompts, or with a strategy: a 400 naming the prompt.
    for prompt in [json!([1, 999_999_999]), json!([[1, 2], [3, 4]])] {
        let (status, out) = ask(prompt);
        assert_eq!(
            (status, &out["error"]["param"]),
            (400, &json!("prompt")),
            "{out}"
        );
    }
    let body = json!({"model": "ponder/best_of_n", "prompt": ids, "max_tokens": 6});
    let (status, out) = server.block_on(post(&client, &url, body));
    assert_eq!(
        (status, &out["error"]["param"]),
        (400, &json!("prompt")),
        "{out}"
    );
}

#[test]
fn a_search_samples_with_the_requests_temperature_stop_and_max_tokens() {
    let server = TestServer::start(|b| b);
    let client = reqwest::Client::new();
    let reason = |extra: Value| {
        let mut body = json!({"problem": "What is 2+3?", "strategy": "self_consistency",
                              "params": {"n": 3}, "budget_tokens": 3000, "seed": 4});
        if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
            b.extend(e.clone());
        }
        server.block_on(post(&client, &server.url("/v1/reason"), body))
    };
    let texts = |out: &Value| -> Vec<String> {
        out["candidates"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["text"].as_str().map(str::to_string))
            .collect()
    };
    // Temperature 0 reaches every branch: three greedy branches are one text; max_tokens caps
    // each branch.
    let (status, greedy) = reason(json!({"temperature": 0, "max_tokens": 12}));
    assert_eq!(status, 200, "{greedy}");
    let all = texts(&greedy);
    assert_eq!(all.len(), 3, "{greedy}");
    assert!(
        all.iter().all(|t| *t == all[0]),
        "greedy branches differ: {all:?}"
    );
    for c in greedy["candidates"].as_array().into_iter().flatten() {
        assert!(c["tokens"].as_u64().is_some_and(|t| t <= 12), "{c}");
    }
    // A stop string ends each branch where it appears: every text is the greedy one up to it.
    let greedy_text = &all[0];
    let cut = greedy_text
        .char_indices()
        .map(|(i, _)| i)
        .find(|&i| i >= 4)
        .expect("a long enough text");
    let stop: String = greedy_text[cut..].chars().take(2).collect();
    let at = greedy_text.find(&stop).expect("the stop is in the text");
    let (status, stopped) = reason(json!({"temperature": 0, "max_tokens": 12, "stop": stop}));
    assert_eq!(status, 200, "{stopped}");
    for t in texts(&stopped) {
        assert!(
            t.starts_with(&greedy_text[..at]) && t.contains(&stop),
            "{t:?} vs {stop:?}"
        );
        assert!(t.len() <= greedy_text.len(), "{t:?}");
    }
    // The chat endpoint's answer is cut before the stop, as plain decoding's is.
    let body = chat(
        "What is 2+3?",
        json!({"model": "ponder/self_consistency", "strategy_params": {"n": 3},
               "budget_tokens": 3000, "seed": 4, "temperature": 0, "max_tokens": 12,
               "stop": stop}),
    );
    let (status, out) = server.block_on(post(&client, &server.url("/v1/chat/completions"), body));
    assert_eq!(status, 200, "{out}");
    assert_eq!(
        out["choices"][0]["message"]["content"].as_str(),
        Some(&greedy_text[..at]),
        "{out}"
    );
    // What a strategy cannot return is refused by name, not dropped.
    let body = chat("hi", json!({"model": "ponder/best_of_n", "logprobs": true}));
    let (status, out) = server.block_on(post(&client, &server.url("/v1/chat/completions"), body));
    assert_eq!(
        (status, &out["error"]["param"]),
        (400, &json!("logprobs")),
        "{out}"
    );
}
