//! Hostile input at the API's edge, as property tests that run on stable in CI (the cargo-fuzz
//! targets under `fuzz/` drive the same entry points for longer): arbitrary bytes and arbitrary
//! JSON shaped like a request never panic the parser or the validator, and every rejection maps
//! to a 4xx in OpenAI's shape; arbitrary strings inside an SSE `data:` event round-trip through a
//! spec-following SSE parser.

use ponder_strategies::Registry;
use proptest::prelude::*;
use serde_json::{json, Map, Number, Value};

use super::error::AppError;
use super::{sse_wire, validate, Limits};

/// Any JSON value, numbers at the edges included.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        prop_oneof![Just(i64::MIN), Just(i64::MAX), Just(-1), Just(0), Just(1)]
            .prop_map(|n| json!(n)),
        any::<f64>().prop_filter_map("finite", |f| Number::from_f64(f).map(Value::Number)),
        ".{0,24}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((".{0,8}", inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

const FIELDS: &[&str] = &[
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "n",
    "stop",
    "seed",
    "stream",
    "stream_options",
    "reasoning_effort",
    "budget_tokens",
    "deadline_ms",
    "strategy",
    "strategy_params",
    "return_trace",
    "logprobs",
    "top_logprobs",
    "echo",
    "params",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "logit_bias",
    "response_format",
    "tools",
    "tool_choice",
    "functions",
    "function_call",
    "suffix",
    "best_of",
];

/// A plausible field value: the right type at an edge, or anything at all.
fn field_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        prop_oneof![
            Just(i64::MIN),
            Just(-1i64),
            Just(0),
            Just(1),
            Just(2),
            Just(5),
            Just(17),
            Just(4097),
            Just(200_001),
            Just(i64::MAX)
        ]
        .prop_map(|n| json!(n)),
        prop_oneof![
            Just(-0.5f64),
            Just(0.0),
            Just(0.5),
            Just(1.0),
            Just(2.0),
            Just(2.5),
            Just(1e308)
        ]
        .prop_map(|f| json!(f)),
        prop_oneof![
            Just("best_of_n"),
            Just("beam_search"),
            Just("self_consistency"),
            Just("low"),
            Just("high"),
            Just(""),
            Just("\u{0}")
        ]
        .prop_map(|s| json!(s)),
        prop::collection::vec(".{0,300}", 0..7).prop_map(|v| json!(v)),
        prop::collection::vec(
            (
                prop_oneof![Just("n"), Just("max_tokens"), Just("width"), Just("depth")],
                -3i64..100
            ),
            0..4
        )
        .prop_map(|kv| Value::Object(
            kv.into_iter()
                .map(|(k, v)| (k.to_string(), json!(v)))
                .collect()
        )),
        any_json(),
    ]
}

fn message() -> impl Strategy<Value = Value> {
    let role = prop_oneof![
        Just("user"),
        Just("system"),
        Just("assistant"),
        Just("tool"),
        Just("developer"),
        Just("root")
    ];
    let content = prop_oneof![
        ".{0,64}".prop_map(Value::String),
        Just(Value::Null),
        prop::collection::vec(
            ".{0,16}".prop_map(|t| json!({"type": "text", "text": t})),
            0..3
        )
        .prop_map(Value::Array),
        any_json(),
    ];
    (role, content).prop_map(|(r, c)| json!({"role": r, "content": c}))
}

/// An object shaped like a chat, completion or reason request, with hostile values.
fn request_like() -> impl Strategy<Value = Value> {
    let model = prop_oneof![
        Just("ponder"),
        Just("ponder/best_of_n"),
        Just("ponder/nope"),
        Just("local"),
        Just("")
    ];
    let messages = prop_oneof![
        prop::collection::vec(message(), 0..4).prop_map(Value::Array),
        any_json()
    ];
    let prompt = prop_oneof![
        ".{0,64}".prop_map(Value::String),
        prop::collection::vec(".{0,8}", 0..3).prop_map(|v| json!(v)),
        any_json()
    ];
    let fields = prop::collection::vec((prop::sample::select(FIELDS), field_value()), 0..8);
    (model, messages, prompt, ".{0,64}", fields).prop_map(
        |(model, messages, prompt, problem, fields)| {
            let mut o = Map::new();
            o.insert("model".into(), json!(model));
            o.insert("messages".into(), messages);
            o.insert("prompt".into(), prompt);
            o.insert("problem".into(), json!(problem));
            for (k, v) in fields {
                o.insert(k.to_string(), v);
            }
            Value::Object(o)
        },
    )
}

/// Every rejection the validator or a strategy's parameter check can produce is a client error.
fn assert_client_error(e: AppError) -> Result<(), TestCaseError> {
    let status = e.status();
    prop_assert!(status.is_client_error(), "{e} mapped to {status}");
    let body = serde_json::to_value(e.body()).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert!(body["error"]["message"]
        .as_str()
        .is_some_and(|m| !m.is_empty()));
    Ok(())
}

/// Parses `bytes` as the body of every POST route and validates what parses, as the handlers do.
fn parse_and_validate(
    bytes: &[u8],
    limits: &Limits,
    registry: &Registry,
) -> Result<(), TestCaseError> {
    for route in ["/v1/chat/completions", "/v1/completions", "/v1/reason"] {
        if let Err(e) = validate::check_body(route, bytes, limits, registry) {
            assert_client_error(e)?;
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes_never_panic_the_parser_or_validator(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        parse_and_validate(&bytes, &Limits::default(), &Registry::with_builtins())?;
    }

    #[test]
    fn arbitrary_json_never_panics_and_rejections_are_4xx(value in any_json()) {
        let bytes = serde_json::to_vec(&value).map_err(|e| TestCaseError::fail(e.to_string()))?;
        parse_and_validate(&bytes, &Limits::default(), &Registry::with_builtins())?;
    }

    #[test]
    fn request_shaped_json_with_hostile_values_validates_or_is_4xx(value in request_like()) {
        let bytes = serde_json::to_vec(&value).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let limits = Limits { max_n: 4, max_budget_tokens: 10_000, ..Limits::default() };
        parse_and_validate(&bytes, &limits, &Registry::with_builtins())?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_strings_round_trip_through_sse_data_events(texts in prop::collection::vec(any::<String>(), 1..4)) {
        let values: Vec<Value> = texts.iter().map(|t| json!({"choices": [{"delta": {"content": t}}], "t": t})).collect();
        sse_wire::round_trip(&values).map_err(TestCaseError::fail)?;
    }
}
