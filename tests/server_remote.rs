//! Ponder in front of Ponder: server A runs strategies through `RemotePool` on server B, a
//! second real `ponder serve` process on loopback serving `/v1/completions` with the real model.
//! With the same seeds, single-step strategies give the same candidates as in-process; killing B
//! mid-request gives a clean 502, and a dead first backend fails over to a live one.

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use ponder::api::ServerBuilder;
use ponder::backends::{RemoteOptions, RemotePool};
use ponder::reason::{reason, ReasonRequest};
use ponder_strategies::Registry;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::server::TestServer;

/// A `ponder serve` child process on a free loopback port; killed when dropped (shared with
/// `reliability`).
pub(crate) struct Process {
    pub(crate) child: Child,
    pub(crate) url: String,
}

impl Process {
    fn start() -> Self {
        Self::start_with(&[])
    }

    /// `ponder serve` with extra arguments.
    pub(crate) fn start_with(args: &[&str]) -> Self {
        Self::start_on(0, args)
    }

    /// `ponder serve` on `port` (0: a free one) with extra arguments, and no worked examples:
    /// these servers are backends (plain decoding), and on a cold cache each start would embed
    /// the shipped pool before listening (`src/api/cli.rs`, `exemplars`).
    pub(crate) fn start_on(port: u16, args: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_ponder"))
            .args([
                "serve",
                "--port",
                &port.to_string(),
                "--exemplars",
                "none",
                "--model",
            ])
            .arg(crate::util::smollm2_path())
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn ponder serve");
        let url = crate::util::served_url(&mut child);
        Self { child, url }
    }

    /// The port it listens on.
    pub(crate) fn port(&self) -> u16 {
        self.url
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn pool(urls: Vec<String>) -> Arc<RemotePool> {
    let opts = RemoteOptions {
        retries: 2,
        backoff: Duration::from_millis(20),
        ..RemoteOptions::new(urls)
    };
    Arc::new(RemotePool::new(opts).expect("pool"))
}

fn problem(strategy: &str, seed: u64) -> ReasonRequest {
    ReasonRequest {
        problem: "What is 3 + 4?".into(),
        history: Vec::new(),
        shots: Vec::new(),
        strategy: strategy.into(),
        params: json!({"n": 3, "max_tokens": 24}),
        budget_tokens: 4000,
        deadline_ms: None,
        seed,
    }
}

async fn reason_over_http(
    client: &reqwest::Client,
    url: &str,
    req: &ReasonRequest,
) -> (u16, Value) {
    let body = json!({"problem": req.problem, "strategy": req.strategy, "params": req.params, "budget_tokens": req.budget_tokens, "seed": req.seed});
    let r = client
        .post(format!("{url}/v1/reason"))
        .json(&body)
        .send()
        .await
        .expect("send");
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

#[test]
fn a_server_using_another_as_its_backend_finds_the_same_candidates_as_in_process() {
    let b = Process::start();
    let a = TestServer::start(|builder: ServerBuilder| builder.remote(pool(vec![b.url.clone()])));
    let client = reqwest::Client::new();
    for strategy in ["best_of_n", "self_consistency"] {
        let req = problem(strategy, 11);
        let (status, remote) = a.block_on(reason_over_http(&client, &a.url, &req));
        assert_eq!(status, 200, "{remote}");
        // The same request in-process, on A's own engine (the same model).
        let opts = ponder_engine::RuntimeOptions {
            model: crate::util::smollm2_path(),
            ..ponder_engine::RuntimeOptions::for_model(ponder::models::default_llm_path())
        };
        let runtime = ponder_engine::Runtime::start(&opts).expect("runtime");
        let local = a
            .block_on(reason(
                &Registry::with_builtins(),
                runtime.generator(),
                None,
                &req,
                CancellationToken::new(),
            ))
            .expect("local");
        let remote_texts: Vec<&str> = remote["candidates"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["text"].as_str())
            .collect();
        let local_texts: Vec<&str> = local.candidates.iter().map(|c| c.text.as_str()).collect();
        assert_eq!(
            remote_texts, local_texts,
            "{strategy}: same seeds, same candidates"
        );
        assert_eq!(
            remote["answer"].as_str(),
            local.answer.as_deref(),
            "{strategy}"
        );
        assert!(remote["usage"]["generated_tokens"]
            .as_u64()
            .is_some_and(|g| g > 0));
    }
}

#[test]
fn killing_the_backend_mid_request_is_a_clean_502_and_a_dead_backend_fails_over() {
    let b = Process::start();
    let a = TestServer::start(|builder: ServerBuilder| builder.remote(pool(vec![b.url.clone()])));
    let client = reqwest::Client::new();
    let mut b = Some(b);
    let (status, body) = a.block_on(async {
        let long = ReasonRequest {
            params: json!({"n": 4, "max_tokens": 400}),
            ..problem("best_of_n", 1)
        };
        let call = reason_over_http(&client, &a.url, &long);
        tokio::pin!(call);
        // Let the request reach B, then kill B.
        tokio::select! {
            r = &mut call => panic!("finished before B was killed: {r:?}"),
            _ = tokio::time::sleep(Duration::from_millis(1500)) => {}
        }
        drop(b.take());
        call.await
    });
    assert_eq!(status, 502, "{body}");
    assert_eq!(body["error"]["code"], "backend_unavailable", "{body}");

    // A first backend that is down (nothing listens there) fails over to a live third instance.
    let c = Process::start();
    let dead = "http://127.0.0.1:9".to_string();
    let a2 =
        TestServer::start(|builder: ServerBuilder| builder.remote(pool(vec![dead, c.url.clone()])));
    let (status, body) = a2.block_on(reason_over_http(&client, &a2.url, &problem("best_of_n", 2)));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["candidates"].as_array().map(Vec::len), Some(3));
}

#[test]
fn a_backends_400_reaches_the_client_as_a_400_with_the_backends_message() {
    // B allows 8 completion tokens, A 4096: what A accepts and B refuses is B's 400, passed on
    // (it was a 500), with B's message and without B's address.
    let b = Process::start_with(&["--max-completion-tokens", "8"]);
    let a = TestServer::start(|builder: ServerBuilder| builder.remote(pool(vec![b.url.clone()])));
    let client = reqwest::Client::new();
    let body = json!({"model": "ponder", "prompt": "1, 2, 3,", "max_tokens": 16});
    let (status, out) = a.send(client.post(a.url("/v1/completions")).json(&body));
    assert_eq!(status, 400, "{out}");
    assert_eq!(out["error"]["code"], "backend_refused", "{out}");
    let message = out["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("over this server's limit of 8"),
        "{message}"
    );
    assert!(!message.contains(&b.url), "{message}");
}
