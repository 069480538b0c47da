//! `GET /openapi.json`: the OpenAPI 3.0 description of this server, generated from its state —
//! the registered strategy names, each strategy's parameters (`StrategyParams.<name>`, read off
//! its defaults), the model names and the configured limits appear in the schemas, so clients
//! and fuzzers (schemathesis in CI) see the contract actually enforced.
#![deny(clippy::indexing_slicing)]

use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use serde_json::{json, Map, Value};

use super::AppState;

fn error_responses() -> Map<String, Value> {
    let err = json!({"description": "OpenAI-shaped error", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}});
    let mut map = Map::new();
    for code in [
        "400", "401", "404", "413", "415", "422", "429", "500", "502", "503", "504",
    ] {
        map.insert(code.into(), err.clone());
    }
    map
}

fn post(summary: &str, request: &str, response: &str, streams: bool) -> Value {
    let mut responses = error_responses();
    let mut content = Map::new();
    content.insert(
        "application/json".into(),
        json!({"schema": {"$ref": format!("#/components/schemas/{response}")}}),
    );
    if streams {
        // Each event: an OpenAI chunk (or an error object) as JSON in `data`, the last `[DONE]`.
        content.insert(
            "text/event-stream".into(),
            json!({"schema": {"type": "object", "required": ["data"], "properties": {
                "data": {"type": "string"}, "event": {"type": "string"}, "id": {"type": "string"},
            }}}),
        );
    }
    responses.insert(
        "200".into(),
        json!({"description": "OK", "content": content}),
    );
    json!({"post": {
        "summary": summary,
        "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{request}")}}}},
        "responses": responses,
    }})
}

fn get(summary: &str, schema: Value) -> Value {
    let mut responses = error_responses();
    responses.insert(
        "200".into(),
        json!({"description": "OK", "content": {"application/json": {"schema": schema}}}),
    );
    json!({"get": {"summary": summary, "responses": responses}})
}

/// A `get` operation with its response for `code` replaced.
fn with_response(mut op: Value, code: &str, response: Value) -> Value {
    if let Some(responses) = op
        .pointer_mut("/get/responses")
        .and_then(Value::as_object_mut)
    {
        responses.insert(code.into(), response);
    }
    op
}

/// A schema for a strategy's parameters, read off their defaults (`GET /v1/strategies`): each
/// parameter with its JSON type and default; no other field is accepted (the strategies'
/// parameter types deny unknown fields). Ranges are the strategy's to check (a 400 names them).
fn params_schema(defaults: &Value) -> Value {
    match defaults {
        Value::Object(fields) => {
            let props: Map<String, Value> = fields
                .iter()
                .map(|(k, v)| {
                    let mut schema = params_schema(v);
                    if let Some(o) = schema.as_object_mut() {
                        o.insert("default".into(), v.clone());
                    }
                    (k.clone(), schema)
                })
                .collect();
            json!({"type": "object", "additionalProperties": false, "properties": props})
        }
        Value::Bool(_) => json!({"type": "boolean"}),
        Value::Number(n) if n.is_f64() => json!({"type": "number"}),
        Value::Number(_) => json!({"type": "integer"}),
        Value::String(_) => json!({"type": "string"}),
        Value::Array(items) => match items.first() {
            Some(first) => json!({"type": "array", "items": params_schema(first)}),
            None => json!({"type": "array"}),
        },
        // A parameter whose default is "none": any value, or null.
        Value::Null => json!({"nullable": true}),
    }
}

/// The document.
pub(crate) async fn openapi(State(state): State<Arc<AppState>>) -> Json<Value> {
    let l = &state.limits;
    let names = state.registry.names();
    let mut schemas = Map::new();
    let mut param_refs = Vec::new();
    for info in state.registry.list() {
        let name = format!("StrategyParams.{}", info.name);
        let mut schema = params_schema(&info.defaults);
        if let Some(o) = schema.as_object_mut() {
            o.insert(
                "description".into(),
                json!(format!(
                    "Parameters of `{}`: {}",
                    info.name, info.description
                )),
            );
        }
        param_refs.push(json!({"$ref": format!("#/components/schemas/{name}")}));
        schemas.insert(name, schema);
    }
    let params = json!({"nullable": true, "anyOf": param_refs,
        "description": "the strategy's parameters (StrategyParams.<strategy>); GET /v1/strategies lists their defaults"});
    let common = json!({
        "model": {"type": "string", "description": "`ponder`, the model id, or `ponder/<strategy>`", "example": "ponder"},
        "max_tokens": {"type": "integer", "minimum": 1, "maximum": l.max_completion_tokens, "nullable": true},
        "max_completion_tokens": {"type": "integer", "minimum": 1, "maximum": l.max_completion_tokens, "nullable": true},
        "temperature": {"type": "number", "minimum": 0, "maximum": 2, "nullable": true},
        "top_p": {"type": "number", "exclusiveMinimum": true, "minimum": 0, "maximum": 1, "nullable": true},
        "top_k": {"type": "integer", "minimum": 0, "maximum": 4_294_967_295u64, "nullable": true},
        "min_p": {"type": "number", "minimum": 0, "maximum": 1, "nullable": true},
        "n": {"type": "integer", "minimum": 1, "maximum": l.max_n, "nullable": true},
        "stop": {"nullable": true, "oneOf": [
            {"type": "string", "minLength": 1, "maxLength": l.max_stop_bytes},
            {"type": "array", "maxItems": l.max_stop, "items": {"type": "string", "minLength": 1, "maxLength": l.max_stop_bytes}}
        ]},
        "seed": {"type": "integer", "format": "int64", "nullable": true},
        "stream": {"type": "boolean", "nullable": true},
        "stream_options": {"type": "object", "nullable": true, "properties": {"include_usage": {"type": "boolean"}}},
        "reasoning_effort": {"type": "string", "enum": ["minimal", "low", "medium", "high"], "nullable": true,
            "description": "a budget of 512 / 1024 / 4096 / 16384 tokens, held to the server's budget limit"},
        "budget_tokens": {"type": "integer", "minimum": 1, "maximum": l.max_budget_tokens, "nullable": true},
        "deadline_ms": {"type": "integer", "minimum": 1, "maximum": 3_600_000, "nullable": true},
        "strategy": {"type": "string", "enum": names, "nullable": true},
        "strategy_params": params.clone(),
        "return_trace": {"type": "boolean", "nullable": true},
        "presence_penalty": {"type": "number", "minimum": -2, "maximum": 2, "nullable": true},
        "frequency_penalty": {"type": "number", "minimum": -2, "maximum": 2, "nullable": true},
        "repetition_penalty": {"type": "number", "exclusiveMinimum": true, "minimum": 0, "nullable": true},
        "logit_bias": {"type": "object", "nullable": true, "maxProperties": super::fields::MAX_LOGIT_BIAS,
            "description": "token id (a decimal string) to a bias added to its logit; -100 bans the token",
            "additionalProperties": {"type": "number", "minimum": -100, "maximum": 100}},
        "response_format": {"type": "object", "nullable": true, "required": ["type"],
            "description": "only {\"type\": \"text\"}; JSON modes are refused with a 400 (no constrained decoding)",
            "properties": {"type": {"type": "string"}}},
        "tools": {"type": "array", "nullable": true, "maxItems": 0, "items": {"type": "object"},
            "description": "tool calling is not supported: a non-empty list is refused with a 400"},
        "tool_choice": {"type": "string", "enum": ["none"], "nullable": true},
    });
    let with = |extra: Value, required: &[&str]| {
        let mut props = common.clone();
        if let (Some(p), Some(e)) = (props.as_object_mut(), extra.as_object()) {
            p.extend(e.clone());
        }
        json!({"type": "object", "required": required, "properties": props})
    };
    let chat = with(
        json!({
            "messages": {"type": "array", "minItems": 1, "items": {"$ref": "#/components/schemas/Message"}},
            "logprobs": {"type": "boolean", "nullable": true},
            "top_logprobs": {"type": "integer", "minimum": 0, "maximum": l.max_top_logprobs, "nullable": true},
        }),
        &["model", "messages"],
    );
    let completion = with(
        json!({
            "prompt": {"oneOf": [{"type": "string", "minLength": 1}, {"type": "array", "minItems": 1, "maxItems": 1, "items": {"type": "string", "minLength": 1}}]},
            "logprobs": {"type": "integer", "minimum": 0, "maximum": l.max_top_logprobs, "nullable": true},
            "echo": {"type": "boolean", "nullable": true},
        }),
        &["model", "prompt"],
    );
    let usage = json!({"type": "object", "required": ["prompt_tokens", "completion_tokens", "total_tokens"], "properties": {
        "prompt_tokens": {"type": "integer"}, "completion_tokens": {"type": "integer"}, "total_tokens": {"type": "integer"},
        "prompt_tokens_details": {"type": "object", "properties": {"cached_tokens": {"type": "integer"}}},
        "completion_tokens_details": {"type": "object", "properties": {"reasoning_tokens": {"type": "integer"}}},
    }});
    let completion_response = json!({"type": "object", "required": ["id", "object", "created", "model", "choices"], "properties": {
        "id": {"type": "string"}, "object": {"type": "string"}, "created": {"type": "integer"}, "model": {"type": "string"},
        "choices": {"type": "array", "items": {"type": "object", "required": ["index", "finish_reason"], "properties": {
            "index": {"type": "integer"},
            "finish_reason": {"type": "string", "enum": ["stop", "length"]},
        }}},
        "usage": {"$ref": "#/components/schemas/Usage"},
        "ponder": {"type": "object", "description": "the search's summary when a strategy ran"},
    }});
    let list = json!({"type": "object", "required": ["object", "data"], "properties": {"object": {"type": "string"}, "data": {"type": "array", "items": {"type": "object"}}}});
    let status = json!({"type": "object", "required": ["status"], "properties": {"status": {"type": "string"}}});
    let metrics = with_response(
        get("Prometheus metrics", json!({})),
        "200",
        json!({"description": "OpenMetrics text", "content": {"application/openmetrics-text": {"schema": {"type": "string"}}}}),
    );
    let ready = with_response(
        get("Readiness (503 while draining)", status.clone()),
        "503",
        json!({"description": "not ready", "content": {"application/json": {"schema": status.clone()}}}),
    );
    let mut doc = json!({
        "openapi": "3.0.3",
        "info": {"title": "Ponder", "version": env!("CARGO_PKG_VERSION"), "description": "Test-time-scaling reasoning server: OpenAI-compatible completions with a compute budget."},
        "paths": {
            "/v1/chat/completions": post("Chat completion (OpenAI-compatible, with budget extensions)", "ChatCompletionRequest", "Completion", true),
            "/v1/completions": post("Text completion (OpenAI-compatible legacy API)", "CompletionRequest", "Completion", true),
            "/v1/reason": post("Run a strategy and return the whole Outcome", "ReasonRequest", "Outcome", false),
            "/v1/models": get("Models: ponder, the model id, ponder/<strategy>", list.clone()),
            "/v1/strategies": get("Strategies with their default parameters", list),
            "/health": get("Liveness", status),
            "/ready": ready,
            "/metrics": metrics,
            "/openapi.json": get("This document", json!({"type": "object"})),
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Message": {"type": "object", "required": ["role"], "properties": {
                    "role": {"type": "string", "enum": ["system", "developer", "user", "assistant", "tool"]},
                    "content": {"nullable": true, "oneOf": [
                        {"type": "string"},
                        {"type": "array", "items": {"type": "object", "required": ["type", "text"], "properties": {"type": {"type": "string", "enum": ["text"]}, "text": {"type": "string"}}}}
                    ]},
                }},
                "ChatCompletionRequest": chat,
                "CompletionRequest": completion,
                "ReasonRequest": {"type": "object", "required": ["problem"], "additionalProperties": false, "properties": {
                    "problem": {"type": "string", "minLength": 1},
                    "strategy": {"type": "string", "enum": state.registry.names(), "nullable": true},
                    "params": params,
                    "budget_tokens": {"type": "integer", "minimum": 1, "maximum": l.max_budget_tokens, "nullable": true},
                    "deadline_ms": {"type": "integer", "minimum": 1, "maximum": 3_600_000, "nullable": true},
                    "seed": {"type": "integer", "format": "int64", "nullable": true},
                }},
                "Usage": usage,
                "Completion": completion_response,
                "Outcome": {"type": "object", "required": ["strategy", "candidates", "usage", "finish_reason", "tree"], "properties": {
                    "strategy": {"type": "string"},
                    "answer": {"type": "string", "nullable": true},
                    "text": {"type": "string", "nullable": true},
                    "candidates": {"type": "array", "items": {"type": "object"}},
                    "usage": {"type": "object"},
                    "finish_reason": {"type": "string", "enum": ["completed", "budget", "deadline", "cancelled"]},
                    "tree": {"type": "object"},
                }},
                "Error": {"type": "object", "required": ["error"], "properties": {"error": {"type": "object", "required": ["message", "type"], "properties": {
                    "message": {"type": "string"},
                    "type": {"type": "string"},
                    "param": {"type": "string", "nullable": true},
                    "code": {"type": "string", "nullable": true},
                }}}},
            },
        },
        "security": if state.keys.is_enabled() { json!([{"bearer": []}]) } else { json!([]) },
    });
    if let Some(all) = doc
        .pointer_mut("/components/schemas")
        .and_then(Value::as_object_mut)
    {
        all.extend(schemas);
    }
    Json(doc)
}
