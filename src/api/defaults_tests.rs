//! The measured defaults at the request seam: a search that names no strategy runs the entry of
//! its budget — its strategy, its parameters as measured and its worked examples — on
//! `/v1/reason` and on a chat request that sets a budget; a request that names a strategy, or
//! a server without the file, is untouched.

use std::sync::Arc;

use ponder_strategies::Registry;
use serde_json::{json, Value};

use super::types::{ChatCompletionRequest, ReasonBody};
use super::validate::{self, Limits};
use crate::models::FittedModel;
use crate::router::defaults::DEFAULTS_FORMAT;
use crate::router::{MeasuredDefault, MeasuredDefaults};

fn entry(budget: u64, strategy: &str, params: Value, shots: Option<usize>) -> MeasuredDefault {
    MeasuredDefault {
        budget,
        strategy: strategy.into(),
        params,
        shots,
        accuracy: 0.1,
        mean_spent: budget as f64 * 0.8,
    }
}

/// 1,024: best-of-4 shown two examples; 2,048 and up: self-consistency of 8, as the server
/// shows it.
fn measured() -> Limits {
    Limits {
        measured_defaults: Some(Arc::new(MeasuredDefaults {
            format: DEFAULTS_FORMAT,
            model: FittedModel {
                name: "m.gguf".into(),
                sha256: None,
            },
            command: "test".into(),
            problems: vec![],
            by_budget: vec![
                entry(
                    1024,
                    "best_of_n",
                    json!({"n": 4, "max_tokens": 256}),
                    Some(2),
                ),
                entry(2048, "self_consistency", json!({"n": 8}), None),
            ],
        })),
        ..Limits::default()
    }
}

/// `/v1/reason`'s body `extra` over a question: (strategy, params, budget, shots).
fn reason(limits: &Limits, extra: Value) -> (String, Value, u64, usize) {
    let mut body = json!({"problem": "What is 2 + 3?"});
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    let body: ReasonBody = serde_json::from_value(body).expect("a reason body");
    let (req, shots, _) =
        validate::reason(&body, limits, &Registry::with_builtins()).expect("valid");
    (req.strategy, req.params, req.budget_tokens, shots)
}

#[test]
fn a_reason_request_without_a_strategy_runs_the_measured_default_of_its_budget() {
    let limits = measured();
    let (s, p, b, k) = reason(&limits, json!({"budget_tokens": 1024}));
    assert_eq!(
        (s.as_str(), p, b, k),
        ("best_of_n", json!({"n": 4, "max_tokens": 256}), 1024, 2)
    );
    // Up to the next measured budget, the same entry; below the first, the first.
    assert_eq!(
        reason(&limits, json!({"budget_tokens": 2047})).0,
        "best_of_n"
    );
    assert_eq!(
        reason(&limits, json!({"budget_tokens": 100})).0,
        "best_of_n"
    );
    let (s, p, _, k) = reason(&limits, json!({"budget_tokens": 3000}));
    assert_eq!((s.as_str(), p, k), ("self_consistency", json!({"n": 8}), 0));
    // No budget: the server's default budget (4,096) picks the entry.
    assert_eq!(reason(&limits, json!({})).0, "self_consistency");
    // The request's own parameters and examples stand over the entry's.
    let (s, p, _, k) = reason(
        &limits,
        json!({"budget_tokens": 1024, "params": {"n": 2}, "shots": 0}),
    );
    assert_eq!((s.as_str(), p, k), ("best_of_n", json!({"n": 2}), 0));
}

#[test]
fn a_named_strategy_or_a_server_without_measured_defaults_is_untouched() {
    let (s, p, _, k) = reason(
        &measured(),
        json!({"budget_tokens": 1024, "strategy": "deepconf"}),
    );
    assert_eq!((s.as_str(), p, k), ("deepconf", Value::Null, 0));
    let (s, p, _, _) = reason(&Limits::default(), json!({"budget_tokens": 1024}));
    assert_eq!((s.as_str(), p), ("self_consistency", Value::Null));
}

#[test]
fn the_servers_shots_flag_stands_over_the_measured_examples() {
    let limits = Limits {
        default_shots: Some(1),
        ..measured()
    };
    assert_eq!(reason(&limits, json!({"budget_tokens": 1024})).3, 1);
}

#[test]
fn a_chat_request_with_a_budget_and_no_strategy_runs_the_measured_default() {
    let chat = |extra: Value| {
        let mut body = json!({"model": "ponder", "messages": [{"role": "user", "content": "Hi"}]});
        if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
            b.extend(e.clone());
        }
        let req: ChatCompletionRequest = serde_json::from_value(body).expect("a chat body");
        validate::chat(&req, &measured(), &Registry::with_builtins(), "local").expect("valid")
    };
    let s = chat(json!({"budget_tokens": 1024}))
        .strategy
        .expect("a search");
    assert_eq!(
        (s.name.as_str(), s.params, s.shots),
        ("best_of_n", json!({"n": 4, "max_tokens": 256}), 2)
    );
    let s = chat(json!({"budget_tokens": 2048, "strategy_params": {"n": 3}}))
        .strategy
        .expect("a search");
    assert_eq!(
        (s.name.as_str(), s.params),
        ("self_consistency", json!({"n": 3}))
    );
    assert!(
        chat(json!({})).strategy.is_none(),
        "no budget: plain decoding"
    );
}
