//! The budgets a request names besides `budget_tokens`: `reasoning_effort`'s table (the whole
//! budget each level names, and the thinking budget that goes with it) and the thinking budget
//! (`thinking_token_budget`, SGLang's `thinking_budget`) that runs `budget_forcing`. Read by the
//! validation and the OpenAPI document; nothing here runs a request.

use serde_json::Value;

use super::error::ValidationError;
use super::types::CommonParams;
use super::validate::int_in;

/// `reasoning_effort`'s values (vLLM's, which include OpenAI's) and the token budget each
/// names, held to the server's budget limit: the one table the validation and the OpenAPI
/// document read. `none` names no search: the request is plain decoding.
pub(crate) const REASONING_EFFORTS: [(&str, Option<u64>); 6] = [
    ("none", None),
    ("minimal", Some(512)),
    ("low", Some(1024)),
    ("medium", Some(4096)),
    ("high", Some(16384)),
    ("xhigh", Some(65536)),
];

/// The thinking budget (`budget_forcing`'s `max_thinking_tokens`) that goes with a whole budget
/// named by `reasoning_effort`, when the request names none: half of it.
pub(crate) fn effort_thinking_budget(budget: u64) -> u64 {
    budget / 2
}

/// The strategy a thinking budget runs.
pub(super) const THINKING_STRATEGY: &str = "budget_forcing";

/// `thinking_token_budget` (vLLM) or its alias `thinking_budget` (SGLang), in
/// [1, `max_budget`].
/// The value and the field that carried it.
pub(super) fn thinking_budget(
    c: &CommonParams,
    max_budget: u64,
) -> Result<Option<(u64, &'static str)>, ValidationError> {
    match (c.thinking_token_budget, c.thinking_budget) {
        (Some(a), Some(b)) if a != b => Err(ValidationError::invalid(
            "thinking_budget",
            format!(
                "is SGLang's name for thinking_token_budget: send one, or the same value                  (got {b} and thinking_token_budget {a})"
            ),
        )),
        (Some(v), _) => Ok(Some((
            int_in("thinking_token_budget", v, 1, max_budget)?,
            "thinking_token_budget",
        ))),
        (None, Some(v)) => Ok(Some((
            int_in("thinking_budget", v, 1, max_budget)?,
            "thinking_budget",
        ))),
        (None, None) => Ok(None),
    }
}

/// `params` with `max_thinking_tokens` set to `thinking`: a request's thinking budget (sent in
/// `field`; refused when `strategy_params` sets it as well) or its effort's (`None`: the
/// parameters' own value wins).
pub(super) fn with_thinking_budget(
    params: Value,
    thinking: u64,
    field: Option<&'static str>,
) -> Result<Value, ValidationError> {
    let mut params = match params {
        Value::Null => Value::Object(serde_json::Map::new()),
        p => p,
    };
    if let Some(map) = params.as_object_mut() {
        if map.contains_key("max_thinking_tokens") {
            if let Some(field) = field {
                return Err(ValidationError::invalid(
                    field,
                    "strategy_params.max_thinking_tokens is set as well: send one",
                ));
            }
        } else {
            map.insert("max_thinking_tokens".into(), thinking.into());
        }
    }
    Ok(params)
}

/// The budget `effort` names (`None` for `none`: no search).
pub(super) fn effort_budget(effort: &str) -> Result<Option<u64>, ValidationError> {
    match REASONING_EFFORTS.iter().find(|(name, _)| *name == effort) {
        Some((_, budget)) => Ok(*budget),
        None => Err(ValidationError::invalid(
            "reasoning_effort",
            format!(
                "must be one of {}, got {effort:?}",
                REASONING_EFFORTS.map(|(name, _)| name).join(", ")
            ),
        )),
    }
}
