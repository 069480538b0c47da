//! `GET /openapi.json`: the OpenAPI 3.1 description of this server, derived with utoipa from the
//! types the handlers parse and serialize ([`super::types`], [`super::responses`], the
//! strategies' `Outcome`) and the handlers' `#[utoipa::path]`s, so the document cannot drift from
//! the wire. Two steps finish it:
//!
//! - [`Conventions`] (once, on utoipa's types): the bearer scheme, the OpenAI-shaped error
//!   responses every operation can answer, what the server-sent events carry, and that the
//!   OpenAI request bodies ignore unknown fields (`additionalProperties: true`; `/v1/reason`'s
//!   refuses them, `false`, from its `deny_unknown_fields`).
//! - [`apply_server_facts`] (per request, JSON-pointer edits): this server's configuration — its
//!   limits as `maximum`s, the models and registered strategies as enums, each strategy's
//!   parameters as `StrategyParams.<name>` (read off its defaults, so user-registered strategies
//!   are covered), and whether a key is required.
//!
//! Clients and fuzzers (schemathesis in `scripts/serve_clients.py`) thus see the contract actually
//! enforced. This module describes; it validates nothing and builds no response body.
#![deny(clippy::indexing_slicing)]

use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use ponder_strategies::Registry;
use serde_json::{json, Map, Value};
use thiserror::Error;
use utoipa::openapi::extensions::ExtensionsBuilder;
use utoipa::openapi::path::Operation;
use utoipa::openapi::schema::{AdditionalProperties, ObjectBuilder, Schema, Type};
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::openapi::{Components, ContentBuilder, Ref, RefOr, ResponseBuilder};
use utoipa::{Modify, OpenApi};

use super::error::{AppError, ErrorBody};
use super::handlers::served_models;
use super::responses::{ChatCompletionChunk, TextCompletionChunk};
use super::validate::Limits;
use super::AppState;

/// The document as derived from the types and handlers, before [`apply_server_facts`].
#[derive(OpenApi)]
#[openapi(
    info(
        title = "Ponder",
        description = "Test-time-scaling reasoning server: OpenAI-compatible completions with a \
                       compute budget."
    ),
    paths(
        super::generate::chat_completions,
        super::generate::completions,
        super::generate::reason,
        super::handlers::models,
        super::handlers::strategies,
        super::handlers::health,
        super::handlers::ready,
        super::handlers::metrics,
        openapi,
    ),
    components(schemas(ChatCompletionChunk, TextCompletionChunk, ErrorBody)),
    modifiers(&Conventions),
)]
struct ApiDoc;

/// What the derive cannot say: see the module doc.
struct Conventions;

/// The request bodies of the OpenAI endpoints (each with `CommonParams`' fields).
const OPENAI_REQUESTS: [&str; 2] = ["ChatCompletionRequest", "CompletionRequest"];

/// The error responses of an operation at `path` (OpenAI's error body); the probes need no key
/// and only generation reads a body or queues.
fn error_codes(path: &str, has_body: bool) -> Vec<&'static str> {
    let mut codes = Vec::new();
    if has_body {
        codes.extend(["400", "404", "413", "415", "429", "502", "503", "504"]);
    }
    if !matches!(path, "/health" | "/ready") {
        codes.push("401");
    }
    codes.push("500");
    codes
}

/// The chunk schema a streaming operation's events carry.
fn event_data(path: &str) -> Option<&'static str> {
    match path {
        "/v1/chat/completions" => Some("ChatCompletionChunk"),
        "/v1/completions" => Some("TextCompletionChunk"),
        _ => None,
    }
}

impl Conventions {
    fn operation(path: &str, op: &mut Operation) {
        let error = ResponseBuilder::new()
            .description("OpenAI-shaped error")
            .content(
                "application/json",
                ContentBuilder::new()
                    .schema(Some(Ref::from_schema_name("Error")))
                    .build(),
            )
            .build();
        for code in error_codes(path, op.request_body.is_some()) {
            op.responses
                .responses
                .entry(code.to_string())
                .or_insert_with(|| RefOr::T(error.clone()));
        }
        let Some(chunk) = event_data(path) else {
            return;
        };
        for response in op.responses.responses.values_mut() {
            let RefOr::T(response) = response else {
                continue;
            };
            if let Some(events) = response.content.get_mut("text/event-stream") {
                // One server-sent event (schemathesis checks each against this), its `data`
                // described in `x-ponder-event-data` (JSON Schema's `contentSchema` has no
                // field in utoipa 5).
                let data = ObjectBuilder::new()
                    .schema_type(Type::String)
                    .description(Some(format!(
                        "a {chunk} as JSON (an Error if the run fails); the last event's is \
                         `[DONE]`"
                    )))
                    .extensions(Some(
                        ExtensionsBuilder::new()
                            .add(
                                "x-ponder-event-data",
                                json!({"oneOf": [
                                    {"$ref": format!("#/components/schemas/{chunk}")},
                                    {"$ref": "#/components/schemas/Error"},
                                    {"type": "string", "enum": ["[DONE]"]},
                                ]}),
                            )
                            .build(),
                    ));
                events.schema = Some(
                    ObjectBuilder::new()
                        .description(Some("one server-sent event"))
                        .property("data", data)
                        .required("data")
                        .property("event", ObjectBuilder::new().schema_type(Type::String))
                        .property("id", ObjectBuilder::new().schema_type(Type::String))
                        .property("retry", ObjectBuilder::new().schema_type(Type::Integer))
                        .into(),
                );
            }
        }
    }

    /// The OpenAI request `name` as one object: utoipa writes a `#[serde(flatten)]`ed field as
    /// `allOf: [{$ref: CommonParams}, {own fields}]`, which generators (schemathesis among them)
    /// do not merge, so the shared fields are copied in (and `CommonParams` dropped by the
    /// caller). `additionalProperties: true` says unknown fields are ignored.
    fn inline_common(components: &mut Components, name: &str) {
        let Some(RefOr::T(Schema::Object(common))) = components.schemas.get("CommonParams") else {
            return;
        };
        let common = common.clone();
        let Some(RefOr::T(Schema::AllOf(all))) = components.schemas.get(name) else {
            return;
        };
        let description = all.description.clone();
        let own = all.items.iter().find_map(|item| match item {
            RefOr::T(Schema::Object(o)) => Some(o.clone()),
            _ => None,
        });
        let Some(mut merged) = own else {
            return;
        };
        merged.properties.extend(common.properties);
        merged.required.extend(common.required);
        merged.description = description;
        merged.additional_properties = Some(Box::new(AdditionalProperties::FreeForm(true)));
        components
            .schemas
            .insert(name.to_string(), RefOr::T(Schema::Object(merged)));
    }
}

impl Modify for Conventions {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        if let Some(components) = openapi.components.as_mut() {
            components.add_security_scheme(
                "bearer",
                SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
            );
            for name in OPENAI_REQUESTS {
                Self::inline_common(components, name);
            }
            components.schemas.remove("CommonParams");
        }
        for (path, item) in openapi.paths.paths.iter_mut() {
            for op in [&mut item.get, &mut item.post].into_iter().flatten() {
                Self::operation(path, op);
            }
        }
    }
}

/// A node [`apply_server_facts`] edits is missing: the derived document changed shape.
#[derive(Debug, Error)]
pub(crate) enum DocumentError {
    /// utoipa's document did not serialize.
    #[error("could not encode the OpenAPI document: {0}")]
    Encode(#[from] serde_json::Error),
    /// No object at this JSON pointer.
    #[error("the OpenAPI document has no object at {0}")]
    Missing(String),
}

impl From<DocumentError> for AppError {
    fn from(e: DocumentError) -> Self {
        AppError::Encode(e.to_string())
    }
}

/// The object at `pointer`.
fn node<'a>(
    doc: &'a mut Value,
    pointer: &str,
) -> Result<&'a mut Map<String, Value>, DocumentError> {
    doc.pointer_mut(pointer)
        .and_then(Value::as_object_mut)
        .ok_or_else(|| DocumentError::Missing(pointer.to_string()))
}

/// Property `name` of component schema `schema`.
fn property<'a>(
    doc: &'a mut Value,
    schema: &str,
    name: &str,
) -> Result<&'a mut Map<String, Value>, DocumentError> {
    node(
        doc,
        &format!("/components/schemas/{schema}/properties/{name}"),
    )
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
                    // (A null default is left unsaid: utoipa reads `"default": null` as none.)
                    if let (Some(o), false) = (schema.as_object_mut(), v.is_null()) {
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
        // A parameter whose default is "none": any value, or null. Spelled as every type rather
        // than `{}`: utoipa 5 cannot read a typeless schema back (the round-trip test does).
        Value::Null => {
            json!({"type": ["null", "boolean", "integer", "number", "string", "array", "object"]})
        }
    }
}

/// What of this server's configuration the document states.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ServerFacts<'a> {
    /// The configured limits.
    pub(crate) limits: &'a Limits,
    /// The registered strategies.
    pub(crate) registry: &'a Registry,
    /// The plain model id.
    pub(crate) model_id: &'a str,
    /// Whether requests need a bearer key.
    pub(crate) keys_required: bool,
}

/// Writes this server's configuration into the derived document: the limits as `maximum` /
/// `maxLength` / `maxItems`, the served model names and registered strategy names as `enum`s,
/// each strategy's parameter schema as `StrategyParams.<name>` (and `strategy_params` / `params`
/// as one of them), and the bearer requirement when keys are configured.
pub(crate) fn apply_server_facts(
    doc: &mut Value,
    facts: ServerFacts<'_>,
) -> Result<(), DocumentError> {
    let l = facts.limits;
    let names = facts.registry.names();
    let mut strategy_enum: Vec<Value> = names.iter().map(|n| json!(n)).collect();
    strategy_enum.push(Value::Null);
    let mut param_refs = Vec::new();
    let schemas = node(doc, "/components/schemas")?;
    for info in facts.registry.list() {
        let name = format!("StrategyParams.{}", info.name);
        let mut schema = params_schema(&info.defaults);
        if let Some(o) = schema.as_object_mut() {
            let about = format!("Parameters of `{}`: {}", info.name, info.description);
            o.insert("description".into(), json!(about));
        }
        param_refs.push(json!({"$ref": format!("#/components/schemas/{name}")}));
        schemas.insert(name, schema);
    }
    for schema in OPENAI_REQUESTS {
        property(doc, schema, "strategy")?.insert("enum".into(), json!(strategy_enum));
        let any_of = property(doc, schema, "strategy_params")?
            .get_mut("anyOf")
            .and_then(Value::as_array_mut)
            .ok_or_else(|| DocumentError::Missing(format!("{schema}.strategy_params.anyOf")))?;
        any_of.splice(0..0, param_refs.iter().cloned());
    }
    for schema in [
        "ChatCompletionRequest",
        "CompletionRequest",
        "ReasonRequest",
    ] {
        property(doc, schema, "budget_tokens")?
            .insert("maximum".into(), json!(l.max_budget_tokens));
    }
    reason_per_strategy(doc, &names, &l.default_search(l.default_budget()).strategy)?;
    let models = served_models(facts.model_id, &names);
    for schema in OPENAI_REQUESTS {
        property(doc, schema, "model")?.insert("enum".into(), json!(models));
        for (field, maximum) in [
            ("max_tokens", l.max_completion_tokens),
            ("max_completion_tokens", l.max_completion_tokens),
            ("n", l.max_n),
        ] {
            property(doc, schema, field)?.insert("maximum".into(), json!(maximum));
        }
        let stop = format!("/components/schemas/{schema}/properties/stop/oneOf");
        node(doc, &format!("{stop}/0"))?.insert("maxLength".into(), json!(l.max_stop_bytes));
        node(doc, &format!("{stop}/1"))?.insert("maxItems".into(), json!(l.max_stop));
        node(doc, &format!("{stop}/1/items"))?.insert("maxLength".into(), json!(l.max_stop_bytes));
    }
    // `best_of` must equal `n`, so it is at most `max_n` too.
    property(doc, "CompletionRequest", "best_of")?.insert("maximum".into(), json!(l.max_n));
    for (schema, field) in [
        ("ChatCompletionRequest", "top_logprobs"),
        ("CompletionRequest", "logprobs"),
    ] {
        property(doc, schema, field)?.insert("maximum".into(), json!(l.max_top_logprobs));
    }
    let plain_models = served_models(facts.model_id, &[]);
    for schema in OPENAI_REQUESTS {
        split_plain_and_search(doc, schema, &plain_models)?;
    }
    let security = if facts.keys_required {
        json!([{"bearer": []}])
    } else {
        json!([])
    };
    node(doc, "")?.insert("security".into(), security);
    Ok(())
}

/// `/v1/reason`'s body as one variant per registered strategy, so that `params` goes with its
/// strategy (each strategy refuses another's parameters): `strategy` is that name — or absent or
/// null in the default strategy's variant — and `params` its `StrategyParams.<name>` or null.
fn reason_per_strategy(
    doc: &mut Value,
    names: &[String],
    default: &str,
) -> Result<(), DocumentError> {
    let base = node(doc, "/components/schemas/ReasonRequest")?;
    let description = base.remove("description");
    let variants: Vec<Value> = names
        .iter()
        .map(|name| {
            let mut variant = base.clone();
            let is_default = name == default;
            let mut allowed = vec![json!(name)];
            if is_default {
                allowed.push(Value::Null);
            }
            let strategy = json!({
                "type": if is_default { json!(["string", "null"]) } else { json!("string") },
                "enum": allowed,
                "description": if is_default {
                    format!("`{name}` (the default strategy: may be left out)")
                } else {
                    format!("`{name}`")
                },
            });
            let params = json!({
                "anyOf": [
                    {"$ref": format!("#/components/schemas/StrategyParams.{name}")},
                    {"type": "null"},
                ],
                "description": format!("`{name}`'s parameters; null or absent for its defaults"),
            });
            if let Some(props) = variant.get_mut("properties").and_then(Value::as_object_mut) {
                props.insert("strategy".into(), strategy);
                props.insert("params".into(), params);
            }
            if !is_default {
                if let Some(required) = variant.get_mut("required").and_then(Value::as_array_mut) {
                    required.push(json!("strategy"));
                }
            }
            variant.insert("title".into(), json!(format!("ReasonRequest.{name}")));
            Value::Object(variant)
        })
        .collect();
    base.clear();
    if let Some(d) = description {
        base.insert("description".into(), d);
    }
    base.insert("oneOf".into(), json!(variants));
    Ok(())
}

/// An OpenAI request as its two valid shapes (`anyOf`), as `validate` tells them apart: plain
/// decoding (no strategy, budget, effort other than `none` or strategy parameters; the model is
/// `ponder` or the model id), or a search, whose branches take the request's temperature,
/// top_p, top_k, min_p, stop and max_tokens over the strategy's own but no penalties or
/// `logit_bias`, return one choice and no logprobs.
fn split_plain_and_search(
    doc: &mut Value,
    schema: &str,
    plain_models: &[String],
) -> Result<(), DocumentError> {
    let base = node(doc, &format!("/components/schemas/{schema}"))?;
    let description = base.remove("description");
    // Each field's schema with `constraint`'s keywords added (or, for `Absent`, replaced).
    let variant = |title: &str, fields: Vec<(&str, Value)>| {
        let mut v = base.clone();
        if let Some(props) = v.get_mut("properties").and_then(Value::as_object_mut) {
            for (field, constraint) in fields {
                let narrowed = match (props.get(field), constraint) {
                    (Some(Value::Object(old)), Value::Object(new)) if !new.contains_key("type") => {
                        let mut old = old.clone();
                        old.extend(new);
                        Value::Object(old)
                    }
                    (_, constraint) => constraint,
                };
                props.insert(field.into(), narrowed);
            }
        }
        v.insert("title".into(), json!(format!("{schema}.{title}")));
        Value::Object(v)
    };
    let absent = || json!({"type": "null", "description": "absent in plain decoding"});
    let plain = variant(
        "PlainDecoding",
        vec![
            ("model", json!({"enum": plain_models})),
            ("strategy", absent()),
            ("strategy_params", absent()),
            ("budget_tokens", absent()),
            (
                "reasoning_effort",
                json!({"enum": ["none", null], "description": "none or absent in plain decoding"}),
            ),
        ],
    );
    let neutral = |value: Value| json!({"enum": [value, null], "description": "a strategy samples with its own parameters: only the neutral value"});
    let searching: Vec<Value> = super::effort::REASONING_EFFORTS
        .iter()
        .filter(|(_, budget)| budget.is_some())
        .map(|(name, _)| json!(name))
        .chain([Value::Null])
        .collect();
    let mut search_fields = vec![
        (
            "reasoning_effort",
            json!({"enum": searching, "description": "none asks for no search"}),
        ),
        ("n", neutral(json!(1))),
        ("presence_penalty", neutral(json!(0))),
        ("frequency_penalty", neutral(json!(0))),
        ("repetition_penalty", neutral(json!(1))),
        ("logit_bias", json!({"maxProperties": 0})),
    ];
    let no_logprobs =
        json!({"type": "null", "description": "logprobs are not returned by a search"});
    if schema == "CompletionRequest" {
        search_fields.push(("best_of", neutral(json!(1))));
        search_fields.push(("logprobs", no_logprobs));
    } else {
        search_fields.push(("logprobs", neutral(json!(false))));
        search_fields.push(("top_logprobs", neutral(json!(0))));
    }
    let search = variant("Search", search_fields);
    base.clear();
    if let Some(d) = description {
        base.insert("description".into(), d);
    }
    base.insert("anyOf".into(), json!([plain, search]));
    Ok(())
}

/// The finished document for `facts`.
pub(crate) fn document(facts: ServerFacts<'_>) -> Result<Value, DocumentError> {
    let mut doc = serde_json::to_value(ApiDoc::openapi())?;
    add_keywords_utoipa_lacks(&mut doc)?;
    apply_server_facts(&mut doc, facts)?;
    Ok(doc)
}

/// JSON Schema keywords utoipa 5's types have no field for (so they are added to the JSON):
/// `contains` — a chat request needs a user message with text (as `validate` checks).
pub(crate) fn add_keywords_utoipa_lacks(doc: &mut Value) -> Result<(), DocumentError> {
    let text = json!({"type": "string", "pattern": "\\S"});
    let user_message = json!({
        "type": "object",
        "required": ["role", "content"],
        "properties": {
            "role": {"enum": ["user", "tool", "function"]},
            "content": {"oneOf": [
                text,
                {"type": "array", "contains": {
                    "type": "object",
                    "required": ["type", "text"],
                    "properties": {"type": {"enum": ["text"]}, "text": text},
                }},
            ]},
        },
    });
    property(doc, "ChatCompletionRequest", "messages")?.insert("contains".into(), user_message);
    Ok(())
}

/// `GET /openapi.json`.
#[utoipa::path(get, path = "/openapi.json", tag = "discovery",
    summary = "This document",
    responses((status = 200, description = "OpenAPI 3.1", body = Object)))]
pub(crate) async fn openapi(State(state): State<Arc<AppState>>) -> Result<Json<Value>, AppError> {
    let facts = ServerFacts {
        limits: &state.limits,
        registry: &state.registry,
        model_id: &state.model_id,
        keys_required: state.keys.is_enabled(),
    };
    Ok(Json(document(facts)?))
}

#[cfg(test)]
#[path = "openapi_tests.rs"]
mod tests;
