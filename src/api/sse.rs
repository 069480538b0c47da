//! Response and chunk bodies in OpenAI's shapes (chat and legacy text completion), shared by the
//! streaming and non-streaming paths: choices, logprobs, usage, and Ponder's extension field
//! `ponder` (progress events while a search runs; the outcome summary at the end).
#![deny(clippy::indexing_slicing)]

use std::sync::Arc;

use axum::response::sse::Event;
use serde_json::{json, Value};

use super::types::{ChatLogprobs, TokenLogprob, TopLogprob, UsageOut};
use crate::engine::{LoadedModel, SampledToken};

/// Which OpenAI API a response speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flavor {
    /// `/v1/chat/completions`.
    Chat,
    /// `/v1/completions`.
    Text,
}

/// One finished choice.
#[derive(Debug, Clone)]
pub(crate) struct ChoiceOut {
    pub(crate) text: String,
    pub(crate) logprobs: Option<Value>,
    pub(crate) finish: &'static str,
    /// The stop string that ended it, if one did (vLLM's field).
    pub(crate) stop_reason: Option<String>,
}

/// What every body of one response shares.
#[derive(Debug, Clone)]
pub(crate) struct Envelope {
    pub(crate) flavor: Flavor,
    pub(crate) id: String,
    pub(crate) created: u64,
    pub(crate) model: String,
}

impl Envelope {
    pub(crate) fn new(flavor: Flavor, model: &str) -> Self {
        use rand::Rng;
        let prefix = if flavor == Flavor::Chat {
            "chatcmpl"
        } else {
            "cmpl"
        };
        let id = format!("{prefix}-{:016x}", rand::rng().random::<u64>());
        let created = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        Self {
            flavor,
            id,
            created,
            model: model.to_string(),
        }
    }

    fn object(&self, chunk: bool) -> &'static str {
        match (self.flavor, chunk) {
            (Flavor::Chat, true) => "chat.completion.chunk",
            (Flavor::Chat, false) => "chat.completion",
            (Flavor::Text, _) => "text_completion",
        }
    }

    /// A streamed chunk for choice `index`: its text delta (and the role on a chat choice's
    /// first chunk), its logprobs, its finish reason.
    pub(crate) fn chunk(
        &self,
        index: usize,
        text: Option<&str>,
        first: bool,
        logprobs: Option<Value>,
        finish: Option<&str>,
    ) -> Value {
        let choice = match self.flavor {
            Flavor::Chat => {
                let mut delta = serde_json::Map::new();
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
        json!({"id": self.id, "object": self.object(true), "created": self.created, "model": self.model, "choices": [choice]})
    }

    /// A chunk without choices carrying `usage` and/or the `ponder` extension.
    pub(crate) fn bare_chunk(&self, usage: Option<&UsageOut>, ponder: Option<Value>) -> Value {
        let mut v = json!({"id": self.id, "object": self.object(true), "created": self.created, "model": self.model, "choices": []});
        if let Some(u) = usage {
            set_field(&mut v, "usage", json!(u));
        }
        if let Some(p) = ponder {
            set_field(&mut v, "ponder", p);
        }
        v
    }

    /// A whole (non-streamed) response.
    pub(crate) fn response(&self, choices: Vec<ChoiceOut>, usage: &UsageOut) -> Value {
        let choices: Vec<Value> = choices
            .into_iter()
            .enumerate()
            .map(|(index, c)| match self.flavor {
                Flavor::Chat => json!({
                    "index": index,
                    "message": {"role": "assistant", "content": c.text, "refusal": null},
                    "logprobs": c.logprobs,
                    "finish_reason": c.finish,
                    "stop_reason": c.stop_reason,
                }),
                Flavor::Text => json!({"index": index, "text": c.text, "logprobs": c.logprobs, "finish_reason": c.finish, "stop_reason": c.stop_reason}),
            })
            .collect();
        json!({
            "id": self.id,
            "object": self.object(false),
            "created": self.created,
            "model": self.model,
            "system_fingerprint": null,
            "choices": choices,
            "usage": usage,
        })
    }

    /// Logprobs of `tokens` in this flavour's shape (`text_start`: offset of the first token's text).
    pub(crate) fn logprobs(
        &self,
        model: &Arc<LoadedModel>,
        tokens: &[SampledToken],
        text_start: usize,
    ) -> Value {
        let text = |id: u32| model.tokenizer.decode(&[id]).unwrap_or_default();
        match self.flavor {
            Flavor::Chat => {
                let content = tokens
                    .iter()
                    .map(|t| {
                        let token = text(t.token);
                        TokenLogprob {
                            bytes: token.as_bytes().to_vec(),
                            token,
                            logprob: t.logprob,
                            top_logprobs: t
                                .top_logprobs
                                .iter()
                                .map(|(id, lp)| {
                                    let token = text(*id);
                                    TopLogprob {
                                        bytes: token.as_bytes().to_vec(),
                                        token,
                                        logprob: *lp,
                                    }
                                })
                                .collect(),
                        }
                    })
                    .collect();
                json!(ChatLogprobs { content })
            }
            Flavor::Text => {
                let mut offset = text_start;
                let mut offsets = Vec::new();
                let mut strs = Vec::new();
                for t in tokens {
                    let s = text(t.token);
                    offsets.push(offset);
                    offset += s.len();
                    strs.push(s);
                }
                let tops: Vec<Value> = tokens
                    .iter()
                    .map(|t| {
                        Value::Object(
                            t.top_logprobs
                                .iter()
                                .map(|(id, lp)| (text(*id), json!(lp)))
                                .collect(),
                        )
                    })
                    .collect();
                json!({
                    "tokens": strs,
                    "token_logprobs": tokens.iter().map(|t| t.logprob).collect::<Vec<_>>(),
                    "top_logprobs": tops,
                    "text_offset": offsets,
                })
            }
        }
    }
}

/// Sets `body[key] = value` on a JSON object, without `IndexMut`'s panic when `body` is not an
/// object (every body built here is one).
pub(crate) fn set_field(body: &mut Value, key: &str, value: Value) {
    if let Some(fields) = body.as_object_mut() {
        fields.insert(key.into(), value);
    }
}

/// An SSE event carrying `value` as its data.
pub(crate) fn data(value: &Value) -> Event {
    Event::default().data(value.to_string())
}

/// The stream's terminator.
pub(crate) fn done() -> Event {
    Event::default().data("[DONE]")
}
