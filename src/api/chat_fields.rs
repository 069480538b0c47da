//! A chat request's own fields, read once into the port's terms: its `messages` (roles mapped,
//! text parts joined, a non-empty user message required) and its `chat_template_kwargs` (an
//! object of template variables, none of the renderer's own names). Each error names the field.
//! Used by [`super::validate::chat`]; knows nothing of limits or strategies.

use ponder_strategies::{ChatTemplateKwargs, GeneratorError, Turn};
use serde_json::Value;

use super::error::ValidationError;
use super::types::MessageIn;

/// Text of a message's `content`: a string, or the concatenated text parts of a list.
fn content_text(content: &Value) -> Result<String, ValidationError> {
    match content {
        Value::String(s) => Ok(s.clone()),
        Value::Null => Ok(String::new()),
        Value::Array(parts) => {
            let mut out = String::new();
            for p in parts {
                match (
                    p.get("type").and_then(Value::as_str),
                    p.get("text").and_then(Value::as_str),
                ) {
                    (Some("text"), Some(t)) => out.push_str(t),
                    _ => {
                        return Err(ValidationError::invalid(
                            "messages.content",
                            "only text parts ({\"type\": \"text\", \"text\": …}) are supported",
                        ))
                    }
                }
            }
            Ok(out)
        }
        _ => Err(ValidationError::invalid(
            "messages.content",
            "must be a string or a list of text parts",
        )),
    }
}

pub(super) fn messages(msgs: &[MessageIn]) -> Result<Vec<Turn>, ValidationError> {
    if msgs.is_empty() {
        return Err(ValidationError::invalid(
            "messages",
            "must contain at least one message",
        ));
    }
    let mut out = Vec::with_capacity(msgs.len());
    for m in msgs {
        let role = match m.role.as_str() {
            "system" | "developer" => "system",
            "user" | "tool" | "function" => "user",
            "assistant" => "assistant",
            other => {
                return Err(ValidationError::invalid(
                    "messages.role",
                    format!("must be system, developer, user, assistant or tool, got {other:?}"),
                ))
            }
        };
        out.push(Turn::new(role, content_text(&m.content)?));
    }
    if !out
        .iter()
        .any(|m| m.role == "user" && !m.content.trim().is_empty())
    {
        return Err(ValidationError::invalid(
            "messages",
            "must contain a non-empty user message",
        ));
    }
    Ok(out)
}

/// `chat_template_kwargs`: an object (or null), none of whose names the renderer sets itself.
pub(super) fn template_kwargs(
    field: Option<&Value>,
) -> Result<ChatTemplateKwargs, ValidationError> {
    let vars = match field {
        None | Some(Value::Null) => return Ok(ChatTemplateKwargs::default()),
        Some(Value::Object(vars)) => vars.clone(),
        Some(_) => {
            return Err(ValidationError::invalid(
                ChatTemplateKwargs::FIELD,
                "must be an object of template variables, e.g. {\"enable_thinking\": false}",
            ))
        }
    };
    ChatTemplateKwargs::new(vars).map_err(|e| match e {
        GeneratorError::InvalidRequest { reason, .. } => {
            ValidationError::invalid(ChatTemplateKwargs::FIELD, reason)
        }
        other => ValidationError::invalid(ChatTemplateKwargs::FIELD, other.to_string()),
    })
}
