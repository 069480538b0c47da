//! The service under load, over real HTTP: streams dropped by their clients cancel their
//! sequences and give every KV block back, and a small queue answers overflow with 429 +
//! Retry-After rather than errors or unbounded waiting.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use ponder::api::Limits;
use serde_json::{json, Value};

use crate::server::{metric, TestServer};

async fn metrics(client: &reqwest::Client, server_url: &str) -> String {
    client
        .get(format!("{server_url}/metrics"))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text")
}

#[test]
fn fifty_streams_dropped_after_their_first_chunk_leave_no_running_request_and_no_kv_blocks() {
    let limits = Limits {
        max_running: 64,
        max_queue: 64,
        ..Limits::default()
    };
    let server = TestServer::start(|b| b.limits(limits));
    let client = reqwest::Client::new();
    let url = server.url("/v1/chat/completions");
    let baseline = server.block_on(async {
        metric(
            &metrics(&client, &server.url).await,
            "ponder_kv_blocks_used",
        )
    });
    assert_eq!(baseline, Some(0.0), "idle server holds no blocks");
    server.block_on(async {
        let mut tasks = Vec::new();
        for i in 0..50 {
            let (client, url) = (client.clone(), url.clone());
            tasks.push(tokio::spawn(async move {
                let body = json!({
                    "model": "ponder",
                    "messages": [{"role": "user", "content": format!("Write a long story about the number {i}.")}],
                    "max_tokens": 400,
                    "stream": true,
                    "seed": i,
                });
                let r = client.post(url).json(&body).send().await.expect("send");
                assert_eq!(r.status(), 200);
                let mut stream = r.bytes_stream();
                let first = stream.next().await;
                assert!(first.is_some_and(|c| c.is_ok()), "a first chunk arrives");
                // Dropping the stream closes the connection mid-generation.
            }));
        }
        for t in tasks {
            t.await.expect("client task");
        }
    });
    // Within a few scheduler steps every group is cancelled and its blocks are freed.
    let deadline = Instant::now() + Duration::from_secs(120);
    let (mut running, mut used) = (None, None);
    while Instant::now() < deadline {
        let text = server.block_on(metrics(&client, &server.url));
        running = metric(&text, "ponder:num_requests_running{model_name=\"smollm2\"}");
        used = metric(&text, "ponder_kv_blocks_used");
        if running == Some(0.0) && used == baseline {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(running, Some(0.0), "running gauge back to 0");
    assert_eq!(used, baseline, "KV blocks in use back to the idle baseline");
    // Far fewer tokens were generated than 50 full streams would have: the groups were cancelled.
    let generated = server.block_on(async {
        metric(
            &metrics(&client, &server.url).await,
            "ponder:generation_tokens_total{model_name=\"smollm2\"}",
        )
    });
    assert!(
        generated.is_some_and(|g| g < 50.0 * 400.0 / 2.0),
        "generated {generated:?}"
    );
}

#[test]
fn a_small_queue_under_load_answers_only_200_or_429_with_retry_after() {
    let limits = Limits {
        max_running: 1,
        max_queue: 1,
        retry_after_s: 2,
        ..Limits::default()
    };
    let server = TestServer::start(|b| b.limits(limits));
    let client = reqwest::Client::new();
    let url = server.url("/v1/chat/completions");
    let results: Vec<(u16, Option<String>, Value)> = server.block_on(async {
        let tasks: Vec<_> = (0..8)
            .map(|i| {
                let (client, url) = (client.clone(), url.clone());
                tokio::spawn(async move {
                    let body = json!({"model": "ponder", "messages": [{"role": "user", "content": format!("Say {i}.")}], "max_tokens": 24, "seed": i});
                    let r = client.post(url).json(&body).send().await.expect("send");
                    let retry = r.headers().get("retry-after").and_then(|v| v.to_str().ok()).map(String::from);
                    (r.status().as_u16(), retry, r.json::<Value>().await.unwrap_or(Value::Null))
                })
            })
            .collect();
        let mut out = Vec::new();
        for t in tasks {
            out.push(t.await.expect("task"));
        }
        out
    });
    let ok = results.iter().filter(|r| r.0 == 200).count();
    let refused = results.iter().filter(|r| r.0 == 429).count();
    assert_eq!(ok + refused, results.len(), "only 200 and 429: {results:?}");
    assert!(ok >= 1 && refused >= 1, "{ok} ok, {refused} refused");
    for (status, retry, body) in &results {
        if *status == 429 {
            assert_eq!(retry.as_deref(), Some("2"));
            assert_eq!(body["error"]["type"], "rate_limit_error");
        }
    }
    let text = server.block_on(metrics(&client, &server.url));
    assert_eq!(
        metric(&text, "ponder:num_requests_running{model_name=\"smollm2\"}"),
        Some(0.0)
    );
    assert_eq!(
        metric(&text, "ponder:num_requests_waiting{model_name=\"smollm2\"}"),
        Some(0.0)
    );
    assert!(text.contains("ponder_requests_total{route=\"/v1/chat/completions\",status=\"429\"}"));
}
