//! Ponder in front of a real third-party engine: llama-cpp-python's OpenAI server (the pinned
//! release `scripts/setup-llamacpp.sh` installs under the target dir) on the same SmolLM2 GGUF.
//! A recording proxy between Ponder and the server sums the `usage.completion_tokens` the engine
//! reported, so the tests can hold Ponder's usage to the engine's own count.
//!
//! Without the venv these tests say so and pass, unless `PONDER_REQUIRE_LLAMACPP=1` (as
//! `scripts/test.sh` sets), where a missing server is a failure.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use ponder::backends::{BackendFormat, RemoteGenerator, RemoteOptions};
use ponder::reason::{reason, ReasonRequest};
use ponder_strategies::{Prompt, Registry, DEFAULT_SYSTEM_PROMPT};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::backend_engines::pool;

/// The venv's python, or `None` (with a note) when it is not installed and not required.
fn python() -> Option<PathBuf> {
    built("PONDER_LLAMACPP_PYTHON", "llamacpp-venv/bin/python")
}

/// A file `scripts/setup-llamacpp.sh` installs: `$var` if set, else `relative` under the target
/// dir; `None` (with a note) when it is missing and not required, a failure when
/// `PONDER_REQUIRE_LLAMACPP=1` (as `scripts/test.sh` sets).
pub(crate) fn built(var: &str, relative: &str) -> Option<PathBuf> {
    let path = std::env::var_os(var).map(PathBuf::from).unwrap_or_else(|| {
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"));
        target.join(relative)
    });
    if path.is_file() {
        return Some(path);
    }
    assert!(
        std::env::var("PONDER_REQUIRE_LLAMACPP").as_deref() != Ok("1"),
        "{} is missing: run `bash scripts/setup-llamacpp.sh`",
        path.display()
    );
    eprintln!(
        "skipped: no {} (bash scripts/setup-llamacpp.sh)",
        path.display()
    );
    None
}

/// A llama-cpp-python server process on a free loopback port; killed when dropped.
struct LlamaCpp {
    child: Option<Child>,
    url: String,
}

impl LlamaCpp {
    fn start(python: &Path) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap();
        let child = Command::new(python)
            .args(["-m", "llama_cpp.server", "--model"])
            .arg(crate::util::smollm2_path())
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            // One thread: the suite runs other tests beside this server, and llama.cpp's
            // threads spin at their barriers when a core is taken from them.
            .args([
                "--n_ctx",
                "2048",
                "--n_threads",
                "1",
                "--n_threads_batch",
                "1",
            ])
            .args(["--n_batch", "512"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn llama_cpp.server");
        let url = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if get_ok(&format!("{url}/v1/models")) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "llama_cpp.server did not come up"
            );
            std::thread::sleep(Duration::from_millis(250));
        }
        Self {
            child: Some(child),
            url,
        }
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for LlamaCpp {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Whether a GET of `url` answers 2xx (on a throwaway runtime: reqwest's blocking client is
/// not built).
pub(crate) fn get_ok(url: &str) -> bool {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map(|rt| {
            rt.block_on(async {
                reqwest::get(url)
                    .await
                    .is_ok_and(|r| r.status().is_success())
            })
        })
        .unwrap_or(false)
}

/// Forwards `/v1/completions` and `/extras/tokenize` to `upstream`, summing the completion
/// tokens the engine reports.
struct Proxy {
    upstream: String,
    completion_tokens: AtomicU64,
    client: reqwest::Client,
}

async fn forward(
    State(p): State<Arc<Proxy>>,
    uri: axum::http::Uri,
    Json(body): Json<Value>,
) -> Result<axum::response::Response, axum::http::StatusCode> {
    use axum::response::IntoResponse;
    // A dead upstream (the failover check kills one) is a 502, as a real proxy answers.
    let bad_gateway = |_| axum::http::StatusCode::BAD_GATEWAY;
    let r = p
        .client
        .post(format!("{}{}", p.upstream, uri.path()))
        .json(&body)
        .send()
        .await
        .map_err(bad_gateway)?;
    let content_type = r.headers().get(axum::http::header::CONTENT_TYPE).cloned();
    let bytes = r.bytes().await.map_err(bad_gateway)?;
    // A stream (Ponder asks for one first) is passed on whole: llama-cpp-python's carries no
    // usage, and Ponder, finding none, asks again without streaming and charges that reply.
    let Ok(v) = serde_json::from_slice::<Value>(&bytes) else {
        let mut response = bytes.into_response();
        if let Some(t) = content_type {
            response
                .headers_mut()
                .insert(axum::http::header::CONTENT_TYPE, t);
        }
        return Ok(response);
    };
    if let Some(n) = v
        .pointer("/usage/completion_tokens")
        .and_then(Value::as_u64)
    {
        p.completion_tokens.fetch_add(n, Ordering::Relaxed);
    }
    Ok(Json(v).into_response())
}

fn proxy(rt: &tokio::runtime::Runtime, upstream: &str) -> (String, Arc<Proxy>) {
    let p = Arc::new(Proxy {
        upstream: upstream.to_string(),
        completion_tokens: AtomicU64::new(0),
        client: reqwest::Client::new(),
    });
    let app = Router::new()
        .route("/v1/completions", post(forward))
        .route("/extras/tokenize", post(forward))
        .with_state(Arc::clone(&p));
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    rt.spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}"), p)
}

pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// llama.cpp's own count of `text` (what its `usage.prompt_tokens` says for that prompt).
fn llamacpp_count(rt: &tokio::runtime::Runtime, url: &str, text: &str) -> u64 {
    rt.block_on(async {
        let v: Value = reqwest::Client::new()
            .post(format!("{url}/extras/tokenize"))
            .json(&json!({"input": text}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        v["tokens"].as_array().map(Vec::len).unwrap() as u64
    })
}

/// Self-consistency of 4 short samples: llama-cpp-python computes each token's logprobs in
/// Python (~0.1 s a token here), and what is compared is the accounting, not the answers.
fn self_consistency() -> ReasonRequest {
    ReasonRequest {
        problem: "What is 12 + 7?".into(),
        history: Vec::new(),
        shots: Vec::new(),
        strategy: "self_consistency".into(),
        params: json!({"n": 4, "max_tokens": 96}),
        budget_tokens: SC_BUDGET,
        deadline_ms: None,
        seed: 1,
    }
}

const SC_BUDGET: u64 = 600;

/// The strategies run through llama-cpp-python's server here: one for each kind of request the
/// strategies send. Every built-in strategy runs through llama.cpp's own `llama-server`
/// (tests/backend_llama_server.rs); llama-cpp-python computes each token's logprobs in Python,
/// so the whole table through it cost ~160 s of CI's time where these take a third of it.
const REQUEST_KINDS: &[(&str, &str)] = &[
    (
        "self_consistency",
        "whole samples of the prompt in one batch",
    ),
    (
        "first_finish",
        "samples in chunks, the rest cancelled when one finishes",
    ),
    (
        "a_star",
        "steps cut at a delimiter, the best prefixes extended",
    ),
    ("deepconf", "chunks read for their log-probabilities"),
    (
        "answer_convergence",
        "a forced answer probed after each step",
    ),
    (
        "budget_forcing",
        "the kept sequence continued with appended text",
    ),
    ("revision", "attempts conditioned on earlier attempts"),
    ("ab_mcts", "answers refined beside new samples"),
];

/// `ponder serve` in front of `backends`, with no local model installed (an empty models
/// directory, kept alive by the returned guard): the process, its URL and the directory.
pub(crate) fn serve_over(backends: &[&str]) -> (Child, String, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ponder"));
    cmd.args(["serve", "--port", "0"]);
    for b in backends {
        cmd.args(["--backend", b]);
    }
    let mut child = cmd
        .env("PONDER_MODELS", dir.path())
        .env_remove("PONDER_MODEL")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn ponder serve");
    let url = crate::util::served_url(&mut child);
    (child, url, dir)
}

#[test]
fn self_consistency_runs_over_llama_cpp_as_locally_with_usage_in_its_tokens() {
    let Some(python) = python() else { return };
    let server = LlamaCpp::start(&python);
    let rt = runtime();
    let req = self_consistency();
    // Locally.
    let local_rt = ponder_engine::Runtime::start(&ponder_engine::RuntimeOptions {
        model: crate::util::smollm2_path(),
        ..ponder_engine::RuntimeOptions::for_model(ponder::models::default_llm_path())
    })
    .unwrap();
    let local = rt
        .block_on(reason(
            &Registry::with_builtins(),
            local_rt.generator(),
            None,
            &req,
            CancellationToken::new(),
        ))
        .expect("locally");
    assert!(local.usage.spent() <= SC_BUDGET);
    // Over llama.cpp: ChatML with counts from its /extras/tokenize, and the GGUF's own template
    // and tokenizer (`--backend-tokenizer`).
    let gguf = Arc::new(BackendFormat::load(&crate::util::smollm2_path()).unwrap());
    for format in [None, Some(gguf)] {
        let (url, proxy) = proxy(&rt, &server.url);
        let generator = Arc::new(RemoteGenerator::new(pool(RemoteOptions {
            format: format.clone(),
            ..RemoteOptions::new(vec![url])
        })));
        let prompt = Prompt {
            system: Some(DEFAULT_SYSTEM_PROMPT.into()),
            history: Vec::new(),
            user: req.problem.clone(),
        };
        let rendered = generator.render(&prompt, &Default::default()).unwrap();
        let out = rt
            .block_on(reason(
                &Registry::with_builtins(),
                generator,
                None,
                &req,
                CancellationToken::new(),
            ))
            .unwrap_or_else(|e| panic!("over llama.cpp ({:?}): {e}", format.is_some()));
        let label = if format.is_some() { "gguf" } else { "tokenize" };
        assert!(out.usage.spent() <= SC_BUDGET, "{label}: {:?}", out.usage);
        assert!(!out.candidates.is_empty(), "{label}");
        assert_eq!(
            out.usage.prompt_tokens,
            llamacpp_count(&rt, &server.url, &rendered),
            "{label}: the prompt in llama.cpp's tokens"
        );
        assert_eq!(
            out.usage.generated_tokens,
            proxy.completion_tokens.load(Ordering::Relaxed),
            "{label}: generated tokens as llama.cpp counted them"
        );
    }
}

#[test]
fn each_kind_of_strategy_request_runs_through_ponder_serve_over_llama_cpp_and_fails_over() {
    let Some(python) = python() else { return };
    let mut a = LlamaCpp::start(&python);
    let b = LlamaCpp::start(&python);
    let rt = runtime();
    let (url_a, proxy_a) = proxy(&rt, &a.url);
    let (url_b, proxy_b) = proxy(&rt, &b.url);
    let (mut child, ponder, _dir) = serve_over(&[&url_a, &url_b]);
    let client = reqwest::Client::new();
    let ask = |strategy: &str, budget: u64| {
        // The engine tests' small settings, answers capped at 32 tokens: llama-cpp-python
        // computes each token's logprobs in Python (~0.1 s a token here), and what this test
        // checks is every strategy's path through a real engine, not its answers.
        let mut params = crate::strategies::small_params(strategy);
        if let Some(fields) = params.as_object_mut() {
            for (name, value) in fields.iter_mut() {
                if name == "max_tokens" || name == "rollout_tokens" {
                    *value = json!(32);
                }
            }
        }
        let body = json!({"problem": "What is 12 + 7?", "strategy": strategy,
                          "params": params,
                          "budget_tokens": budget, "seed": 1});
        crate::util::post_json(&rt, &client, &format!("{ponder}/v1/reason"), &body)
    };
    let reported = || {
        proxy_a.completion_tokens.load(Ordering::Relaxed)
            + proxy_b.completion_tokens.load(Ordering::Relaxed)
    };
    let builtins = Registry::with_builtins();
    for (name, kind) in REQUEST_KINDS {
        assert!(
            builtins.contains(name),
            "{name} ({kind}) is not a built-in strategy"
        );
        let budget = 800;
        let before = reported();
        let started = Instant::now();
        let (status, out) = ask(name, budget);
        eprintln!(
            "{name} ({kind}): {status} in {:.1} s, usage {}",
            started.elapsed().as_secs_f64(),
            out["usage"]
        );
        assert_eq!(status, 200, "{name}: {out}");
        assert!(
            out["candidates"].as_array().is_some_and(|c| !c.is_empty()),
            "{name}: {out}"
        );
        assert!(
            out["usage"].is_object() && out.get("answer").is_some(),
            "{name}: {out}"
        );
        let spent = out["usage"]["generated_tokens"].as_u64().unwrap()
            + out["usage"]["prefill_tokens_computed"].as_u64().unwrap()
            + out["usage"]["verifier_tokens"].as_u64().unwrap_or(0);
        assert!(spent <= budget, "{name}: spent {spent} of {budget}");
        assert_eq!(
            out["usage"]["generated_tokens"].as_u64().unwrap(),
            reported() - before,
            "{name}: generated tokens are llama.cpp's count"
        );
    }
    // One backend killed: the other serves; both killed: a clean 502.
    a.kill();
    let (status, out) = ask("best_of_n", 800);
    assert_eq!(status, 200, "failover: {out}");
    drop(b);
    let (status, out) = ask("best_of_n", 800);
    assert_eq!(status, 502, "{out}");
    let _ = child.kill();
    let _ = child.wait();
}
