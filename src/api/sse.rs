//! Builds the response and chunk bodies ([`super::responses`]) of OpenAI's shapes (chat and
//! legacy text completion), shared by the streaming and non-streaming paths: choices, logprobs,
//! usage, and Ponder's extension field `ponder` (progress events while a search runs; the
//! outcome summary at the end); and the SSE events that carry them.
#![deny(clippy::indexing_slicing)]

use std::collections::BTreeMap;

use axum::response::sse::Event;
use serde::Serialize;
use serde_json::json;

use super::error::AppError;
use super::responses::{
    AssistantMessage, AssistantRole, ChatChoice, ChatChunkChoice, ChatChunkObject, ChatCompletion,
    ChatCompletionChunk, ChatCompletionObject, ChatDelta, ChoiceFinish, CompletionBody,
    CompletionChunk, PonderChunkField, SearchSummary, TextChoice, TextChunkChoice, TextCompletion,
    TextCompletionChunk, TextCompletionObject,
};
use super::types::{ChatLogprobs, Logprobs, TextLogprobs, TokenLogprob, TopLogprob, UsageOut};
use ponder_strategies::{PromptLogprobs, TokenInfo};

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
    pub(crate) logprobs: Option<Logprobs>,
    pub(crate) finish: ChoiceFinish,
    /// The stop string that ended it, if one did (vLLM's field).
    pub(crate) stop_reason: Option<String>,
    /// The thinking split off `text` (chat replies of a thinking model).
    pub(crate) reasoning: Option<String>,
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

    /// A streamed chunk for choice `index`: its text delta (and the role on a chat choice's
    /// first chunk), its logprobs, its finish reason.
    pub(crate) fn chunk(
        &self,
        index: usize,
        text: Option<&str>,
        first: bool,
        logprobs: Option<Logprobs>,
        finish: Option<ChoiceFinish>,
    ) -> CompletionChunk {
        let mut chunk = self.bare_chunk(None, None);
        match &mut chunk {
            CompletionChunk::Chat(c) => c.choices.push(ChatChunkChoice {
                delta: ChatDelta {
                    content: text.map(str::to_string),
                    reasoning: None,
                    reasoning_content: None,
                    role: first.then_some(AssistantRole::Assistant),
                },
                finish_reason: finish,
                index,
                logprobs,
                stop_reason: None,
            }),
            CompletionChunk::Text(c) => c.choices.push(TextChunkChoice {
                finish_reason: finish,
                index,
                logprobs,
                stop_reason: None,
                text: text.unwrap_or("").to_string(),
            }),
        }
        chunk
    }

    /// A chunk without choices carrying `usage` and/or the `ponder` extension.
    pub(crate) fn bare_chunk(
        &self,
        usage: Option<&UsageOut>,
        ponder: Option<PonderChunkField>,
    ) -> CompletionChunk {
        let usage = usage.cloned();
        match self.flavor {
            Flavor::Chat => CompletionChunk::Chat(ChatCompletionChunk {
                choices: Vec::new(),
                created: self.created,
                id: self.id.clone(),
                model: self.model.clone(),
                object: ChatChunkObject::ChatCompletionChunk,
                ponder,
                usage,
            }),
            Flavor::Text => CompletionChunk::Text(TextCompletionChunk {
                choices: Vec::new(),
                created: self.created,
                id: self.id.clone(),
                model: self.model.clone(),
                object: TextCompletionObject::TextCompletion,
                ponder,
                usage,
            }),
        }
    }

    /// A whole (non-streamed) response, with the search's summary when a strategy ran.
    pub(crate) fn response(
        &self,
        choices: Vec<ChoiceOut>,
        usage: &UsageOut,
        ponder: Option<SearchSummary>,
    ) -> CompletionBody {
        let indexed = choices.into_iter().enumerate();
        match self.flavor {
            Flavor::Chat => CompletionBody::Chat(ChatCompletion {
                choices: indexed
                    .map(|(index, c)| ChatChoice {
                        finish_reason: c.finish,
                        index,
                        logprobs: c.logprobs,
                        message: AssistantMessage {
                            content: c.text,
                            reasoning_content: c.reasoning.clone(),
                            reasoning: c.reasoning,
                            refusal: None,
                            role: AssistantRole::Assistant,
                        },
                        stop_reason: c.stop_reason,
                    })
                    .collect(),
                created: self.created,
                id: self.id.clone(),
                model: self.model.clone(),
                object: ChatCompletionObject::ChatCompletion,
                ponder,
                system_fingerprint: None,
                usage: usage.clone(),
            }),
            Flavor::Text => CompletionBody::Text(TextCompletion {
                choices: indexed
                    .map(|(index, c)| TextChoice {
                        finish_reason: c.finish,
                        index,
                        logprobs: c.logprobs,
                        stop_reason: c.stop_reason,
                        text: c.text,
                    })
                    .collect(),
                created: self.created,
                id: self.id.clone(),
                model: self.model.clone(),
                object: TextCompletionObject::TextCompletion,
                ponder,
                system_fingerprint: None,
                usage: usage.clone(),
            }),
        }
    }

    /// OpenAI's logprobs of `tokens` (each with its own text and its alternatives'), the
    /// first of which starts at byte `text_start` of the choice's text.
    pub(crate) fn logprobs(&self, tokens: &[TokenInfo], text_start: usize) -> Logprobs {
        match self.flavor {
            Flavor::Chat => {
                let content = tokens
                    .iter()
                    .map(|t| TokenLogprob {
                        bytes: t.text.as_bytes().to_vec(),
                        token: t.text.clone(),
                        logprob: f64::from(t.logprob),
                        top_logprobs: t
                            .top
                            .iter()
                            .map(|(token, lp)| TopLogprob {
                                bytes: token.as_bytes().to_vec(),
                                token: token.clone(),
                                logprob: f64::from(*lp),
                            })
                            .collect(),
                    })
                    .collect();
                Logprobs::Chat(ChatLogprobs { content })
            }
            Flavor::Text => {
                let mut offset = text_start;
                let mut text_offset = Vec::new();
                for t in tokens {
                    text_offset.push(offset);
                    offset += t.text.len();
                }
                let top_logprobs = tokens.iter().map(|t| Some(top_map(t))).collect();
                Logprobs::Text(TextLogprobs {
                    text_offset,
                    token_logprobs: tokens.iter().map(|t| Some(f64::from(t.logprob))).collect(),
                    tokens: tokens.iter().map(|t| t.text.clone()).collect(),
                    top_logprobs,
                })
            }
        }
    }
}

/// A token's alternatives as the text shape writes them: text to logprob.
fn top_map(t: &TokenInfo) -> BTreeMap<String, f64> {
    t.top
        .iter()
        .map(|(token, lp)| (token.clone(), f64::from(*lp)))
        .collect()
}

/// `echo` with `logprobs` (text flavour): the prompt's tokens — the first with null logprob
/// and alternatives, then each later one's — before the completion's `generated` (whose offsets
/// already count the prompt's text).
pub(crate) fn echoed_logprobs(prompt: &PromptLogprobs, generated: Logprobs) -> Logprobs {
    let Logprobs::Text(generated) = generated else {
        return generated;
    };
    let mut out = TextLogprobs {
        text_offset: vec![0],
        token_logprobs: vec![None],
        tokens: vec![prompt.first.clone()],
        top_logprobs: vec![None],
    };
    let mut offset = prompt.first.len();
    for t in &prompt.rest {
        out.text_offset.push(offset);
        offset += t.text.len();
        out.token_logprobs.push(Some(f64::from(t.logprob)));
        out.tokens.push(t.text.clone());
        out.top_logprobs.push(Some(top_map(t)));
    }
    out.text_offset.extend(generated.text_offset);
    out.token_logprobs.extend(generated.token_logprobs);
    out.tokens.extend(generated.tokens);
    out.top_logprobs.extend(generated.top_logprobs);
    Logprobs::Text(out)
}

/// An SSE event carrying `value` as JSON in its data.
pub(crate) fn data<T: Serialize>(value: &T) -> Event {
    match serde_json::to_string(value) {
        Ok(text) => Event::default().data(text),
        // Only a map with non-string keys fails to encode, and no body here has one.
        Err(e) => Event::default().data(json!(AppError::Encode(e.to_string()).body()).to_string()),
    }
}

/// The stream's terminator.
pub(crate) fn done() -> Event {
    Event::default().data("[DONE]")
}
