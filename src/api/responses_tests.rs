//! The typed bodies write the same bytes as the `json!` bodies they replaced: each expected
//! string below is built the way the handlers built it before (serde_json values, whose keys
//! are sorted and whose `f32`s are widened to `f64`).
// Tests read `Value`s by key (a missing key reads as null and fails the assertion).
#![allow(clippy::indexing_slicing)]

use std::collections::BTreeMap;

use ponder_strategies::{Progress, SearchFinish, Usage};
use serde_json::{json, Map, Value};

use super::super::sse::{ChoiceOut, Envelope, Flavor};
use super::super::types::{
    ChatLogprobs, Logprobs, TextLogprobs, TokenLogprob, TopLogprob, UsageOut,
};
use super::*;

fn envelope(flavor: Flavor) -> Envelope {
    Envelope {
        flavor,
        id: "chatcmpl-00000000000000ff".into(),
        created: 1_700_000_000,
        model: "ponder/best_of_n".into(),
    }
}

fn object(flavor: Flavor, chunk: bool) -> &'static str {
    match (flavor, chunk) {
        (Flavor::Chat, true) => "chat.completion.chunk",
        (Flavor::Chat, false) => "chat.completion",
        (Flavor::Text, _) => "text_completion",
    }
}

/// The old `Envelope::chunk`.
fn old_chunk(
    env: &Envelope,
    index: usize,
    text: Option<&str>,
    first: bool,
    logprobs: Option<Value>,
    finish: Option<&str>,
) -> Value {
    let choice = match env.flavor {
        Flavor::Chat => {
            let mut delta = Map::new();
            if first {
                delta.insert("role".into(), json!("assistant"));
            }
            if let Some(t) = text {
                delta.insert("content".into(), json!(t));
            }
            json!({"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": finish})
        }
        Flavor::Text => {
            json!({"index": index, "text": text.unwrap_or(""), "logprobs": logprobs, "finish_reason": finish})
        }
    };
    json!({"id": env.id, "object": object(env.flavor, true), "created": env.created, "model": env.model, "choices": [choice]})
}

/// The old `Envelope::bare_chunk`.
fn old_bare_chunk(env: &Envelope, usage: Option<&UsageOut>, ponder: Option<Value>) -> Value {
    let mut v = json!({"id": env.id, "object": object(env.flavor, true), "created": env.created, "model": env.model, "choices": []});
    if let Some(u) = usage {
        v["usage"] = old_usage(u);
    }
    if let Some(p) = ponder {
        v["ponder"] = p;
    }
    v
}

/// The old `UsageOut` (its fields were declared in another order; as a value, keys sort).
fn old_usage(u: &UsageOut) -> Value {
    json!({
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "total_tokens": u.total_tokens,
        "prompt_tokens_details": {"cached_tokens": u.prompt_tokens_details.cached_tokens},
        "completion_tokens_details": {"reasoning_tokens": u.completion_tokens_details.reasoning_tokens},
    })
}

/// The old `search_summary`.
fn old_summary(s: &SearchSummary) -> Value {
    let mut v = json!({
        "strategy": s.strategy,
        "answer": s.answer,
        "support": s.support,
        "finish_reason": s.finish_reason,
        "candidates": s.candidates,
        "usage": s.usage,
        "spent": s.spent,
    });
    if let Some(router) = &s.router {
        v["router"] = router.clone();
    }
    if let Some(trace) = &s.trace {
        v["trace"] = trace.clone();
    }
    v
}

fn summary(trace: bool) -> SearchSummary {
    SearchSummary {
        answer: Some("5".into()),
        candidates: 3,
        finish_reason: SearchFinish::Budget,
        router: trace.then(|| json!({"category": "math", "difficulty": 0.25_f32})),
        shots: Vec::new(),
        spent: 345,
        strategy: "best_of_n".into(),
        support: Some(2.0 / 3.0),
        trace: trace.then(|| json!({"nodes": [{"id": 0, "score": 0.7_f32, "text": "é\n\"q\""}]})),
        usage: json!(Usage {
            prompt_tokens: 12,
            generated_tokens: 300,
            wall_ms: 17,
            ..Usage::default()
        }),
    }
}

/// Chat logprobs, typed and as the old code wrote them.
fn chat_logprobs() -> (Logprobs, Value) {
    let typed = Logprobs::Chat(ChatLogprobs {
        content: vec![TokenLogprob {
            bytes: "é".as_bytes().to_vec(),
            logprob: f64::from(-0.1_f32),
            token: "é".into(),
            top_logprobs: vec![TopLogprob {
                bytes: vec![98],
                logprob: f64::from(-2.3_f32),
                token: "b".into(),
            }],
        }],
    });
    let old = json!({"content": [{"token": "é", "logprob": -0.1_f32, "bytes": "é".as_bytes(),
        "top_logprobs": [{"token": "b", "logprob": -2.3_f32, "bytes": [98]}]}]});
    (typed, old)
}

/// Text logprobs, typed and as the old code wrote them.
fn text_logprobs() -> (Logprobs, Value) {
    let tops = BTreeMap::from([("z".to_string(), f64::from(-0.7_f32)), ("a".into(), -1.5)]);
    let typed = Logprobs::Text(TextLogprobs {
        text_offset: vec![0, 1],
        token_logprobs: vec![Some(f64::from(-0.7_f32)), Some(f64::from(-0.01_f32))],
        tokens: vec!["z".into(), "!".into()],
        top_logprobs: vec![Some(tops), Some(BTreeMap::new())],
    });
    let mut old_tops = Map::new();
    old_tops.insert("z".into(), json!(-0.7_f32));
    old_tops.insert("a".into(), json!(-1.5_f32));
    let old = json!({"tokens": ["z", "!"], "token_logprobs": [-0.7_f32, -0.01_f32],
        "top_logprobs": [Value::Object(old_tops), Value::Object(Map::new())], "text_offset": [0, 1]});
    (typed, old)
}

fn same(typed: &impl serde::Serialize, old: &Value) {
    let typed = serde_json::to_string(typed).expect("encodes");
    assert_eq!(typed, old.to_string());
}

#[test]
fn whole_completions_are_written_as_before() {
    let usage = UsageOut::new(12, 300, 4, 280);
    for (flavor, (logprobs, old_logprobs)) in [
        (Flavor::Chat, chat_logprobs()),
        (Flavor::Text, text_logprobs()),
    ] {
        let env = envelope(flavor);
        for ponder in [None, Some(summary(false)), Some(summary(true))] {
            let choices = vec![
                ChoiceOut {
                    text: "x \"y\"\n".into(),
                    logprobs: Some(logprobs.clone()),
                    finish: ChoiceFinish::Length,
                    stop_reason: None,
                    reasoning: None,
                },
                ChoiceOut {
                    text: String::new(),
                    logprobs: None,
                    finish: ChoiceFinish::Stop,
                    stop_reason: Some("\n\n".into()),
                    reasoning: None,
                },
            ];
            let typed = env.response(choices, &usage, ponder.clone());
            let old_choice = |index: usize, text: &str, lp: Value, finish: &str, stop: Value| {
                match flavor {
                    Flavor::Chat => json!({
                        "index": index,
                        "message": {"role": "assistant", "content": text, "refusal": null},
                        "logprobs": lp,
                        "finish_reason": finish,
                        "stop_reason": stop,
                    }),
                    Flavor::Text => {
                        json!({"index": index, "text": text, "logprobs": lp, "finish_reason": finish, "stop_reason": stop})
                    }
                }
            };
            let mut old = json!({
                "id": env.id,
                "object": object(flavor, false),
                "created": env.created,
                "model": env.model,
                "system_fingerprint": null,
                "choices": [
                    old_choice(0, "x \"y\"\n", old_logprobs.clone(), "length", Value::Null),
                    old_choice(1, "", Value::Null, "stop", json!("\n\n")),
                ],
                "usage": old_usage(&usage),
            });
            if let Some(s) = &ponder {
                old["ponder"] = old_summary(s);
            }
            same(&typed, &old);
        }
    }
}

#[test]
fn stream_chunks_are_written_as_before() {
    let usage = UsageOut::new(5, 7, 0, 0);
    let progress = Progress::Candidate {
        index: 1,
        node: 4,
        answer: Some("5".into()),
        score: Some(0.3),
        leader: Some("5".into()),
        leader_votes: 2,
        vote_margin: 0.5,
        candidates: 2,
        spent: 90,
        budget: 300,
    };
    for (flavor, (logprobs, old_logprobs)) in [
        (Flavor::Chat, chat_logprobs()),
        (Flavor::Text, text_logprobs()),
    ] {
        let env = envelope(flavor);
        same(
            &env.chunk(0, Some(""), true, None, None),
            &old_chunk(&env, 0, Some(""), true, None, None),
        );
        same(
            &env.chunk(1, Some("ab"), false, Some(logprobs.clone()), None),
            &old_chunk(&env, 1, Some("ab"), false, Some(old_logprobs), None),
        );
        same(
            &env.chunk(1, None, false, None, Some(ChoiceFinish::Length)),
            &old_chunk(&env, 1, None, false, None, Some("length")),
        );
        same(
            &env.bare_chunk(Some(&usage), None),
            &old_bare_chunk(&env, Some(&usage), None),
        );
        let update = PonderChunkField::Progress(ProgressUpdate {
            progress: json!(progress),
        });
        same(
            &env.bare_chunk(None, Some(update)),
            &old_bare_chunk(&env, None, Some(json!({"progress": progress}))),
        );
        let s = summary(true);
        let mut old_last = old_chunk(&env, 0, None, false, None, Some("stop"));
        old_last["ponder"] = old_summary(&s);
        same(
            &env.chunk(0, None, false, None, Some(ChoiceFinish::Stop))
                .with_ponder(PonderChunkField::Summary(s)),
            &old_last,
        );
    }
}

#[test]
fn lists_and_probes_are_written_as_before() {
    let models = ModelList {
        data: vec![ModelCard {
            created: 9,
            id: "ponder/mcts".into(),
            object: ModelObject::Model,
            owned_by: "ponder".into(),
        }],
        object: ListObject::List,
    };
    same(
        &models,
        &json!({"object": "list", "data": [{"id": "ponder/mcts", "object": "model", "created": 9, "owned_by": "ponder"}]}),
    );
    let strategies = StrategyList {
        data: vec![StrategyCard {
            defaults: json!({"n": 4, "temperature": 0.8}),
            description: "d".into(),
            model: "ponder/x".into(),
            name: "x".into(),
        }],
        default: "x".into(),
        default_by_budget: None,
        object: ListObject::List,
    };
    same(
        &strategies,
        &json!({"object": "list", "default": "x", "data": [{"name": "x", "model": "ponder/x", "description": "d", "defaults": {"n": 4, "temperature": 0.8}}]}),
    );
    let measured = StrategyList {
        data: vec![],
        default_by_budget: Some(vec![DefaultAtBudget {
            budget: 1024,
            strategy: "x".into(),
            params: json!({"n": 4}),
            accuracy: 0.25,
        }]),
        ..strategies
    };
    same(
        &measured,
        &json!({"object": "list", "default": "x", "data": [], "default_by_budget": [{"budget": 1024, "strategy": "x", "params": {"n": 4}, "accuracy": 0.25}]}),
    );
    same(&Status::of(Health::Ok), &json!({"status": "ok"}));
    same(
        &Status::of(Health::Draining),
        &json!({"status": "draining"}),
    );
    let ready = Status {
        model: Some("smollm2".into()),
        ..Status::of(Health::Ready)
    };
    same(&ready, &json!({"status": "ready", "model": "smollm2"}));
    let down = Status {
        reason: Some("no backend is healthy".into()),
        ..Status::of(Health::Unavailable)
    };
    same(
        &down,
        &json!({"status": "unavailable", "reason": "no backend is healthy"}),
    );
}
