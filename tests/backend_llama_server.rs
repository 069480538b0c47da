//! Ponder in front of llama.cpp's own C++ `llama-server` (parallel slots, continuous batching,
//! prefix cache: what people deploy), built by `scripts/setup-llamacpp.sh` from the pinned
//! llama-cpp-python sdist's vendored tree, on the same SmolLM2 GGUF. Every built-in strategy
//! runs through `ponder serve --backend`, several searches at once, and the tokens Ponder
//! reports generated are the server's own count (its Prometheus `tokens_predicted_total`).
//!
//! Without the binary these tests say so and pass, unless `PONDER_REQUIRE_LLAMACPP=1` (as
//! `scripts/test.sh` sets), where a missing server is a failure.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ponder_strategies::Registry;
use serde_json::{json, Value};

/// Slots of the server: the searches that run at once in the concurrency test.
const SLOTS: usize = 4;

/// The built `llama-server`, or `None` (with a note) when it is not built and not required.
pub(crate) fn binary() -> Option<PathBuf> {
    crate::backend_llamacpp::built("PONDER_LLAMA_SERVER", "llama-server/bin/llama-server")
}

/// A `llama-server` process on a free loopback port; killed when dropped.
pub(crate) struct LlamaServer {
    child: Child,
    pub(crate) url: String,
}

impl LlamaServer {
    /// `slots` parallel slots of 2,048 tokens each, `threads` threads, metrics on.
    pub(crate) fn start(binary: &Path, slots: usize, threads: usize) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap();
        let child = Command::new(binary)
            .arg("--model")
            .arg(crate::util::smollm2_path())
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--threads", &threads.to_string()])
            .args(["--threads-batch", &threads.to_string()])
            .args(["--parallel", &slots.to_string()])
            .args(["--ctx-size", &(2048 * slots).to_string()])
            .args(["--metrics", "--no-webui"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn llama-server");
        let url = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(120);
        while !crate::backend_llamacpp::get_ok(&format!("{url}/health")) {
            assert!(Instant::now() < deadline, "llama-server did not come up");
            std::thread::sleep(Duration::from_millis(250));
        }
        Self { child, url }
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The server's `llamacpp:tokens_predicted_total`: every token it generated so far.
fn tokens_predicted(rt: &tokio::runtime::Runtime, url: &str) -> u64 {
    let text = rt.block_on(async {
        reqwest::get(format!("{url}/metrics"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    });
    text.lines()
        .find_map(|l| l.strip_prefix("llamacpp:tokens_predicted_total "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map(|v| v as u64)
        .unwrap_or_else(|| panic!("no tokens_predicted_total in {text}"))
}

#[test]
fn every_builtin_strategy_runs_through_ponder_serve_over_llama_server_several_at_once() {
    let Some(binary) = binary() else { return };
    let server = LlamaServer::start(&binary, SLOTS, 2);
    let rt = crate::backend_llamacpp::runtime();
    let (mut child, ponder, _dir) = crate::backend_llamacpp::serve_over(&[&server.url]);
    let client = reqwest::Client::new();
    let budget = 800;
    let body = |strategy: &str| {
        json!({"problem": "What is 12 + 7?", "strategy": strategy,
               "params": crate::strategies::small_params(strategy),
               "budget_tokens": budget, "seed": 1})
    };
    let names = Registry::with_builtins().names();
    let before = tokens_predicted(&rt, &server.url);
    let started = Instant::now();
    // As many searches at once as the server has slots.
    let mut generated = 0;
    for wave in names.chunks(SLOTS) {
        let answers = rt.block_on(async {
            let asks = wave.iter().map(|name| {
                let (client, url, body) = (&client, format!("{ponder}/v1/reason"), body(name));
                async move {
                    let r = client.post(url).json(&body).send().await.unwrap();
                    let status = r.status().as_u16();
                    (status, r.json::<Value>().await.unwrap_or(Value::Null))
                }
            });
            futures_util::future::join_all(asks).await
        });
        for (name, (status, out)) in wave.iter().zip(answers) {
            eprintln!("{name}: {status}, usage {}", out["usage"]);
            assert_eq!(status, 200, "{name}: {out}");
            assert!(
                out["candidates"].as_array().is_some_and(|c| !c.is_empty()),
                "{name}: {out}"
            );
            let usage = &out["usage"];
            let spent = usage["generated_tokens"].as_u64().unwrap()
                + usage["prefill_tokens_computed"].as_u64().unwrap()
                + usage["verifier_tokens"].as_u64().unwrap_or(0);
            assert!(spent <= budget, "{name}: spent {spent} of {budget}");
            generated += usage["generated_tokens"].as_u64().unwrap();
        }
    }
    eprintln!(
        "{} strategies over llama-server in {:.1} s",
        names.len(),
        started.elapsed().as_secs_f64()
    );
    assert_eq!(
        generated,
        tokens_predicted(&rt, &server.url) - before,
        "the tokens Ponder reports generated are llama-server's own count"
    );
    let _ = child.kill();
    let _ = child.wait();
}
