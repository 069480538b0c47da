//! Reliability under load and faults, with the real model: a short run of Ponder's own load
//! generator (`ponder bench load`, the CI form of `scripts/load.sh`) against a real `ponder serve`
//! gets no 5xx and leaves the gauges at idle; a KV pool too small for the work preempts and
//! recomputes yet answers exactly as a large pool does; a deadline mid-search returns the best
//! answer so far with `finish_reason: "deadline"`; SIGTERM under load drains the in-flight streams
//! and exits 0; a remote backend killed and restarted under sustained load gives clean 502s or
//! error events (never a hung request or a cut stream) and the front recovers once it is back.
//! (A remote backend killed mid-request, and failover: `server_remote`.)

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use ponder::api::AppError;
use ponder::bench::load::{run, Kind, LoadTestOptions};
use ponder::reason::{reason, ReasonRequest};
use ponder_engine::forward::bytes_per_block;
use ponder_engine::{Runtime, RuntimeOptions};
use ponder_strategies::{Registry, StrategyError};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::server::TestServer;
use crate::server_remote::Process;

#[test]
fn a_short_mixed_load_gets_no_5xx_and_leaves_the_server_idle() {
    let server = Process::start_with(&["--max-running", "8", "--max-queue", "64"]);
    let opts = LoadTestOptions {
        pid: Some(server.child.id()),
        seed: 7,
        ..LoadTestOptions::new(server.url.clone(), 8, Duration::from_secs(10))
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    let report = rt.block_on(run(&opts)).expect("load");
    let json = serde_json::to_string_pretty(&report).unwrap_or_default();
    assert!(report.requests >= 8, "{json}");
    assert_eq!(report.server_errors, 0, "{json}");
    assert_eq!(report.transport_errors, 0, "{json}");
    assert_eq!(report.truncated_streams, 0, "{json}");
    assert!(
        report
            .by_status
            .keys()
            .all(|s| matches!(s.as_str(), "200" | "400" | "429")),
        "{json}"
    );
    assert!(
        report.by_status.get("400").is_some_and(|&n| n > 0),
        "over-limit budgets are refused: {json}"
    );
    assert!(report.idle_after(), "gauges back to idle: {json}");
    assert!(report.rss_end_kib.is_some_and(|r| r > 0), "{json}");
}

#[test]
fn a_backend_killed_and_restarted_under_load_gives_clean_errors_and_the_front_recovers() {
    let mut backend = Process::start_with(&[]);
    let port = backend.port();
    let front = Process::start_with(&["--backend", &backend.url, "--max-running", "8"]);
    // Strategy requests (streamed or not) go to the backend; plain chat stays local.
    let opts = LoadTestOptions {
        pid: Some(front.child.id()),
        seed: 11,
        kinds: vec![Kind::Strategy, Kind::StreamedStrategy, Kind::Chat],
        // A request still unanswered after this counts as a transport error: nothing may hang.
        timeout: Duration::from_secs(90),
        ..LoadTestOptions::new(front.url.clone(), 6, Duration::from_secs(30))
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    let t0 = Instant::now();
    let (report, restart_s, restarted) = rt.block_on(async {
        let load = tokio::spawn(async move { run(&opts).await });
        tokio::time::sleep(Duration::from_secs(8)).await;
        let _ = backend.child.kill();
        let _ = backend.child.wait();
        tokio::time::sleep(Duration::from_secs(6)).await;
        // `start_on` returns once the new backend serves; on a loaded machine that can be many
        // seconds after the restart began, so recovery is judged from this moment on.
        let restarted = Process::start_on(port, &[]);
        let restart_s = t0.elapsed().as_secs_f64();
        (
            load.await.expect("load task").expect("load"),
            restart_s,
            restarted,
        )
    });
    let json = serde_json::to_string_pretty(&report).unwrap_or_default();
    eprintln!(
        "backend kill/restart under load (backend serving again at {restart_s:.1} s): {}",
        serde_json::to_string(&report.timeline).unwrap_or_default()
    );
    assert!(
        report
            .by_status
            .keys()
            .all(|s| matches!(s.as_str(), "200" | "400" | "429" | "502" | "503")),
        "{json}"
    );
    assert_eq!(
        report.transport_errors, 0,
        "no request hung or was cut: {json}"
    );
    assert_eq!(
        report.truncated_streams, 0,
        "every stream ended with [DONE]: {json}"
    );
    assert!(
        report.server_errors + report.stream_errors > 0,
        "the killed backend was noticed: {json}"
    );
    // Every request sent after the backend was serving again succeeded (windows wholly after it).
    for w in report.timeline.iter().filter(|w| w.start_s >= restart_s) {
        assert!(
            w.server_errors == 0 && w.stream_errors == 0,
            "no errors once the backend is back: {json}"
        );
    }
    assert!(
        report.idle_after(),
        "the front's gauges back to idle: {json}"
    );
    // And the front serves strategy requests, streamed or not, through the restarted backend.
    let after = LoadTestOptions {
        pid: Some(front.child.id()),
        seed: 12,
        kinds: vec![Kind::Strategy, Kind::StreamedStrategy],
        timeout: Duration::from_secs(90),
        ..LoadTestOptions::new(front.url.clone(), 2, Duration::from_secs(2))
    };
    let recovered = rt.block_on(run(&after)).expect("load after the restart");
    let json = serde_json::to_string_pretty(&recovered).unwrap_or_default();
    assert!(
        recovered.requests >= 2
            && recovered.server_errors == 0
            && recovered.transport_errors == 0
            && recovered.timeline.iter().all(|w| w.stream_errors == 0),
        "recovered after the restart: {json}"
    );
    drop(restarted);
}

fn best_of_n(seed: u64) -> ReasonRequest {
    ReasonRequest {
        problem: "Name three animals that live in the sea.".into(),
        history: Vec::new(),
        shots: Vec::new(),
        strategy: "best_of_n".into(),
        params: json!({"n": 4, "max_tokens": 40}),
        budget_tokens: 100_000,
        deadline_ms: None,
        seed,
    }
}

#[test]
fn a_tiny_kv_pool_preempts_and_recomputes_to_the_same_seeded_answers() {
    let config = crate::util::smollm2().model.config().clone();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    // Three seeded searches at once, each needing 16 of the pool's blocks at its peak.
    let outcome = |kv_memory: u64| {
        let opts = RuntimeOptions {
            model: crate::util::smollm2_path(),
            kv_memory,
            ..RuntimeOptions::for_model(ponder::models::default_llm_path())
        };
        let runtime = Runtime::start(&opts).expect("runtime");
        let registry = Registry::with_builtins();
        let texts = rt.block_on(async {
            let runs =
                [3, 4, 5].map(|seed| {
                    let req = best_of_n(seed);
                    let (registry, generator) = (&registry, runtime.generator());
                    async move {
                        reason(registry, generator, None, &req, CancellationToken::new()).await
                    }
                });
            let [a, b, c] = runs;
            let (a, b, c) = tokio::join!(a, b, c);
            [a, b, c].map(|o| {
                let o = o.expect("reason");
                (
                    o.answer.clone(),
                    o.candidates
                        .iter()
                        .map(|c| c.text.clone())
                        .collect::<Vec<_>>(),
                )
            })
        });
        let counters = rt.block_on(runtime.counters()).expect("counters");
        (texts, counters.preemptions)
    };
    let (large, large_preemptions) = outcome(512 << 20);
    // Sixteen 16-token blocks: what admission asks for one search (fourteen are refused), far
    // from enough for three at once. The seeded branches often stop well before 40 tokens, so
    // a pool with room to spare (twenty blocks) may never fill: which answers are short moves
    // with the last bits of the model's arithmetic.
    let (tiny, tiny_preemptions) = outcome(16 * bytes_per_block(&config, 16));
    assert_eq!(large_preemptions, 0);
    assert!(tiny_preemptions > 0, "the tiny pool must preempt");
    assert_eq!(
        tiny, large,
        "preemption and recompute change no seeded answer"
    );
}

#[test]
fn a_fan_out_larger_than_the_kv_pool_is_refused_with_a_400_naming_the_limit() {
    let config = crate::util::smollm2().model.config().clone();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    let opts = RuntimeOptions {
        model: crate::util::smollm2_path(),
        kv_memory: 20 * bytes_per_block(&config, 16),
        ..RuntimeOptions::for_model(ponder::models::default_llm_path())
    };
    let runtime = Runtime::start(&opts).expect("runtime");
    let registry = Registry::with_builtins();
    // Sixteen branches of up to 200 tokens need 13 blocks each: far more than the pool's twenty.
    let req = ReasonRequest {
        params: json!({"n": 16, "max_tokens": 200}),
        ..best_of_n(1)
    };
    let err = rt
        .block_on(reason(
            &registry,
            runtime.generator(),
            None,
            &req,
            CancellationToken::new(),
        ))
        .expect_err("the fan-out cannot fit the pool");
    assert!(matches!(err, StrategyError::Capacity(_)), "{err}");
    assert!(
        err.to_string().contains("KV blocks but the pool has 20"),
        "{err}"
    );
    // Not the server's fault and not worth retrying unchanged: a 4xx, with a code a client can test.
    let err = AppError::Strategy(err);
    assert_eq!(err.status().as_u16(), 400, "{err}");
    let body = serde_json::to_value(err.body()).expect("body");
    assert_eq!(body["error"]["code"], "kv_capacity_exceeded", "{body}");
}

#[test]
fn a_deadline_mid_search_returns_the_best_answer_so_far() {
    let server = TestServer::start(|b| b);
    let client = reqwest::Client::new();
    let body = json!({
        "problem": "What is 17 * 23?",
        "strategy": "mcts",
        // The search must still be generating when the deadline comes: with few children all
        // leaves can finish within a second and the remaining iterations only revisit finished
        // nodes, which takes no time. Sixteen children per expansion take longer than the
        // deadline on this kind of machine.
        "params": {"iterations": 100000, "expansions": 16},
        "budget_tokens": 200_000,
        "deadline_ms": 1500,
        "seed": 1,
    });
    let (status, out) = server.send(client.post(server.url("/v1/reason")).json(&body));
    assert_eq!(status, 200, "{out}");
    assert_eq!(out["finish_reason"], "deadline", "{}", out);
    // How many rollouts finish in time depends on the machine; whatever finished is the answer.
    if out["candidates"].as_array().is_some_and(|c| !c.is_empty()) {
        assert!(
            out["answer"].is_string() || out["text"].is_string(),
            "a best-so-far answer: {}",
            out["answer"]
        );
    }
    assert!(out["usage"]["generated_tokens"]
        .as_u64()
        .is_some_and(|g| g < 200_000));

    // The OpenAI-shaped endpoint says why in its extension and ends the choice as "length".
    let chat = json!({
        "model": "ponder/mcts",
        "messages": [{"role": "user", "content": "What is 17 * 23?"}],
        "strategy_params": {"iterations": 100000, "expansions": 16},
        "budget_tokens": 200_000,
        "deadline_ms": 1000,
        "seed": 1,
    });
    let (status, out) = server.send(client.post(server.url("/v1/chat/completions")).json(&chat));
    assert_eq!(status, 200, "{out}");
    assert_eq!(
        out["ponder"]["finish_reason"], "deadline",
        "{}",
        out["ponder"]
    );
    assert_eq!(out["choices"][0]["finish_reason"], "length");
}

#[test]
fn sigterm_under_load_drains_in_flight_streams_and_exits_zero() {
    let mut server = Process::start_with(&["--shutdown-timeout-s", "60"]);
    let url = server.url.clone();
    let pid = server.child.id();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    let (tx, mut started) = tokio::sync::mpsc::unbounded_channel::<()>();
    let streams: Vec<_> = (0..4)
        .map(|i| {
            let (url, tx) = (url.clone(), tx.clone());
            rt.spawn(async move {
                let body = json!({"model": "ponder", "messages": [{"role": "user", "content": format!("Count to {}.", 20 + i)}], "max_tokens": 48, "stream": true, "seed": i});
                let r = reqwest::Client::new().post(format!("{url}/v1/chat/completions")).json(&body).send().await.expect("send");
                assert_eq!(r.status(), 200);
                let mut stream = r.bytes_stream();
                let mut text = String::new();
                let mut first = true;
                while let Some(chunk) = stream.next().await {
                    text.push_str(&String::from_utf8_lossy(&chunk.expect("chunk")));
                    if std::mem::take(&mut first) {
                        let _ = tx.send(());
                    }
                }
                text
            })
        })
        .collect();
    drop(tx);
    rt.block_on(async {
        for _ in 0..4 {
            started.recv().await;
        }
    });
    let term = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("kill");
    assert!(term.success());
    for s in streams {
        let text = rt.block_on(s).expect("stream task");
        assert!(
            text.trim_end().ends_with("data: [DONE]"),
            "an in-flight stream finished: {text}"
        );
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = server.child.try_wait().expect("wait") {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "ponder serve did not exit within its shutdown timeout"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(status.success(), "exit status {status:?}");
}
