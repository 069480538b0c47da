//! The document is valid OpenAPI 3.1 as utoipa reads it, names every path and strategy, and
//! carries this server's limits; every `$ref` resolves.
// Tests read `Value`s by key (a missing key reads as null and fails the assertion).
#![allow(clippy::indexing_slicing)]

use ponder_strategies::Registry;
use serde_json::Value;

use super::*;

fn facts<'a>(limits: &'a Limits, registry: &'a Registry) -> ServerFacts<'a> {
    ServerFacts {
        limits,
        registry,
        model_id: "smollm2",
        keys_required: true,
    }
}

fn doc_for(limits: &Limits, registry: &Registry) -> Value {
    match document(facts(limits, registry)) {
        Ok(doc) => doc,
        Err(e) => panic!("{e}"),
    }
}

/// Every `$ref` in `v`, with where it was found.
fn refs(v: &Value, at: &str, out: &mut Vec<(String, String)>) {
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                if k == "$ref" {
                    if let Some(r) = child.as_str() {
                        out.push((at.to_string(), r.to_string()));
                    }
                }
                refs(child, &format!("{at}/{k}"), out);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                refs(child, &format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

#[test]
fn the_document_round_trips_through_utoipas_types_and_every_ref_resolves() {
    let doc = doc_for(&Limits::default(), &Registry::with_builtins());
    assert_eq!(doc["openapi"], "3.1.0");
    // Everything but what utoipa has no field for (`add_keywords_utoipa_lacks`) round-trips.
    let mut doc = doc;
    for variant in 0..2 {
        let contains = doc
            .pointer_mut(&format!(
                "/components/schemas/ChatCompletionRequest/anyOf/{variant}/properties/messages"
            ))
            .and_then(Value::as_object_mut)
            .and_then(|messages| messages.remove("contains"));
        assert!(contains.is_some(), "messages must contain a user message");
    }
    let schemas = doc["components"]["schemas"].as_object().expect("schemas");
    for (name, schema) in schemas {
        let read: Result<utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>, _> =
            serde_json::from_value(schema.clone());
        let again = read.map(|s| serde_json::to_value(s).expect("writes"));
        assert_eq!(again.as_ref().ok(), Some(schema), "{name}: {again:?}");
    }
    let parsed: utoipa::openapi::OpenApi =
        serde_json::from_value(doc.clone()).expect("utoipa reads the document");
    let again = serde_json::to_value(&parsed).expect("and writes it");
    assert_eq!(again, doc, "the round trip changed the document");
    let mut found = Vec::new();
    refs(&doc, "", &mut found);
    assert!(found.len() > 20, "{found:?}");
    for (at, r) in found {
        let pointer = r.strip_prefix('#').expect("a local ref");
        assert!(doc.pointer(pointer).is_some(), "{at}: {r} does not resolve");
    }
}

#[test]
fn every_endpoint_is_described_with_its_bodies_and_errors() {
    let doc = doc_for(&Limits::default(), &Registry::with_builtins());
    for (path, method) in [
        ("/v1/chat/completions", "post"),
        ("/v1/completions", "post"),
        ("/v1/reason", "post"),
        ("/v1/models", "get"),
        ("/v1/strategies", "get"),
        ("/health", "get"),
        ("/ready", "get"),
        ("/metrics", "get"),
        ("/openapi.json", "get"),
    ] {
        let op = &doc["paths"][path][method];
        assert!(op.is_object(), "{method} {path} is missing");
        assert!(
            op["responses"]["200"].is_object(),
            "{method} {path}: no 200"
        );
        assert_eq!(
            op["responses"]["500"]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/Error",
            "{method} {path}"
        );
    }
    let chat = &doc["paths"]["/v1/chat/completions"]["post"];
    assert_eq!(
        chat["requestBody"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/ChatCompletionRequest"
    );
    let ok = &chat["responses"]["200"]["content"];
    assert_eq!(
        ok["application/json"]["schema"]["$ref"],
        "#/components/schemas/ChatCompletion"
    );
    assert_eq!(
        ok["text/event-stream"]["schema"]["properties"]["data"]["x-ponder-event-data"]["oneOf"][0]
            ["$ref"],
        "#/components/schemas/ChatCompletionChunk"
    );
    for code in ["400", "404", "413", "415", "429", "401"] {
        assert!(chat["responses"][code].is_object(), "chat: no {code}");
    }
    // Limits are 400s, as OpenAI and vLLM answer: no 422 is documented.
    assert!(chat["responses"]["422"].is_null());
    // The probes need no key; the 503 of /ready is its status body.
    let ready = &doc["paths"]["/ready"]["get"]["responses"];
    assert!(ready["401"].is_null());
    assert_eq!(
        ready["503"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/Status"
    );
    // Two types under one component name would silently share one schema.
    let schemas = &doc["components"]["schemas"];
    assert!(schemas["CompletionUsage"]["properties"]["total_tokens"].is_object());
    assert!(schemas["Usage"]["properties"]["generated_tokens"].is_object());
    assert!(schemas["FinishReason"]["enum"]
        .as_array()
        .is_some_and(|e| e.contains(&Value::from("budget"))));
    assert!(schemas["ChoiceFinish"]["enum"]
        .as_array()
        .is_some_and(|e| e.contains(&Value::from("length"))));
    assert_eq!(doc["security"], serde_json::json!([{"bearer": []}]));
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
}

#[test]
fn limits_strategies_and_models_are_this_servers() {
    let limits = Limits {
        max_n: 3,
        max_completion_tokens: 77,
        max_budget_tokens: 999,
        max_top_logprobs: 4,
        max_stop: 2,
        max_stop_bytes: 9,
        ..Limits::default()
    };
    let mut registry = Registry::with_builtins();
    // A user's strategy: its parameters are documented like the built-ins'.
    registry.register(
        "test_echo",
        "a user's plug-in",
        |p: ponder_strategies::BestOfNParams| {
            ponder_strategies::BestOfN::new(p, false)
                .map(|s| Box::new(s) as Box<dyn ponder_strategies::Strategy>)
        },
    );
    let doc = doc_for(&limits, &registry);
    let schemas = &doc["components"]["schemas"];
    assert!(
        schemas["CommonParams"].is_null(),
        "inlined into each request"
    );
    // Plain decoding or a search: each shape ignores unknown fields.
    let chat = &schemas["ChatCompletionRequest"]["anyOf"][0];
    let search = &schemas["ChatCompletionRequest"]["anyOf"][1];
    let text_search = &schemas["CompletionRequest"]["anyOf"][1];
    for shape in [
        chat,
        search,
        text_search,
        &schemas["CompletionRequest"]["anyOf"][0],
    ] {
        assert_eq!(shape["additionalProperties"], true, "{shape}");
    }
    let required = chat["required"].as_array().expect("required");
    assert!(
        required.contains(&Value::from("model")) && required.contains(&Value::from("messages"))
    );
    assert_eq!(chat["properties"]["strategy"]["type"], "null");
    assert_eq!(
        chat["properties"]["model"]["enum"],
        serde_json::json!(["ponder", "smollm2"])
    );
    assert_eq!(
        search["properties"]["n"]["enum"],
        serde_json::json!([1, null])
    );
    assert_eq!(search["properties"]["logit_bias"]["maxProperties"], 0);
    assert_eq!(
        text_search["properties"]["best_of"]["enum"],
        serde_json::json!([1, null])
    );
    let common = &search["properties"];
    assert_eq!(chat["properties"]["n"]["maximum"], 3);
    assert_eq!(common["n"]["minimum"], 1);
    assert_eq!(common["max_tokens"]["maximum"], 77);
    assert_eq!(common["max_completion_tokens"]["maximum"], 77);
    assert_eq!(common["budget_tokens"]["maximum"], 999);
    assert_eq!(common["stop"]["oneOf"][0]["maxLength"], 9);
    assert_eq!(common["stop"]["oneOf"][1]["maxItems"], 2);
    assert_eq!(common["stop"]["oneOf"][1]["items"]["maxLength"], 9);
    assert_eq!(
        chat["properties"]["logit_bias"]["maxProperties"],
        crate::api::fields::MAX_LOGIT_BIAS
    );
    assert_eq!(common["temperature"]["maximum"], 2.0);
    assert_eq!(common["top_logprobs"]["maximum"], 4);
    assert_eq!(
        schemas["CompletionRequest"]["anyOf"][0]["properties"]["logprobs"]["maximum"],
        4
    );
    // /v1/reason: one variant per strategy, each refusing unknown fields.
    let variants = schemas["ReasonRequest"]["oneOf"]
        .as_array()
        .expect("a variant per strategy");
    let names = registry.names();
    assert_eq!(variants.len(), names.len());
    assert!(names.iter().any(|n| n == "test_echo"), "{names:?}");
    for name in &names {
        let params = &schemas[format!("StrategyParams.{name}").as_str()];
        assert_eq!(params["type"], "object", "{name}: {params}");
        assert_eq!(params["additionalProperties"], false, "{name}");
        let listed = common["strategy"]["enum"].as_array().expect("an enum");
        assert!(listed.contains(&Value::from(name.as_str())), "{name}");
        let reference =
            serde_json::json!({"$ref": format!("#/components/schemas/StrategyParams.{name}")});
        let any_of = common["strategy_params"]["anyOf"]
            .as_array()
            .expect("anyOf");
        assert!(any_of.contains(&reference), "{name}");
        let variant = variants
            .iter()
            .find(|v| v["properties"]["strategy"]["enum"][0] == name.as_str())
            .expect("the strategy's variant");
        assert_eq!(variant["additionalProperties"], false);
        assert_eq!(variant["properties"]["budget_tokens"]["maximum"], 999);
        assert_eq!(variant["properties"]["params"]["anyOf"][0], reference);
        let required = variant["required"].as_array().expect("required");
        let is_default = *name == limits.default_search(limits.default_budget()).strategy;
        assert_eq!(
            required.contains(&Value::from("strategy")),
            !is_default,
            "{name}: only the default strategy may be left out"
        );
    }
    let models = common["model"]["enum"].as_array().expect("an enum");
    for m in ["ponder", "smollm2", "ponder/best_of_n", "ponder/test_echo"] {
        assert!(models.contains(&Value::from(m)), "{m} in {models:?}");
    }
}
