//! The OpenAI request fields beyond the basic sampling knobs: the presence, frequency and
//! repetition penalties and `logit_bias`, checked for the sampler (`engine::sampling` applies
//! them), and the fields this server cannot honour — JSON `response_format` (it has no
//! constrained decoding), tool calling, `suffix`, `best_of` — refused with an error naming the
//! field rather than silently ignored.
#![deny(clippy::indexing_slicing)]

use ponder_strategies::LogitAdjust;
use serde_json::Value;

use super::error::ValidationError;
use super::types::CommonParams;

/// Most entries in `logit_bias` (OpenAI's limit).
pub(crate) const MAX_LOGIT_BIAS: usize = 300;

/// The penalties and biases of a request, checked.
#[derive(Debug)]
pub(crate) struct Adjustments {
    /// In the port's terms (`logit_bias` sorted by token id, each token once).
    pub(crate) logits: LogitAdjust,
    /// The first of these fields the request set to something other than its neutral value.
    pub(crate) field: Option<&'static str>,
}

pub(crate) fn logit_adjustments(c: &CommonParams) -> Result<Adjustments, ValidationError> {
    let mut field = None;
    let mut penalty = |name: &'static str, v: Option<f64>, neutral: f64| {
        let v = v.unwrap_or(neutral);
        let ok = match name {
            "repetition_penalty" => v.is_finite() && v > 0.0,
            _ => (-2.0..=2.0).contains(&v),
        };
        if !ok {
            let range = match name {
                "repetition_penalty" => "a finite number > 0",
                _ => "in [-2, 2]",
            };
            return Err(ValidationError::invalid(
                name,
                format!("must be {range}, got {v}"),
            ));
        }
        if v != neutral {
            field = field.or(Some(name));
        }
        Ok(v)
    };
    let presence_penalty = penalty("presence_penalty", c.presence_penalty, 0.0)?;
    let frequency_penalty = penalty("frequency_penalty", c.frequency_penalty, 0.0)?;
    let repetition_penalty = penalty("repetition_penalty", c.repetition_penalty, 1.0)?;
    let logit_bias = match &c.logit_bias {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Object(map)) => {
            if map.len() > MAX_LOGIT_BIAS {
                return Err(ValidationError::OverLimit {
                    field: "logit_bias",
                    limit: MAX_LOGIT_BIAS as u64,
                    got: map.len() as u64,
                });
            }
            let mut out = Vec::with_capacity(map.len());
            for (k, v) in map {
                let token: u32 = k.trim().parse().map_err(|_| {
                    ValidationError::invalid(
                        "logit_bias",
                        format!("keys must be token ids, got {k:?}"),
                    )
                })?;
                let bias = v
                    .as_f64()
                    .filter(|b| (-100.0..=100.0).contains(b))
                    .ok_or_else(|| {
                        ValidationError::invalid(
                            "logit_bias",
                            format!("the bias of token {token} must be in [-100, 100], got {v}"),
                        )
                    })?;
                out.push((token, bias as f32));
            }
            out.sort_unstable_by_key(|(t, _)| *t);
            let twice = out.windows(2).find_map(|w| match w {
                [a, b] if a.0 == b.0 => Some(a.0),
                _ => None,
            });
            if let Some(t) = twice {
                return Err(ValidationError::invalid(
                    "logit_bias",
                    format!("token {t} is listed twice"),
                ));
            }
            if !out.is_empty() {
                field = field.or(Some("logit_bias"));
            }
            out
        }
        Some(other) => {
            return Err(ValidationError::invalid(
                "logit_bias",
                format!("must be an object of token id to bias, got {other}"),
            ))
        }
    };
    Ok(Adjustments {
        logits: LogitAdjust {
            repetition_penalty,
            presence_penalty,
            frequency_penalty,
            logit_bias,
        },
        field,
    })
}

/// Refuses the OpenAI fields this server cannot honour, naming each, rather than ignoring them.
pub(crate) fn refuse_unsupported(c: &CommonParams) -> Result<(), ValidationError> {
    match &c.response_format {
        None | Some(Value::Null) => {}
        Some(f) if f.get("type").and_then(Value::as_str) == Some("text") => {}
        Some(f) => {
            let kind = f.get("type").and_then(Value::as_str).unwrap_or("?");
            return Err(ValidationError::invalid(
                "response_format",
                format!(
                    "type {kind:?} is not supported: this server has no constrained decoding, \
                     so it cannot guarantee JSON output; only {{\"type\": \"text\"}} is served"
                ),
            ));
        }
    }
    let empty = |v: &Option<Value>| match v {
        None | Some(Value::Null) => true,
        Some(Value::Array(a)) => a.is_empty(),
        Some(_) => false,
    };
    let none_choice = |v: &Option<Value>| match v {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s == "none",
        Some(_) => false,
    };
    for (field, ok) in [
        ("tools", empty(&c.tools)),
        ("functions", empty(&c.functions)),
        ("tool_choice", none_choice(&c.tool_choice)),
        ("function_call", none_choice(&c.function_call)),
    ] {
        if !ok {
            return Err(ValidationError::invalid(
                field,
                "tool calling is not supported by this server",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use ponder_strategies::Registry;

    use super::super::types::ChatCompletionRequest;
    use super::super::validate::{check_body, Limits, ValidGeneration};
    use super::*;
    use crate::api::AppError;

    fn check(route: &str, body: Value) -> Result<(), AppError> {
        check_body(
            route,
            body.to_string().as_bytes(),
            &Limits::default(),
            &Registry::with_builtins(),
        )
    }

    fn chat(extra: Value) -> Value {
        let mut body = json!({"model": "ponder", "messages": [{"role": "user", "content": "Hi"}]});
        if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
            b.extend(e.clone());
        }
        body
    }

    fn refused_field(r: Result<(), AppError>) -> Option<&'static str> {
        match r {
            Err(AppError::Validation(ValidationError::Invalid { field, .. }))
            | Err(AppError::Validation(ValidationError::OverLimit { field, .. })) => Some(field),
            _ => None,
        }
    }

    #[test]
    fn fields_this_server_cannot_honour_are_refused_by_name() {
        for (extra, field) in [
            (
                json!({"response_format": {"type": "json_object"}}),
                "response_format",
            ),
            (
                json!({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {}}}}),
                "response_format",
            ),
            (
                json!({"tools": [{"type": "function", "function": {"name": "f"}}]}),
                "tools",
            ),
            (json!({"tool_choice": "auto"}), "tool_choice"),
            (json!({"functions": [{"name": "f"}]}), "functions"),
            (json!({"function_call": {"name": "f"}}), "function_call"),
        ] {
            assert_eq!(
                refused_field(check("/v1/chat/completions", chat(extra.clone()))),
                Some(field),
                "{extra}"
            );
        }
        let completion = |extra: Value| {
            let mut body = json!({"model": "ponder", "prompt": "1, 2,"});
            if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
                b.extend(e.clone());
            }
            check("/v1/completions", body)
        };
        assert_eq!(
            refused_field(completion(json!({"suffix": "end"}))),
            Some("suffix")
        );
        assert_eq!(
            refused_field(completion(json!({"best_of": 3}))),
            Some("best_of")
        );
        // The neutral values are what OpenAI clients send by default: accepted.
        for extra in [
            json!({"response_format": {"type": "text"}}),
            json!({"tools": [], "tool_choice": "none"}),
            json!({"presence_penalty": 0, "frequency_penalty": 0, "logit_bias": {}}),
        ] {
            assert!(
                check("/v1/chat/completions", chat(extra.clone())).is_ok(),
                "{extra}"
            );
        }
        assert!(completion(json!({"best_of": 1})).is_ok());
    }

    #[test]
    fn penalties_and_biases_are_checked_and_reach_the_sampler() -> Result<(), ValidationError> {
        for (extra, field) in [
            (json!({"presence_penalty": 2.5}), "presence_penalty"),
            (json!({"frequency_penalty": -3}), "frequency_penalty"),
            (json!({"repetition_penalty": 0}), "repetition_penalty"),
            (json!({"logit_bias": {"12": 101}}), "logit_bias"),
            (json!({"logit_bias": {"twelve": 1}}), "logit_bias"),
            (json!({"logit_bias": [1, 2]}), "logit_bias"),
            // Strategies sample with their own parameters: a penalty would be ignored there.
            (
                json!({"budget_tokens": 256, "frequency_penalty": 1}),
                "frequency_penalty",
            ),
            (
                json!({"strategy": "best_of_n", "logit_bias": {"5": -100}}),
                "logit_bias",
            ),
        ] {
            assert_eq!(
                refused_field(check("/v1/chat/completions", chat(extra.clone()))),
                Some(field),
                "{extra}"
            );
        }
        let body = chat(json!({
            "presence_penalty": 0.5,
            "frequency_penalty": -0.25,
            "repetition_penalty": 1.3,
            "logit_bias": {"42": -100, "7": 3.5},
        }));
        let req: ChatCompletionRequest = serde_json::from_value(body)
            .map_err(|e| ValidationError::invalid("body", e.to_string()))?;
        let valid = chat_valid(&req)?;
        let s = &valid.logits;
        assert_eq!(
            (
                s.presence_penalty,
                s.frequency_penalty,
                s.repetition_penalty
            ),
            (0.5, -0.25, 1.3)
        );
        assert_eq!(s.logit_bias, vec![(7, 3.5), (42, -100.0)]);
        Ok(())
    }

    fn chat_valid(req: &ChatCompletionRequest) -> Result<ValidGeneration, ValidationError> {
        super::super::validate::chat(req, &Limits::default(), &Registry::with_builtins(), "local")
    }
}
