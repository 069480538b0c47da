//! The browser pages `ponder serve` hosts (the playground, the trace viewer, the eval report) and
//! what they rely on, over real HTTP with the real model: the pages and their assets load without
//! a key (with the same-origin-only CSP) while the API still asks for one; a streamed search sends
//! tree `node` events from which the whole tree (the final trace) can be rebuilt; and the
//! committed sample Outcome the browser test opens in the trace viewer is a well-formed tree.
//! The pages themselves are driven in Chromium by scripts/browser_test.mjs.

use std::collections::BTreeMap;

use ponder::api::ApiKeys;
use serde_json::{json, Value};

use crate::server::{sse_data, TestServer};

const SAMPLE: &str = include_str!("fixtures/sample_outcome.json");

#[test]
fn pages_load_without_a_key_under_a_same_origin_policy_while_the_api_needs_one() {
    let server = TestServer::start(|b| b.api_keys(ApiKeys::new(["sk-ui-key"])));
    let client = reqwest::Client::new();
    server.block_on(async {
        for (path, kind) in [
            ("/", "text/html"),
            ("/playground", "text/html"),
            ("/trace", "text/html"),
            ("/report", "text/html"),
            ("/ui/playground.js", "text/javascript"),
            ("/ui/tree.js", "text/javascript"),
            ("/ui/app.css", "text/css"),
        ] {
            let r = client.get(server.url(path)).send().await.expect("send");
            assert_eq!(r.status(), 200, "{path}");
            let header = |name: &str| {
                r.headers()
                    .get(name)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_string()
            };
            assert!(
                header("content-type").starts_with(kind),
                "{path}: {}",
                header("content-type")
            );
            assert!(
                header("content-security-policy").contains("default-src 'none'")
                    && header("content-security-policy").contains("connect-src 'self'"),
                "{path}"
            );
        }
        let page = client
            .get(server.url("/"))
            .send()
            .await
            .expect("send")
            .text()
            .await
            .expect("body");
        assert!(
            page.contains("src=\"/ui/playground.js\"") && page.contains("id=\"api-key\""),
            "{page}"
        );
        let r = client
            .get(server.url("/v1/strategies"))
            .send()
            .await
            .expect("send");
        assert_eq!(r.status(), 401);
        let r = client
            .get(server.url("/v1/strategies"))
            .bearer_auth("sk-ui-key")
            .send()
            .await
            .expect("send");
        assert_eq!(r.status(), 200);
        // Only the embedded files are open: a near miss still needs the key.
        let r = client
            .get(server.url("/ui/missing.js"))
            .send()
            .await
            .expect("send");
        assert_eq!(r.status(), 401);
    });
}

#[test]
fn a_streamed_search_sends_node_events_that_rebuild_its_tree() {
    let server = TestServer::start(|b| b);
    let client = reqwest::Client::new();
    let body = json!({
        "model": "ponder",
        "messages": [{"role": "user", "content": "What is 12 + 7?"}],
        "strategy": "beam_search",
        "strategy_params": {"n": 4, "width": 2, "steps": {"max_step_tokens": 24, "max_steps": 3}},
        "budget_tokens": 500,
        "seed": 1,
        "stream": true,
        "return_trace": true,
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
    let chunks: Vec<Value> = sse_data(&text)
        .iter()
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).expect("json"))
        .collect();
    let mut latest: BTreeMap<u64, &Value> = BTreeMap::new();
    let mut candidates = Vec::new();
    for p in chunks.iter().filter_map(|c| c.pointer("/ponder/progress")) {
        match p["event"].as_str() {
            Some("node") => {
                let id = p["id"].as_u64().expect("id");
                let parent = p["parent"].as_u64().expect("parent");
                assert!(
                    parent == 0 || latest.contains_key(&parent),
                    "node {id} before its parent {parent}"
                );
                assert!(p["spent"].as_u64() <= p["budget"].as_u64(), "{p}");
                latest.insert(id, p);
            }
            Some("candidate") => {
                candidates.push(p["node"].as_u64().expect("a candidate names its node"))
            }
            _ => {}
        }
    }
    let summary = chunks
        .iter()
        .find_map(|c| c.get("ponder").filter(|p| p.get("strategy").is_some()))
        .expect("summary");
    let nodes = summary["trace"]["nodes"].as_array().expect("trace");
    assert!(nodes.len() > 1, "{summary}");
    assert_eq!(
        latest.len(),
        nodes.len() - 1,
        "one node event id per non-root node"
    );
    for n in &nodes[1..] {
        let e = latest[&n["id"].as_u64().expect("id")];
        for field in ["parent", "depth", "tokens", "score"] {
            assert_eq!(e[field], n[field], "node {} {field}", n["id"]);
        }
    }
    assert!(
        !candidates.is_empty() && candidates.iter().all(|c| latest.contains_key(c)),
        "{candidates:?}"
    );
}

#[test]
fn the_sample_outcome_is_a_tree_with_a_leader() {
    let outcome: Value = serde_json::from_str(SAMPLE).expect("sample json");
    let nodes = outcome["tree"]["nodes"].as_array().expect("nodes");
    for (i, n) in nodes.iter().enumerate() {
        assert_eq!(
            n["id"].as_u64(),
            Some(i as u64),
            "ids are insertion indices"
        );
        if i > 0 {
            assert!(
                n["parent"].as_u64().is_some_and(|p| (p as usize) < i),
                "node {i}'s parent comes first"
            );
        }
    }
    let selected = outcome["selected"].as_u64().expect("selected") as usize;
    let leader = &outcome["candidates"][selected];
    let node = &nodes[leader["node"].as_u64().expect("node") as usize];
    assert_eq!(node["answer"], outcome["answer"]);
    assert_eq!(node["status"], "finished");
    // What the browser test checks in the trace viewer.
    assert_eq!((nodes.len() - 1, leader["node"].as_u64()), (27, Some(16)));
    assert!(nodes.iter().any(|n| n["status"] == "pruned"));
}
