//! Worked examples over HTTP: the router shows a question its nearest train-split solutions when a
//! request asks for `shots` (and names them in the outcome), and `auto` without `shots` is
//! shown as many as its calibration rows were measured with — a real server on the default
//! model with a two-problem pool.

use std::sync::Arc;

use ponder::api::Limits;
use serde_json::{json, Value};

use crate::server::{chat, post, TestServer};

/// Two train-split problems of the generated grade-school set (the test fixture,
/// `evals/data/gsm_gen.jsonl`), a travel one first (a small pool keeps the tests quick), written
/// to `dir`: the file and the records.
fn two_example_pool(dir: &std::path::Path) -> (std::path::PathBuf, Vec<Value>) {
    use ponder::split::{split_of, Split};
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("evals/data/gsm_gen.jsonl");
    let text = std::fs::read_to_string(&fixture).expect("the generated problems");
    let rows: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| split_of(r["id"].as_str().unwrap_or_default()) == Split::Train)
        .collect();
    let pick = |t: &str| rows.iter().find(|r| r["template"] == t).cloned();
    let pool: Vec<Value> = ["distance", "discount"]
        .iter()
        .filter_map(|t| pick(t))
        .collect();
    assert_eq!(pool.len(), 2, "the shipped pool has these templates");
    let file = dir.join("pool.jsonl");
    let lines: Vec<String> = pool.iter().map(Value::to_string).collect();
    std::fs::write(&file, lines.join("\n")).expect("write pool");
    (file, pool)
}

/// `/v1/reason` with `shots`: the router shows the question its nearest train-split worked
/// examples, the outcome names them and the prompt grows by them; the pool loads on the first
/// request that asks, once; a count over the limit, or a server without a pool, is refused
/// naming `shots`.
#[test]
fn reason_shows_the_routers_worked_examples_and_names_them() {
    use ponder::router::{Embedder, Exemplars};
    let dir = tempfile::tempdir().expect("tempdir");
    let (file, pool) = two_example_pool(dir.path());
    let embedder = Arc::new(
        Embedder::load(&ponder::models::default_embedder_dir()).expect("the installed encoder"),
    );
    let loads = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = Arc::clone(&loads);
    let server = TestServer::start(|b| {
        b.exemplars_on_first_use(Arc::new(move || {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Exemplars::load(&file, Arc::clone(&embedder))
        }))
    });
    let loaded = || loads.load(std::sync::atomic::Ordering::SeqCst);
    let client = reqwest::Client::new();
    let ask = |shots: Option<i64>| {
        let mut body = json!({
            "problem": "A bus travels at 30 miles per hour for 4 hours. How many miles does it travel?",
            "strategy": "best_of_n",
            "params": {"n": 1, "max_tokens": 24},
            "budget_tokens": 2048,
        });
        if let Some(k) = shots {
            body["shots"] = json!(k);
        }
        server.block_on(post(&client, &server.url("/v1/reason"), body))
    };
    let prompt = |out: &Value| {
        out["usage"]["prefill_tokens_computed"]
            .as_u64()
            .unwrap_or(0)
            + out["usage"]["prefill_tokens_reused"].as_u64().unwrap_or(0)
    };
    let (status, bare) = ask(None);
    assert_eq!(status, 200, "{bare}");
    assert!(
        bare.get("shots").is_none(),
        "no examples by default: {bare}"
    );
    assert_eq!(loaded(), 0, "a request without examples loads no pool");
    let (status, shown) = ask(Some(1));
    assert_eq!(status, 200, "{shown}");
    assert_eq!(
        ask(Some(1)).1["shots"],
        shown["shots"],
        "the choice replays"
    );
    assert_eq!(loaded(), 1, "the pool loads once, on first use");
    // A chat search takes `shots` too (OpenAI clients send it in `extra_body`) and names them
    // in its `ponder` summary; plain decoding refuses it.
    let chat_body = |extra: Value| {
        let mut body = chat(
            "A bus travels at 30 miles per hour for 4 hours. How many miles does it travel?",
            json!({"shots": 1}),
        );
        if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
            b.extend(e.clone());
        }
        server.block_on(post(&client, &server.url("/v1/chat/completions"), body))
    };
    let (status, searched) = chat_body(json!({
        "strategy": "best_of_n",
        "strategy_params": {"n": 1, "max_tokens": 24},
        "budget_tokens": 2048,
    }));
    assert_eq!(status, 200, "{searched}");
    assert_eq!(searched["ponder"]["shots"], shown["shots"], "{searched}");
    let (status, plain) = chat_body(json!({"max_tokens": 8}));
    assert_eq!(status, 400, "{plain}");
    assert_eq!(plain["error"]["param"], "shots");
    assert_eq!(loaded(), 1);
    assert_eq!(
        shown["shots"],
        json!([pool[0]["id"]]),
        "the travel example is nearest the travel question"
    );
    assert!(
        prompt(&shown) > prompt(&bare) + 20,
        "the example is in the prompt: {} vs {} tokens",
        prompt(&shown),
        prompt(&bare)
    );
    let (status, over) = ask(Some(9));
    assert_eq!(status, 400, "{over}");
    assert_eq!(over["error"]["param"], "shots");
    assert!(
        over["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains('8'),
        "{over}"
    );
    drop(server);
    let bare_server = TestServer::start(|b| b);
    let (status, refused) = bare_server.block_on(post(
        &client,
        &bare_server.url("/v1/reason"),
        json!({"problem": "What is 2 + 3?", "shots": 1}),
    ));
    assert_eq!(status, 400, "{refused}");
    assert_eq!(refused["error"]["param"], "shots");
    assert!(refused["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .contains("--exemplars"));
}

/// `auto` asked without `shots` is shown as many worked examples as its calibration rows were
/// measured with, so it runs the configuration that was measured; an explicit `shots` wins,
/// and other strategies are still shown none.
#[test]
fn auto_without_shots_is_shown_as_many_examples_as_its_rows_were_measured_with() {
    use ponder::router::Exemplars;
    let dir = tempfile::tempdir().expect("tempdir");
    let (file, pool) = two_example_pool(dir.path());
    let row = |difficulty: &str| {
        json!({
            "difficulty": difficulty, "strategy": "best_of_n",
            "params": {"n": 1, "max_tokens": 24}, "verifier": "none", "shots": 1,
            "n": 1, "max_tokens": 24, "budget": 2048, "accuracy": 0.5, "mean_spent": 100.0,
            "problems": 100, "source": "test"
        })
    };
    let router = crate::router::router_with_table(json!([row("easy"), row("medium"), row("hard")]));
    assert_eq!(
        router.auto_shots(),
        1,
        "every row was measured with one example"
    );
    let embedder = router.shared_embedder();
    let server = TestServer::start(move |b| {
        let auto_router = Arc::clone(&router);
        b.limits(Limits {
            auto_shots: router.auto_shots(),
            ..Limits::default()
        })
        .exemplars(Arc::new(
            Exemplars::load(&file, embedder).expect("the two-example pool"),
        ))
        .register(move |r| ponder::router::register_auto(r, auto_router))
    });
    let client = reqwest::Client::new();
    let ask = |strategy: &str, shots: Option<i64>| {
        let mut body = json!({
            "problem": "A bus travels at 30 miles per hour for 4 hours. How many miles does it travel?",
            "strategy": strategy,
            "params": if strategy == "auto" { json!({"load": 0.0, "probe": false}) } else { json!({"n": 1, "max_tokens": 24}) },
            "budget_tokens": 2048,
        });
        if let Some(k) = shots {
            body["shots"] = json!(k);
        }
        let (status, out) = server.block_on(post(&client, &server.url("/v1/reason"), body));
        assert_eq!(status, 200, "{out}");
        out
    };
    let auto = ask("auto", None);
    assert_eq!(auto["shots"], json!([pool[0]["id"]]), "{auto}");
    assert!(
        ask("auto", Some(0)).get("shots").is_none(),
        "an explicit 0 wins"
    );
    assert_eq!(
        ask("auto", Some(2))["shots"].as_array().map(Vec::len),
        Some(2)
    );
    assert!(
        ask("best_of_n", None).get("shots").is_none(),
        "other strategies: none"
    );
    // `/metrics` counts each of the three `auto` searches once by what it allocated: the
    // strategy of the calibration row that ran and the row's bin (no probe was asked for).
    let metrics = server.metrics();
    let counted: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("ponder:router_allocations_total{"))
        .collect();
    let strategy = auto["router"]["strategy"]
        .as_str()
        .expect("auto's strategy");
    let difficulty = auto["router"]["row"]["difficulty"]
        .as_str()
        .expect("its row's bin");
    assert_eq!(
        counted,
        [format!(
            "ponder:router_allocations_total{{model_name=\"smollm2\",difficulty=\"{difficulty}\",\
             strategy=\"{strategy}\",probe=\"none\",degraded=\"false\"}} 3"
        )],
        "{metrics}"
    );
}
