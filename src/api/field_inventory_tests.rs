//! Every request field of `/v1/chat/completions`, `/v1/completions` and `/v1/reason`, and what
//! it does in each request shape — plain decoding, or a search (a strategy runs) — so that no
//! field is dropped silently. The field list is read from the OpenAPI document the server
//! serves (derived by utoipa from the serde types), so a new field without a row here fails the
//! test; each row is then checked against the validation with an example value: an honoured
//! field is accepted (and a search's sampling field reaches the strategy's sampling), a refused
//! one is a 400 naming it. README's "Request fields" table says the same in words.
// Tests read `Value`s by key (a missing key reads as null and fails the assertion).
#![allow(clippy::indexing_slicing)]

use std::collections::BTreeSet;

use ponder_strategies::Registry;
use serde_json::{json, Value};

use super::error::ValidationError;
use super::openapi::{document, ServerFacts};
use super::validate::{self, Limits, ValidGeneration};

/// What a field does in one request shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Does {
    /// Applied.
    Honoured,
    /// Refused with a 400 naming the field, unless absent or its neutral value.
    Refused,
    /// Setting it makes the request a search (it is honoured there).
    MakesSearch,
    /// The endpoint has no such shape (`/v1/reason` is always a search).
    NoShape,
}

use Does::{Honoured as H, MakesSearch as S, NoShape as X, Refused as R};

/// One row: the field, an example body (merged into the shape's base request), what it does
/// in plain decoding and in a search.
type Row = (&'static str, Value, Does, Does);

/// The fields every OpenAI-shaped request shares (`CommonParams`).
fn common_rows() -> Vec<Row> {
    vec![
        ("model", json!({"model": "ponder"}), H, H),
        ("max_tokens", json!({"max_tokens": 8}), H, H),
        (
            "max_completion_tokens",
            json!({"max_completion_tokens": 8}),
            H,
            H,
        ),
        ("temperature", json!({"temperature": 0}), H, H),
        ("top_p", json!({"top_p": 0.5}), H, H),
        ("top_k", json!({"top_k": 5}), H, H),
        ("min_p", json!({"min_p": 0.1}), H, H),
        ("stop", json!({"stop": ["Q:"]}), H, H),
        ("n", json!({"n": 2}), H, R),
        ("seed", json!({"seed": 7}), H, H),
        ("stream", json!({"stream": true}), H, H),
        (
            "stream_options",
            json!({"stream": true, "stream_options": {"include_usage": true}}),
            H,
            H,
        ),
        (
            "reasoning_effort",
            json!({"reasoning_effort": "xhigh"}),
            S,
            H,
        ),
        ("budget_tokens", json!({"budget_tokens": 300}), S, H),
        // A thinking budget runs budget forcing; with another strategy it is refused.
        (
            "thinking_token_budget",
            json!({"thinking_token_budget": 64}),
            S,
            R,
        ),
        ("thinking_budget", json!({"thinking_budget": 64}), S, R),
        ("strategy", json!({"strategy": "best_of_n"}), S, H),
        (
            "strategy_params",
            json!({"strategy_params": {"n": 2}}),
            S,
            H,
        ),
        ("deadline_ms", json!({"deadline_ms": 1000}), R, H),
        ("return_trace", json!({"return_trace": true}), R, H),
        ("shots", json!({"shots": 1}), R, H),
        ("presence_penalty", json!({"presence_penalty": 0.5}), H, R),
        ("frequency_penalty", json!({"frequency_penalty": 0.5}), H, R),
        (
            "repetition_penalty",
            json!({"repetition_penalty": 1.2}),
            H,
            R,
        ),
        ("logit_bias", json!({"logit_bias": {"5": 1}}), H, R),
        (
            "response_format",
            json!({"response_format": {"type": "json_object"}}),
            R,
            R,
        ),
        (
            "tools",
            json!({"tools": [{"type": "function", "function": {"name": "f"}}]}),
            R,
            R,
        ),
        ("tool_choice", json!({"tool_choice": "auto"}), R, R),
        ("functions", json!({"functions": [{"name": "f"}]}), R, R),
        (
            "function_call",
            json!({"function_call": {"name": "f"}}),
            R,
            R,
        ),
    ]
}

fn chat_rows() -> Vec<Row> {
    let mut rows = common_rows();
    rows.extend([
        (
            "messages",
            json!({"messages": [{"role": "user", "content": "Hi"}]}),
            H,
            H,
        ),
        ("logprobs", json!({"logprobs": true}), H, R),
        (
            "top_logprobs",
            json!({"logprobs": true, "top_logprobs": 2}),
            H,
            R,
        ),
        // Rendered into the prompt, and into every prompt of a search.
        (
            "chat_template_kwargs",
            json!({"chat_template_kwargs": {"enable_thinking": false}}),
            H,
            H,
        ),
        (
            "reasoning_parser",
            json!({"reasoning_parser": "none"}),
            H,
            H,
        ),
    ]);
    rows
}

fn completion_rows() -> Vec<Row> {
    let mut rows = common_rows();
    rows.extend([
        ("prompt", json!({"prompt": [[1, 2, 3]]}), H, R),
        ("logprobs", json!({"logprobs": 1}), H, R),
        ("echo", json!({"echo": true}), H, R),
        ("suffix", json!({"suffix": "end"}), R, R),
        ("best_of", json!({"best_of": 2}), R, R),
    ]);
    rows
}

fn reason_rows() -> Vec<Row> {
    [
        ("problem", json!({"problem": "What is 2+3?"})),
        ("strategy", json!({"strategy": "best_of_n"})),
        (
            "params",
            json!({"strategy": "best_of_n", "params": {"n": 2}}),
        ),
        ("budget_tokens", json!({"budget_tokens": 300})),
        ("deadline_ms", json!({"deadline_ms": 1000})),
        ("seed", json!({"seed": 7})),
        ("shots", json!({"shots": 1})),
        ("temperature", json!({"temperature": 0})),
        ("top_p", json!({"top_p": 0.5})),
        ("top_k", json!({"top_k": 5})),
        ("min_p", json!({"min_p": 0.1})),
        ("stop", json!({"stop": "Q:"})),
        ("max_tokens", json!({"max_tokens": 8})),
    ]
    .into_iter()
    .map(|(field, example)| (field, example, X, H))
    .collect()
}

/// The properties of a request schema of the served document (every variant's).
fn documented_fields(schema: &str) -> BTreeSet<String> {
    let registry = Registry::with_builtins();
    let limits = Limits::default();
    let doc = document(ServerFacts {
        limits: &limits,
        registry: &registry,
        model_id: "local",
        keys_required: false,
    })
    .expect("the document");
    let node = &doc["components"]["schemas"][schema];
    let variants: Vec<&Value> = match (node["anyOf"].as_array(), node["oneOf"].as_array()) {
        (Some(v), _) | (None, Some(v)) => v.iter().collect(),
        (None, None) => vec![node],
    };
    variants
        .iter()
        .filter_map(|v| v["properties"].as_object())
        .flat_map(|p| p.keys().cloned())
        .collect()
}

/// A one-message chat request with `extra`'s fields, as validation makes it (default limits,
/// the built-in strategies, the local model).
fn validated_chat(extra: Value) -> Result<ValidGeneration, ValidationError> {
    let body = merged(
        json!({"model": "ponder", "messages": [{"role": "user", "content": "Hi"}]}),
        &extra,
    );
    validate::chat(
        &serde_json::from_value(body).expect("parses"),
        &Limits::default(),
        &Registry::with_builtins(),
        "local",
    )
}

fn merged(base: Value, extra: &Value) -> Value {
    let mut body = base;
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    body
}

/// What validation makes of `body` on `route`: a generation (or a reason request's sampling),
/// or the field it refused.
enum Seen {
    Plain,
    Search(ponder_strategies::SamplingOverride),
    Refused(&'static str),
}

fn validate_body(route: &str, body: Value) -> Seen {
    let limits = Limits::default();
    let registry = Registry::with_builtins();
    let generation = |v: Result<ValidGeneration, ValidationError>| match v {
        Ok(v) => match v.strategy {
            Some(s) => Seen::Search(s.sampling),
            None => Seen::Plain,
        },
        Err(e) => refused(e),
    };
    match route {
        "chat" => generation(validate::chat(
            &serde_json::from_value(body).expect("parses"),
            &limits,
            &registry,
            "local",
        )),
        "completion" => generation(validate::completion(
            &serde_json::from_value(body).expect("parses"),
            &limits,
            &registry,
            "local",
        )),
        _ => match validate::reason(
            &serde_json::from_value(body).expect("parses"),
            &limits,
            &registry,
        ) {
            Ok((_, _, sampling)) => Seen::Search(sampling),
            Err(e) => refused(e),
        },
    }
}

fn refused(e: ValidationError) -> Seen {
    match e {
        ValidationError::Invalid { field, .. } | ValidationError::OverLimit { field, .. } => {
            Seen::Refused(field)
        }
        other => panic!("not a refusal naming a field: {other}"),
    }
}

/// Checks `rows` cover exactly the documented fields of `schema`, then each row in each shape.
fn check(route: &str, schema: &str, rows: &[Row], plain: Value, search: Value) {
    let listed: BTreeSet<String> = rows.iter().map(|(f, ..)| f.to_string()).collect();
    assert_eq!(listed.len(), rows.len(), "{schema}: a field listed twice");
    assert_eq!(
        listed,
        documented_fields(schema),
        "{schema}: every request field needs a row saying what it does"
    );
    for (field, example, in_plain, in_search) in rows {
        for (shape, base, does) in [("plain", &plain, in_plain), ("search", &search, in_search)] {
            let seen = match *does {
                X => continue,
                _ => validate_body(route, merged(base.clone(), example)),
            };
            let at = format!("{schema}.{field} in {shape} ({example})");
            match (*does, seen) {
                (H, Seen::Plain) if shape == "plain" => {}
                (H, Seen::Search(sampling)) if shape == "search" => {
                    honoured_in_search(field, &sampling, &at)
                }
                (S, Seen::Search(_)) => {}
                (R, Seen::Refused(f)) => {
                    let named = example.as_object().is_some_and(|e| e.contains_key(f));
                    assert!(named, "{at}: refused naming {f}");
                }
                (R, _) => panic!("{at}: must be refused with a 400 naming it"),
                (_, Seen::Refused(f)) => panic!("{at}: refused ({f})"),
                _ => panic!("{at}: the wrong shape"),
            }
        }
    }
}

/// A search's sampling field, honoured, is in the sampling the strategy runs with.
fn honoured_in_search(field: &str, s: &ponder_strategies::SamplingOverride, at: &str) {
    let reached = match field {
        "temperature" => s.temperature == Some(0.0),
        "top_p" => s.top_p == Some(0.5),
        "top_k" => s.top_k == Some(5),
        "min_p" => s.min_p == Some(0.1),
        "stop" => s.stop == ["Q:"],
        "max_tokens" | "max_completion_tokens" => s.max_tokens == Some(8),
        _ => true,
    };
    assert!(
        reached,
        "{at}: did not reach the strategy's sampling: {s:?}"
    );
}

#[test]
fn every_chat_completion_field_is_honoured_or_refused_in_each_shape() {
    let plain = json!({"model": "ponder", "messages": [{"role": "user", "content": "Hi"}]});
    let search = merged(plain.clone(), &json!({"strategy": "best_of_n"}));
    check("chat", "ChatCompletionRequest", &chat_rows(), plain, search);
}

#[test]
fn every_completion_field_is_honoured_or_refused_in_each_shape() {
    let plain = json!({"model": "ponder", "prompt": "1, 2,"});
    let search = merged(plain.clone(), &json!({"strategy": "best_of_n"}));
    check(
        "completion",
        "CompletionRequest",
        &completion_rows(),
        plain,
        search,
    );
}

#[test]
fn every_reason_field_is_honoured() {
    let search = json!({"problem": "What is 2+3?"});
    check(
        "reason",
        "ReasonRequest",
        &reason_rows(),
        Value::Null,
        search,
    );
}

/// A thinking budget (`thinking_token_budget`, or SGLang's `thinking_budget`) runs budget
/// forcing with it as `max_thinking_tokens`; an effort names one (half its budget) for
/// `ponder/budget_forcing`; conflicts are 400s naming the field sent.
#[test]
fn a_thinking_budget_runs_budget_forcing_with_it_as_its_maximum() {
    let chat = validated_chat;
    // The strategy that ran and its maximum.
    let ran = |extra: Value| {
        let s = chat(extra).expect("valid").strategy.expect("a search");
        (s.name, s.params["max_thinking_tokens"].as_u64())
    };
    let forcing = |max: u64| ("budget_forcing".to_string(), Some(max));
    assert_eq!(ran(json!({"thinking_token_budget": 300})), forcing(300));
    assert_eq!(ran(json!({"thinking_budget": 200})), forcing(200));
    assert_eq!(
        ran(json!({"thinking_budget": 200, "thinking_token_budget": 200})),
        forcing(200)
    );
    assert_eq!(
        ran(json!({"model": "ponder/budget_forcing", "reasoning_effort": "low"})),
        forcing(512)
    );
    // The parameters' own maximum stands against an effort's.
    assert_eq!(
        ran(
            json!({"model": "ponder/budget_forcing", "reasoning_effort": "low",
                    "strategy_params": {"max_thinking_tokens": 64}})
        ),
        forcing(64)
    );
    let field = |extra: Value| match chat(extra) {
        Err(ValidationError::Invalid { field, .. } | ValidationError::OverLimit { field, .. }) => {
            field
        }
        other => panic!(
            "not a refusal naming a field: {:?}",
            other.map(|v| v.strategy.map(|s| s.name))
        ),
    };
    assert_eq!(
        field(json!({"thinking_budget": 100, "thinking_token_budget": 200})),
        "thinking_budget"
    );
    assert_eq!(
        field(json!({"thinking_token_budget": 100, "strategy": "best_of_n"})),
        "thinking_token_budget"
    );
    assert_eq!(
        field(json!({"thinking_token_budget": 100,
                     "strategy_params": {"max_thinking_tokens": 64}})),
        "thinking_token_budget"
    );
    assert_eq!(
        field(json!({"thinking_token_budget": 0})),
        "thinking_token_budget"
    );
}

/// `chat_template_kwargs` reach the generation (plain or searched) as the template's
/// variables, the renderer's own names refused; `reasoning_parser` names a known choice, an
/// unknown one a 400 listing them.
#[test]
fn template_variables_and_a_reasoning_parser_are_checked_once_naming_the_field() {
    use ponder_verifiers::{ReasoningChoice, ReasoningParser};
    let chat = validated_chat;
    for extra in [json!({}), json!({"strategy": "best_of_n"})] {
        let v = chat(merged(
            extra.clone(),
            &json!({"chat_template_kwargs": {"enable_thinking": false, "tools": []},
                    "reasoning_parser": "qwen3"}),
        ))
        .expect("valid");
        assert_eq!(
            json!(v.template_kwargs),
            json!({"enable_thinking": false, "tools": []})
        );
        assert_eq!(
            v.reasoning,
            Some(ReasoningChoice::Parser(ReasoningParser::think()))
        );
        let v = chat(extra).expect("valid");
        assert!(v.template_kwargs.is_empty() && v.reasoning.is_none());
    }
    let refusal = |extra: Value| match chat(extra) {
        Err(ValidationError::Invalid { field, reason }) => (field, reason),
        other => panic!("not a refusal naming a field: {:?}", other.map(|v| v.model)),
    };
    for name in [
        "messages",
        "add_generation_prompt",
        "bos_token",
        "eos_token",
    ] {
        let (field, reason) = refusal(json!({"chat_template_kwargs": {name: "x"}}));
        assert_eq!(field, "chat_template_kwargs");
        assert!(reason.contains(name), "{reason}");
    }
    assert_eq!(
        refusal(json!({"chat_template_kwargs": ["enable_thinking"]})).0,
        "chat_template_kwargs"
    );
    let (field, reason) = refusal(json!({"reasoning_parser": "r1"}));
    assert_eq!(field, "reasoning_parser");
    assert!(
        reason.contains("`r1`") && reason.contains("auto, think, deepseek_r1, qwen3, none"),
        "{reason}"
    );
}
