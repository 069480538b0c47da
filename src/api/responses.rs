//! The JSON bodies the endpoints answer with, typed, so that the OpenAPI document is derived from
//! the very types the handlers serialize: chat and text completions (whole, and the chunks of a
//! stream), Ponder's `ponder` extension field, the model and strategy lists, and the probes'
//! status. Building a body from a request's results is [`super::sse::Envelope`]'s job and the
//! handlers'; nothing here decides what a body holds.
//!
//! Fields are declared in alphabetical order: these types replaced `serde_json::json!` bodies,
//! which serde_json writes with sorted keys, and keeping that order kept the bytes on the wire
//! unchanged. Keep it when adding a field. Parts that come from the strategies crate (the search
//! tree, progress events, the search's usage) stay `Value`s converted as before, for the same
//! reason (sorted keys, `f32`s widened to `f64`); their schemas are the strategies' own types'.
#![deny(clippy::indexing_slicing)]

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::types::{Logprobs, UsageOut};

/// Why a choice ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ChoiceFinish {
    /// The model ended it, or a stop string did.
    Stop,
    /// It reached `max_tokens` (or the strategy's budget or deadline).
    Length,
}

impl ChoiceFinish {
    /// The wire name (also the metrics' `finished_reason` label).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Stop => "stop",
            Self::Length => "length",
        }
    }
}

/// `object` of a whole chat completion.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub(crate) enum ChatCompletionObject {
    /// `chat.completion`.
    #[serde(rename = "chat.completion")]
    ChatCompletion,
}

/// `object` of a streamed chat chunk.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub(crate) enum ChatChunkObject {
    /// `chat.completion.chunk`.
    #[serde(rename = "chat.completion.chunk")]
    ChatCompletionChunk,
}

/// `object` of a text completion and of its streamed chunks.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub(crate) enum TextCompletionObject {
    /// `text_completion`.
    #[serde(rename = "text_completion")]
    TextCompletion,
}

/// `role` of the answer.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum AssistantRole {
    /// `assistant`.
    Assistant,
}

/// The answer of a chat choice.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct AssistantMessage {
    /// The text (after the thinking block, when the model wrote one).
    pub(crate) content: String,
    /// The model's thinking, apart from `content` (vLLM's field); absent when it wrote none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) reasoning: Option<String>,
    /// The same thinking under DeepSeek's name, which many clients read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) reasoning_content: Option<String>,
    /// Always null: this server does not refuse in-band.
    pub(crate) refusal: Option<String>,
    /// `assistant`.
    pub(crate) role: AssistantRole,
}

/// One choice of a chat completion.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct ChatChoice {
    /// Why it ended.
    pub(crate) finish_reason: ChoiceFinish,
    /// Its index.
    pub(crate) index: usize,
    /// Token logprobs, when asked for.
    #[schema(value_type = Option<super::types::ChatLogprobs>)]
    pub(crate) logprobs: Option<Logprobs>,
    /// The answer.
    pub(crate) message: AssistantMessage,
    /// The stop string that ended it, if one did (vLLM's field).
    pub(crate) stop_reason: Option<String>,
}

/// One choice of a text completion.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct TextChoice {
    /// Why it ended.
    pub(crate) finish_reason: ChoiceFinish,
    /// Its index.
    pub(crate) index: usize,
    /// Token logprobs, when asked for.
    #[schema(value_type = Option<super::types::TextLogprobs>)]
    pub(crate) logprobs: Option<Logprobs>,
    /// The stop string that ended it, if one did (vLLM's field).
    pub(crate) stop_reason: Option<String>,
    /// The text.
    pub(crate) text: String,
}

/// The summary of a search, in the `ponder` field of a completion (and of a stream's last
/// chunk) when a strategy ran.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct SearchSummary {
    /// The final answer.
    pub(crate) answer: Option<String>,
    /// Candidates the search considered.
    pub(crate) candidates: usize,
    /// Why the search ended.
    pub(crate) finish_reason: ponder_strategies::SearchFinish,
    /// What the router predicted and chose, when the `auto` strategy ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub(crate) router: Option<Value>,
    /// Ids of the worked examples shown before the question (absent: none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) shots: Vec<String>,
    /// Tokens charged against the budget.
    pub(crate) spent: u64,
    /// The strategy that ran.
    pub(crate) strategy: String,
    /// Vote share of the answer, when chosen by vote.
    pub(crate) support: Option<f64>,
    /// The search tree, with `return_trace`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<ponder_strategies::SearchTree>)]
    pub(crate) trace: Option<Value>,
    /// What the search spent (as a `Value`: its keys were always written sorted).
    #[schema(value_type = ponder_strategies::Usage)]
    pub(crate) usage: Value,
}

/// A progress event of a running search, in a stream chunk's `ponder` field.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct ProgressUpdate {
    /// The event.
    #[schema(value_type = ponder_strategies::Progress)]
    pub(crate) progress: Value,
}

/// A stream chunk's `ponder` field: progress while a search runs, its summary at the end.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(untagged)]
pub(crate) enum PonderChunkField {
    /// While the search runs.
    Progress(ProgressUpdate),
    /// In the last chunk with a choice.
    Summary(SearchSummary),
}

/// `POST /v1/chat/completions` without `stream`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct ChatCompletion {
    /// One per `n`.
    pub(crate) choices: Vec<ChatChoice>,
    /// Unix time in seconds.
    pub(crate) created: u64,
    /// `chatcmpl-…`.
    pub(crate) id: String,
    /// The model name as sent.
    pub(crate) model: String,
    /// `chat.completion`.
    pub(crate) object: ChatCompletionObject,
    /// Ponder: the search's summary, when a strategy ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) ponder: Option<SearchSummary>,
    /// Always null.
    pub(crate) system_fingerprint: Option<String>,
    /// Tokens used.
    pub(crate) usage: UsageOut,
}

/// `POST /v1/completions` without `stream`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct TextCompletion {
    /// One per `n`.
    pub(crate) choices: Vec<TextChoice>,
    /// Unix time in seconds.
    pub(crate) created: u64,
    /// `cmpl-…`.
    pub(crate) id: String,
    /// The model name as sent.
    pub(crate) model: String,
    /// `text_completion`.
    pub(crate) object: TextCompletionObject,
    /// Ponder: the search's summary, when a strategy ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) ponder: Option<SearchSummary>,
    /// Always null.
    pub(crate) system_fingerprint: Option<String>,
    /// Tokens used.
    pub(crate) usage: UsageOut,
}

/// A whole completion in its endpoint's shape.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub(crate) enum CompletionBody {
    /// `/v1/chat/completions`.
    Chat(ChatCompletion),
    /// `/v1/completions`.
    Text(TextCompletion),
}

/// A chat chunk's `delta`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct ChatDelta {
    /// New text, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) content: Option<String>,
    /// New thinking, if any (vLLM's field).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) reasoning: Option<String>,
    /// The same new thinking under DeepSeek's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) reasoning_content: Option<String>,
    /// `assistant`, in a choice's first chunk only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) role: Option<AssistantRole>,
}

/// One choice's part of a chat chunk.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct ChatChunkChoice {
    /// What is new.
    pub(crate) delta: ChatDelta,
    /// Set in the choice's last chunk.
    pub(crate) finish_reason: Option<ChoiceFinish>,
    /// The choice's index.
    pub(crate) index: usize,
    /// Logprobs of the new tokens, when asked for.
    #[schema(value_type = Option<super::types::ChatLogprobs>)]
    pub(crate) logprobs: Option<Logprobs>,
    /// In the last chunk, the stop string that ended the choice, if one did (vLLM's field).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) stop_reason: Option<String>,
}

/// One choice's part of a text chunk.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct TextChunkChoice {
    /// Set in the choice's last chunk.
    pub(crate) finish_reason: Option<ChoiceFinish>,
    /// The choice's index.
    pub(crate) index: usize,
    /// Logprobs of the new tokens, when asked for.
    #[schema(value_type = Option<super::types::TextLogprobs>)]
    pub(crate) logprobs: Option<Logprobs>,
    /// In the last chunk, the stop string that ended the choice, if one did (vLLM's field; a
    /// Ponder in front reads it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) stop_reason: Option<String>,
    /// New text.
    pub(crate) text: String,
}

/// The `data` of one server-sent event of a streamed chat completion (the last event's data
/// is `[DONE]`; a failure mid-stream sends an error body instead).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct ChatCompletionChunk {
    /// The choices this chunk advances (none in a usage or progress chunk).
    pub(crate) choices: Vec<ChatChunkChoice>,
    /// Unix time in seconds.
    pub(crate) created: u64,
    /// `chatcmpl-…`, the same in every chunk.
    pub(crate) id: String,
    /// The model name as sent.
    pub(crate) model: String,
    /// `chat.completion.chunk`.
    pub(crate) object: ChatChunkObject,
    /// Ponder: a search's progress, or its summary in the last chunk with a choice.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) ponder: Option<PonderChunkField>,
    /// In the last chunk, with `stream_options.include_usage`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) usage: Option<UsageOut>,
}

/// The `data` of one server-sent event of a streamed text completion (the last event's data
/// is `[DONE]`; a failure mid-stream sends an error body instead).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct TextCompletionChunk {
    /// The choices this chunk advances (none in a usage or progress chunk).
    pub(crate) choices: Vec<TextChunkChoice>,
    /// Unix time in seconds.
    pub(crate) created: u64,
    /// `cmpl-…`, the same in every chunk.
    pub(crate) id: String,
    /// The model name as sent.
    pub(crate) model: String,
    /// `text_completion`.
    pub(crate) object: TextCompletionObject,
    /// Ponder: a search's progress, or its summary in the last chunk with a choice.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) ponder: Option<PonderChunkField>,
    /// In the last chunk, with `stream_options.include_usage`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) usage: Option<UsageOut>,
}

/// A stream chunk in its endpoint's shape.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub(crate) enum CompletionChunk {
    /// `/v1/chat/completions`.
    Chat(ChatCompletionChunk),
    /// `/v1/completions`.
    Text(TextCompletionChunk),
}

impl CompletionChunk {
    /// The chunk with its `ponder` field set.
    pub(crate) fn with_ponder(mut self, field: PonderChunkField) -> Self {
        match &mut self {
            Self::Chat(c) => c.ponder = Some(field),
            Self::Text(c) => c.ponder = Some(field),
        }
        self
    }

    /// The chunk with its chat choices' new thinking set (as `reasoning` and
    /// `reasoning_content`); a text completion has none.
    pub(crate) fn with_reasoning(mut self, reasoning: Option<&str>) -> Self {
        if let (Self::Chat(c), Some(r)) = (&mut self, reasoning) {
            for x in &mut c.choices {
                x.delta.reasoning = Some(r.to_string());
                x.delta.reasoning_content = Some(r.to_string());
            }
        }
        self
    }

    /// The chunk with its choices' `stop_reason` set.
    pub(crate) fn with_stop_reason(mut self, stop: Option<&str>) -> Self {
        let stop = stop.map(str::to_string);
        match &mut self {
            Self::Chat(c) => c
                .choices
                .iter_mut()
                .for_each(|x| x.stop_reason.clone_from(&stop)),
            Self::Text(c) => c
                .choices
                .iter_mut()
                .for_each(|x| x.stop_reason.clone_from(&stop)),
        }
        self
    }
}

/// `object` of a list.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ListObject {
    /// `list`.
    List,
}

/// `object` of a model.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ModelObject {
    /// `model`.
    Model,
}

/// A model this server answers to.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct ModelCard {
    /// When the server started (Unix seconds).
    pub(crate) created: u64,
    /// `ponder`, the model id, or `ponder/<strategy>`.
    pub(crate) id: String,
    /// `model`.
    pub(crate) object: ModelObject,
    /// `ponder`.
    pub(crate) owned_by: String,
}

/// `GET /v1/models`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct ModelList {
    /// The models.
    pub(crate) data: Vec<ModelCard>,
    /// `list`.
    pub(crate) object: ListObject,
}

/// A registered strategy.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct StrategyCard {
    /// Its parameters with their default values (`StrategyParams.<name>` in this document).
    #[schema(value_type = Object)]
    pub(crate) defaults: Value,
    /// One line on what it does.
    pub(crate) description: String,
    /// The model name that runs it: `ponder/<name>`.
    pub(crate) model: String,
    /// Its name.
    pub(crate) name: String,
}

/// `GET /v1/strategies`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct StrategyList {
    /// The strategies, by name.
    pub(crate) data: Vec<StrategyCard>,
    /// The strategy run at the server's default budget when a request names none.
    pub(crate) default: String,
    /// What a request that names no strategy runs at each budget, as validation measured it
    /// (from its budget up to the next entry's; below the first, the first). Absent where the
    /// server applies no measured defaults: `default` at every budget.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) default_by_budget: Option<Vec<DefaultAtBudget>>,
    /// `list`.
    pub(crate) object: ListObject,
}

/// One budget's measured default (`GET /v1/strategies`).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct DefaultAtBudget {
    /// Its accuracy on the validation problems.
    pub(crate) accuracy: f64,
    /// The budget validation measured at.
    pub(crate) budget: u64,
    /// Its parameters as measured (null: the strategy's own).
    #[schema(value_type = Object)]
    pub(crate) params: Value,
    /// The strategy a request that names none runs from this budget.
    pub(crate) strategy: String,
}

/// What a probe reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Health {
    /// `/health`: the process is up.
    Ok,
    /// `/ready`: serving.
    Ready,
    /// `/ready` (503): shutting down.
    Draining,
    /// `/ready` (503): no backend is healthy, or the executor stopped.
    Unavailable,
}

/// `GET /health` and `GET /ready`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct Status {
    /// The model id, when ready.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) model: Option<String>,
    /// Why not ready, when unavailable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) reason: Option<String>,
    /// The state.
    pub(crate) status: Health,
}

impl Status {
    /// Just a state.
    pub(crate) fn of(status: Health) -> Self {
        Self {
            model: None,
            reason: None,
            status,
        }
    }
}

#[cfg(test)]
#[path = "responses_tests.rs"]
mod tests;
