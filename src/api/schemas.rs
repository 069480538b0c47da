//! OpenAPI schemas of the request fields that are parsed loosely (as a `serde_json::Value`, a
//! string checked against a list, or an untagged enum) and checked by [`super::validate`] and
//! [`super::fields`]: each function says what that validation accepts, for `#[schema(schema_with
//! = …)]` on the field in [`super::types`]. Limits that are this server's configuration are not
//! here: `openapi::apply_server_facts` adds them per request. Nothing here validates anything.
#![deny(clippy::indexing_slicing)]

use serde_json::{json, Value};
use utoipa::openapi::schema::{
    AnyOfBuilder, ArrayBuilder, ObjectBuilder, OneOfBuilder, Schema, SchemaType, Type,
};
use utoipa::openapi::RefOr;

use super::fields::MAX_LOGIT_BIAS;

/// A `type` that also admits null (an `Option` field sent as `null` is the same as absent).
fn or_null(kind: Type) -> SchemaType {
    SchemaType::from_iter([kind, Type::Null])
}

/// A string (or null) from a fixed list.
fn one_of_strings(values: &[&str], description: &str) -> RefOr<Schema> {
    let mut allowed: Vec<Value> = values.iter().map(|v| json!(v)).collect();
    allowed.push(Value::Null);
    ObjectBuilder::new()
        .schema_type(or_null(Type::String))
        .enum_values(Some(allowed))
        .description(Some(description))
        .into()
}

/// `messages[].role`.
pub(crate) fn message_role() -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some([
            "system",
            "developer",
            "user",
            "assistant",
            "tool",
            "function",
        ]))
        .description(Some(
            "`developer` is read as `system`; `tool` and `function` as `user`",
        ))
        .into()
}

/// `messages[].content`: a string, a list of text parts, or null.
pub(crate) fn message_content() -> RefOr<Schema> {
    let part = ObjectBuilder::new()
        .property(
            "type",
            ObjectBuilder::new()
                .schema_type(Type::String)
                .enum_values(Some(["text"])),
        )
        .required("type")
        .property("text", ObjectBuilder::new().schema_type(Type::String))
        .required("text")
        .description(Some(
            "a text part (image and audio parts are refused with a 400)",
        ));
    OneOfBuilder::new()
        .item(ObjectBuilder::new().schema_type(Type::String))
        .item(ArrayBuilder::new().items(part))
        .item(ObjectBuilder::new().schema_type(Type::Null))
        .description(Some("the message's text"))
        .into()
}

/// `stop`: a string or a list of strings. `openapi::apply_server_facts` adds the server's limits
/// (`maxLength` of each, `maxItems` of the list) to the first two alternatives.
pub(crate) fn stop() -> RefOr<Schema> {
    let one = || {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .min_length(Some(1))
    };
    OneOfBuilder::new()
        .item(one())
        .item(ArrayBuilder::new().items(one()))
        .item(ObjectBuilder::new().schema_type(Type::Null))
        .description(Some(
            "generation ends before the first of these strings (each limited in UTF-8 bytes)",
        ))
        .into()
}

/// `reasoning_effort`.
pub(crate) fn reasoning_effort() -> RefOr<Schema> {
    let efforts = super::effort::REASONING_EFFORTS;
    let budgets: Vec<String> = efforts
        .iter()
        .filter_map(|(name, budget)| budget.map(|b| format!("{name} {b}")))
        .collect();
    one_of_strings(
        &efforts.map(|(name, _)| name),
        &format!(
            "none: no search (plain decoding); the others a search with a budget of {} tokens, \
             held to the server's budget limit (budget_tokens, when set, is the budget)",
            budgets.join(", ")
        ),
    )
}

/// `chat_template_kwargs`: an object of template variables, none of the renderer's own.
pub(crate) fn chat_template_kwargs() -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(or_null(Type::Object))
        .description(Some(format!(
            "variables the model's chat template reads beside the conversation (e.g. \
             enable_thinking); {} are the server's and refused",
            ponder_strategies::ChatTemplateKwargs::RESERVED.join(", ")
        )))
        .into()
}

/// `reasoning_parser`: one of the parser choices.
pub(crate) fn reasoning_parser() -> RefOr<Schema> {
    one_of_strings(
        &ponder_verifiers::reasoning::PARSER_NAMES,
        "auto: the thinking tags the model's chat template writes (else <think>); think, \
         deepseek_r1, qwen3: <think>…</think>; none: the reply stays whole",
    )
}

/// `strategy_params` / `params`: null here; `openapi::apply_server_facts` adds the registered
/// strategies' parameter schemas (`StrategyParams.<name>`) to the `anyOf`.
pub(crate) fn strategy_params() -> RefOr<Schema> {
    AnyOfBuilder::new()
        .item(ObjectBuilder::new().schema_type(Type::Null))
        .description(Some(
            "the strategy's parameters (StrategyParams.<strategy>); GET /v1/strategies lists \
             their defaults",
        ))
        .into()
}

/// `logit_bias`: token id (a decimal string) to a bias in [-100, 100].
pub(crate) fn logit_bias() -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(or_null(Type::Object))
        .property_names(Some(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .pattern(Some("^[0-9]{1,9}$")),
        ))
        .additional_properties(Some(
            ObjectBuilder::new()
                .schema_type(Type::Number)
                .minimum(Some(-100))
                .maximum(Some(100)),
        ))
        .max_properties(Some(MAX_LOGIT_BIAS))
        .description(Some(
            "token id (a decimal string, in the model's vocabulary) to a bias added to its \
             logit; -100 bans the token. Not with a strategy.",
        ))
        .into()
}

/// `response_format`: only `{"type": "text"}`.
pub(crate) fn response_format() -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(or_null(Type::Object))
        .property(
            "type",
            ObjectBuilder::new()
                .schema_type(Type::String)
                .enum_values(Some(["text"])),
        )
        .required("type")
        .description(Some(
            "only {\"type\": \"text\"}: JSON modes are refused with a 400 (no constrained decoding)",
        ))
        .into()
}

/// `tools` / `functions`: only an empty list.
pub(crate) fn no_tools() -> RefOr<Schema> {
    ArrayBuilder::new()
        .schema_type(or_null(Type::Array))
        .items(ObjectBuilder::new())
        .max_items(Some(0))
        .description(Some(
            "tool calling is not supported: a non-empty list is refused with a 400",
        ))
        .into()
}

/// `tool_choice` / `function_call`: only `"none"`.
pub(crate) fn no_tool_choice() -> RefOr<Schema> {
    one_of_strings(&["none"], "tool calling is not supported: only \"none\"")
}

/// `prompt`: one non-blank string or one non-empty list of token ids, alone or in a
/// one-element list.
pub(crate) fn prompt() -> RefOr<Schema> {
    let text = || {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .min_length(Some(1))
            .pattern(Some("\\S"))
    };
    let ids = || {
        ArrayBuilder::new()
            .items(
                ObjectBuilder::new()
                    .schema_type(Type::Integer)
                    .minimum(Some(0))
                    .maximum(Some(u32::MAX)),
            )
            .min_items(Some(1))
    };
    let one = |item: RefOr<Schema>| {
        ArrayBuilder::new()
            .items(item)
            .min_items(Some(1))
            .max_items(Some(1))
    };
    OneOfBuilder::new()
        .item(text())
        .item(one(text().into()))
        .item(ids())
        .item(one(ids().into()))
        .description(Some(
            "the text to continue, or its token ids in the model's vocabulary (one prompt per \
             request; token ids only without a strategy)",
        ))
        .into()
}

/// `echo`: the prompt before the completion.
pub(crate) fn echo() -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(or_null(Type::Boolean))
        .description(Some(
            "start the completion's text with the prompt and, with `logprobs`, its logprobs with \
             the prompt's (the first token's null): plain decoding on the local engine; streamed, \
             the prompt is each choice's first chunk (`echo` with a strategy is a 400)",
        ))
        .into()
}

/// `suffix`: only null.
pub(crate) fn suffix() -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(Type::Null)
        .description(Some(
            "insertion is not supported: any value but null is refused",
        ))
        .into()
}
