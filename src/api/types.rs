//! Wire types of the endpoints' requests, as parsed (lenient, OpenAI's names), and the usage and
//! logprob parts of their answers. Parsing accepts what OpenAI clients send (unknown fields are
//! ignored, `content` may be a string or a list of parts, `stop` a string or a list);
//! [`super::validate`] then turns a parsed request into a `Valid…` one, once. Each type derives
//! its OpenAPI schema (`ToSchema`, with the ranges the validation enforces); a field parsed as a
//! bare `Value` is described by a function in [`super::schemas`]. Limits that are this server's
//! configuration (not constants) are filled in per request by `openapi::apply_server_facts`.
#![deny(clippy::indexing_slicing)]

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::schemas;

/// `stop`: one string or several (its schema: [`schemas::stop`]).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum StopField {
    /// One stop string.
    One(String),
    /// Several.
    Many(Vec<String>),
}

/// `stream_options`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
pub(crate) struct StreamOptions {
    /// Send a last chunk with the usage.
    #[serde(default)]
    pub(crate) include_usage: bool,
}

/// A chat message as sent.
#[derive(Debug, Clone, Deserialize, ToSchema)]
pub(crate) struct MessageIn {
    /// `system`, `developer`, `user` or `assistant` (`tool` and `function` are read as `user`).
    #[schema(schema_with = schemas::message_role)]
    pub(crate) role: String,
    /// A string, a list of `{"type": "text", "text": …}` parts, or null.
    #[serde(default)]
    #[schema(schema_with = schemas::message_content)]
    pub(crate) content: Value,
}

/// Fields shared by `/v1/chat/completions` and `/v1/completions`, and Ponder's extensions.
/// Unknown fields are ignored (OpenAI clients send fields this server has no use for).
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
pub(crate) struct CommonParams {
    /// `ponder`, `ponder/<strategy>`, or this server's model id.
    #[schema(example = "ponder")]
    pub(crate) model: String,
    /// Most tokens to generate (legacy name).
    #[schema(minimum = 1)]
    pub(crate) max_tokens: Option<i64>,
    /// Most tokens to generate.
    #[schema(minimum = 1)]
    pub(crate) max_completion_tokens: Option<i64>,
    /// Sampling temperature in [0, 2].
    #[schema(minimum = 0, maximum = 2)]
    pub(crate) temperature: Option<f64>,
    /// Nucleus sampling in (0, 1].
    #[schema(exclusive_minimum = 0, maximum = 1)]
    pub(crate) top_p: Option<f64>,
    /// Extension (vLLM's name): keep the `k` most likely tokens; 0 disables.
    #[schema(minimum = 0, maximum = 4294967295_u64)]
    pub(crate) top_k: Option<i64>,
    /// Extension (vLLM's name): drop tokens less likely than `min_p` × the most likely.
    #[schema(minimum = 0, maximum = 1)]
    pub(crate) min_p: Option<f64>,
    /// Choices to generate (1 when a strategy runs: it chooses one answer).
    #[schema(minimum = 1)]
    pub(crate) n: Option<i64>,
    /// Stop strings.
    #[schema(schema_with = schemas::stop)]
    pub(crate) stop: Option<StopField>,
    /// Seed for a replayable result (any 64-bit integer; a negative one wraps).
    #[schema(value_type = Option<i64>)]
    pub(crate) seed: Option<serde_json::Number>,
    /// Stream chunks over SSE.
    pub(crate) stream: Option<bool>,
    /// Streaming options.
    pub(crate) stream_options: Option<StreamOptions>,
    /// Maps to a token budget, held to the server's budget limit.
    #[schema(schema_with = schemas::reasoning_effort)]
    pub(crate) reasoning_effort: Option<String>,
    /// Ponder: the token budget of a strategy.
    #[schema(minimum = 1)]
    pub(crate) budget_tokens: Option<i64>,
    /// Most thinking tokens (vLLM's name): runs `budget_forcing` with this
    /// `max_thinking_tokens` (the strategy, if named, must be `budget_forcing`).
    #[schema(minimum = 1)]
    pub(crate) thinking_token_budget: Option<i64>,
    /// SGLang's name for `thinking_token_budget`.
    #[schema(minimum = 1)]
    pub(crate) thinking_budget: Option<i64>,
    /// Ponder: stop with the best answer so far after this many milliseconds.
    #[schema(minimum = 1, maximum = 3600000)]
    pub(crate) deadline_ms: Option<i64>,
    /// Ponder: the strategy to run.
    pub(crate) strategy: Option<String>,
    /// Ponder: the strategy's parameters.
    #[schema(schema_with = schemas::strategy_params)]
    pub(crate) strategy_params: Option<Value>,
    /// Ponder: include the search tree in the response.
    pub(crate) return_trace: Option<bool>,
    /// Ponder: worked examples the router shows before the question, with a strategy only
    /// (0–8; the nearest of the server's pool, `ponder serve --exemplars`) [default: the
    /// server's `--shots`, else 0]. The response's `ponder.shots` names them.
    #[schema(minimum = 0, maximum = 8)]
    pub(crate) shots: Option<i64>,
    /// Penalises tokens generated so far, once each; in [-2, 2]. Not with a strategy.
    #[schema(minimum = -2, maximum = 2)]
    pub(crate) presence_penalty: Option<f64>,
    /// Penalises tokens generated so far, per occurrence; in [-2, 2]. Not with a strategy.
    #[schema(minimum = -2, maximum = 2)]
    pub(crate) frequency_penalty: Option<f64>,
    /// Extension (vLLM's name): CTRL's penalty on tokens of prompt and output; > 0, 1 disables.
    /// Not with a strategy.
    #[schema(exclusive_minimum = 0)]
    pub(crate) repetition_penalty: Option<f64>,
    /// Token id (as a string) to a bias in [-100, 100] added to its logit; -100 bans it.
    #[schema(schema_with = schemas::logit_bias)]
    pub(crate) logit_bias: Option<Value>,
    /// Only `{"type": "text"}` is served; JSON modes are refused (no constrained decoding).
    #[schema(schema_with = schemas::response_format)]
    pub(crate) response_format: Option<Value>,
    /// Refused when non-empty: this server does not call tools.
    #[schema(schema_with = schemas::no_tools)]
    pub(crate) tools: Option<Value>,
    /// Refused unless `"none"`.
    #[schema(schema_with = schemas::no_tool_choice)]
    pub(crate) tool_choice: Option<Value>,
    /// The deprecated form of `tools`; refused when non-empty.
    #[schema(schema_with = schemas::no_tools)]
    pub(crate) functions: Option<Value>,
    /// The deprecated form of `tool_choice`; refused unless `"none"`.
    #[schema(schema_with = schemas::no_tool_choice)]
    pub(crate) function_call: Option<Value>,
}

/// `POST /v1/chat/completions`. Unknown fields are ignored.
#[derive(Debug, Clone, Deserialize, ToSchema)]
pub(crate) struct ChatCompletionRequest {
    /// The conversation: at least one message, one of them a non-empty user message.
    #[schema(min_items = 1)]
    pub(crate) messages: Vec<MessageIn>,
    /// Return token logprobs.
    pub(crate) logprobs: Option<bool>,
    /// Alternatives per token (needs `logprobs`).
    #[schema(minimum = 0)]
    pub(crate) top_logprobs: Option<i64>,
    /// Extension (vLLM's name): variables for the model's chat template beside the
    /// conversation, e.g. `{"enable_thinking": false}` for Qwen3; with a strategy, every
    /// prompt of the search is rendered with them.
    #[schema(schema_with = schemas::chat_template_kwargs)]
    pub(crate) chat_template_kwargs: Option<Value>,
    /// Ponder: how this reply's thinking block is split off its content [default: the
    /// server's `--reasoning-parser`].
    #[schema(schema_with = schemas::reasoning_parser)]
    pub(crate) reasoning_parser: Option<String>,
    /// The shared fields.
    #[serde(flatten)]
    pub(crate) common: CommonParams,
}

/// `prompt`: a string, token ids, or a one-element list of either (its schema:
/// [`schemas::prompt`]).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum PromptField {
    /// One prompt.
    One(String),
    /// Several prompts (only one is supported).
    Many(Vec<String>),
    /// One prompt as token ids of the model's vocabulary (what lm-evaluation-harness's
    /// `local-completions` sends).
    Tokens(Vec<u32>),
    /// Several prompts as token ids (only one is supported).
    ManyTokens(Vec<Vec<u32>>),
}

/// `POST /v1/completions`. Unknown fields are ignored.
#[derive(Debug, Clone, Deserialize, ToSchema)]
pub(crate) struct CompletionRequest {
    /// The text to continue.
    #[schema(schema_with = schemas::prompt)]
    pub(crate) prompt: PromptField,
    /// Alternatives per token (0..=5 in OpenAI's legacy API).
    #[schema(minimum = 0)]
    pub(crate) logprobs: Option<i64>,
    /// Prepend the prompt (and, with `logprobs`, its logprobs) to the completion.
    #[schema(schema_with = schemas::echo)]
    pub(crate) echo: Option<bool>,
    /// Text after the completion (insertion): not supported, only null is served.
    #[schema(schema_with = schemas::suffix)]
    pub(crate) suffix: Option<Value>,
    /// Server-side candidates to pick the best of: only `n` (default 1) is served.
    #[schema(minimum = 1)]
    pub(crate) best_of: Option<i64>,
    /// The shared fields.
    #[serde(flatten)]
    pub(crate) common: CommonParams,
}

/// `POST /v1/reason`: Ponder's native endpoint. Unknown fields are refused.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = ReasonRequest)]
pub(crate) struct ReasonBody {
    /// The question (not blank).
    #[schema(min_length = 1, pattern = "\\S")]
    pub(crate) problem: String,
    /// Strategy name [default: the one the server runs at the request's budget, listed by
    /// `GET /v1/strategies`].
    pub(crate) strategy: Option<String>,
    /// Strategy parameters.
    #[serde(default)]
    #[schema(schema_with = schemas::strategy_params)]
    pub(crate) params: Value,
    /// Token budget [default: the server's default budget].
    #[schema(minimum = 1)]
    pub(crate) budget_tokens: Option<i64>,
    /// Deadline in milliseconds.
    #[schema(minimum = 1, maximum = 3600000)]
    pub(crate) deadline_ms: Option<i64>,
    /// Seed [default 0] (any 64-bit integer; a negative one wraps).
    #[schema(value_type = Option<i64>)]
    pub(crate) seed: Option<serde_json::Number>,
    /// Worked examples to show before the question, chosen by the router from the server's
    /// pool (the nearest by MiniLM embedding; `ponder serve --exemplars`) [default: the
    /// server's `--shots`, else 0]. The outcome's `shots` names them.
    #[schema(minimum = 0, maximum = 8)]
    pub(crate) shots: Option<i64>,
    /// Sampling temperature in [0, 2] of every branch [default: the strategy's].
    #[schema(minimum = 0, maximum = 2)]
    pub(crate) temperature: Option<f64>,
    /// Nucleus sampling in (0, 1] [default: the strategy's].
    #[schema(exclusive_minimum = 0, maximum = 1)]
    pub(crate) top_p: Option<f64>,
    /// Keep the `k` most likely tokens; 0 disables [default: the strategy's].
    #[schema(minimum = 0, maximum = 4294967295_u64)]
    pub(crate) top_k: Option<i64>,
    /// Drop tokens less likely than `min_p` × the most likely [default: the strategy's].
    #[schema(minimum = 0, maximum = 1)]
    pub(crate) min_p: Option<f64>,
    /// Stop strings: one ends the branch it appears in [default: none].
    #[schema(schema_with = schemas::stop)]
    pub(crate) stop: Option<StopField>,
    /// Most tokens one branch generates, over all its steps [default: the strategy's caps].
    #[schema(minimum = 1)]
    pub(crate) max_tokens: Option<i64>,
}

/// `usage.prompt_tokens_details`.
#[derive(Debug, Clone, Default, Serialize, ToSchema)]
pub(crate) struct PromptTokensDetails {
    /// Prompt tokens served from the prefix cache.
    pub(crate) cached_tokens: u64,
}

/// `usage.completion_tokens_details`.
#[derive(Debug, Clone, Default, Serialize, ToSchema)]
pub(crate) struct CompletionTokensDetails {
    /// Tokens generated that are not in the returned text (search branches, probes).
    pub(crate) reasoning_tokens: u64,
}

/// OpenAI's usage object. Fields in alphabetical order, as they have always been on the wire
/// (see [`super::responses`]).
#[derive(Debug, Clone, Default, Serialize, ToSchema)]
#[schema(as = CompletionUsage)]
pub(crate) struct UsageOut {
    /// Tokens generated.
    pub(crate) completion_tokens: u64,
    /// Completion details.
    pub(crate) completion_tokens_details: CompletionTokensDetails,
    /// Prompt tokens.
    pub(crate) prompt_tokens: u64,
    /// Prompt details.
    pub(crate) prompt_tokens_details: PromptTokensDetails,
    /// Their sum.
    pub(crate) total_tokens: u64,
}

impl UsageOut {
    /// Usage with `total_tokens` filled in.
    pub(crate) fn new(prompt: u64, completion: u64, cached: u64, reasoning: u64) -> Self {
        Self {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: prompt + completion,
            prompt_tokens_details: PromptTokensDetails {
                cached_tokens: cached,
            },
            completion_tokens_details: CompletionTokensDetails {
                reasoning_tokens: reasoning,
            },
        }
    }
}

// The logprob types: fields in alphabetical order and logprobs as `f64` (widened from the
// sampler's `f32`), which is how they have always been written on the wire.

/// One alternative in chat logprobs.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct TopLogprob {
    /// Its UTF-8 bytes.
    pub(crate) bytes: Vec<u8>,
    /// Its logprob.
    pub(crate) logprob: f64,
    /// Token text.
    pub(crate) token: String,
}

/// One generated token in chat logprobs.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct TokenLogprob {
    /// Its UTF-8 bytes.
    pub(crate) bytes: Vec<u8>,
    /// Its logprob.
    pub(crate) logprob: f64,
    /// Token text.
    pub(crate) token: String,
    /// The most likely alternatives.
    pub(crate) top_logprobs: Vec<TopLogprob>,
}

/// Chat `logprobs`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct ChatLogprobs {
    /// Per generated token.
    pub(crate) content: Vec<TokenLogprob>,
}

/// Legacy completion `logprobs` (OpenAI's `/v1/completions` shape).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct TextLogprobs {
    /// Byte offset of each token's text in the completion.
    pub(crate) text_offset: Vec<usize>,
    /// Each token's logprob (null for an echoed prompt's first token: nothing precedes it).
    pub(crate) token_logprobs: Vec<Option<f64>>,
    /// Each token's text.
    pub(crate) tokens: Vec<String>,
    /// Per token: the most likely alternatives' text to their logprob (null where
    /// `token_logprobs` is).
    pub(crate) top_logprobs: Vec<Option<std::collections::BTreeMap<String, f64>>>,
}

/// A choice's `logprobs` in its endpoint's shape (a chat body only ever holds the chat shape,
/// a text body the text one: `sse::Envelope::logprobs` builds them by the body's flavour).
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub(crate) enum Logprobs {
    /// `/v1/chat/completions`.
    Chat(ChatLogprobs),
    /// `/v1/completions`.
    Text(TextLogprobs),
}
