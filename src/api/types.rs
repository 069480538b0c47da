//! Wire types of the OpenAI-compatible endpoints, as parsed (lenient, OpenAI's names) and as
//! answered. Parsing accepts what OpenAI clients send (unknown fields are ignored, `content` may
//! be a string or a list of parts, `stop` a string or a list); [`super::validate`] then turns a
//! parsed request into a `Valid…` one, once.
#![deny(clippy::indexing_slicing)]

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `stop`: one string or several.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum StopField {
    /// One stop string.
    One(String),
    /// Several.
    Many(Vec<String>),
}

/// `stream_options`.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct StreamOptions {
    /// Send a last chunk with the usage.
    #[serde(default)]
    pub(crate) include_usage: bool,
}

/// A chat message as sent.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct MessageIn {
    /// `system`, `developer`, `user` or `assistant` (`tool` is read as `user`).
    pub(crate) role: String,
    /// A string, a list of `{"type": "text", "text": …}` parts, or null.
    #[serde(default)]
    pub(crate) content: Value,
}

/// Fields shared by `/v1/chat/completions` and `/v1/completions`, and Ponder's extensions.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct CommonParams {
    /// `ponder`, `ponder/<strategy>`, or this server's model id.
    pub(crate) model: String,
    /// Most tokens to generate (legacy name).
    pub(crate) max_tokens: Option<i64>,
    /// Most tokens to generate.
    pub(crate) max_completion_tokens: Option<i64>,
    /// Sampling temperature in [0, 2].
    pub(crate) temperature: Option<f64>,
    /// Nucleus sampling in (0, 1].
    pub(crate) top_p: Option<f64>,
    /// Extension (vLLM's name): keep the `k` most likely tokens; 0 disables.
    pub(crate) top_k: Option<i64>,
    /// Extension (vLLM's name): drop tokens less likely than `min_p` × the most likely.
    pub(crate) min_p: Option<f64>,
    /// Choices to generate.
    pub(crate) n: Option<i64>,
    /// Stop strings.
    pub(crate) stop: Option<StopField>,
    /// Seed for a replayable result (any 64-bit integer, signed or not).
    pub(crate) seed: Option<serde_json::Number>,
    /// Stream chunks over SSE.
    pub(crate) stream: Option<bool>,
    /// Streaming options.
    pub(crate) stream_options: Option<StreamOptions>,
    /// `low`, `medium` or `high`: maps to a token budget.
    pub(crate) reasoning_effort: Option<String>,
    /// Ponder: the token budget of a strategy.
    pub(crate) budget_tokens: Option<i64>,
    /// Ponder: stop with the best answer so far after this many milliseconds.
    pub(crate) deadline_ms: Option<i64>,
    /// Ponder: the strategy to run.
    pub(crate) strategy: Option<String>,
    /// Ponder: the strategy's parameters.
    pub(crate) strategy_params: Option<Value>,
    /// Ponder: include the search tree in the response.
    pub(crate) return_trace: Option<bool>,
    /// Penalises tokens generated so far, once each; in [-2, 2].
    pub(crate) presence_penalty: Option<f64>,
    /// Penalises tokens generated so far, per occurrence; in [-2, 2].
    pub(crate) frequency_penalty: Option<f64>,
    /// Extension (vLLM's name): CTRL's penalty on tokens of prompt and output; > 0, 1 disables.
    pub(crate) repetition_penalty: Option<f64>,
    /// Token id (as a string) to a bias in [-100, 100] added to its logit; -100 bans it.
    pub(crate) logit_bias: Option<Value>,
    /// Only `{"type": "text"}` is served; JSON modes are refused (no constrained decoding).
    pub(crate) response_format: Option<Value>,
    /// Refused when non-empty: this server does not call tools.
    pub(crate) tools: Option<Value>,
    /// Refused unless `"none"`.
    pub(crate) tool_choice: Option<Value>,
    /// The deprecated form of `tools`; refused when non-empty.
    pub(crate) functions: Option<Value>,
    /// The deprecated form of `tool_choice`; refused unless `"none"`.
    pub(crate) function_call: Option<Value>,
}

/// `POST /v1/chat/completions`.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct ChatCompletionRequest {
    /// The conversation.
    pub(crate) messages: Vec<MessageIn>,
    /// Return token logprobs.
    pub(crate) logprobs: Option<bool>,
    /// Alternatives per token (needs `logprobs`).
    pub(crate) top_logprobs: Option<i64>,
    /// The shared fields.
    #[serde(flatten)]
    pub(crate) common: CommonParams,
}

/// `prompt`: a string or a one-element list.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum PromptField {
    /// One prompt.
    One(String),
    /// Several prompts (only one is supported).
    Many(Vec<String>),
}

/// `POST /v1/completions`.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct CompletionRequest {
    /// The text to continue.
    pub(crate) prompt: PromptField,
    /// Alternatives per token (0..=5 in OpenAI's legacy API).
    pub(crate) logprobs: Option<i64>,
    /// Prepend the prompt to the completion.
    pub(crate) echo: Option<bool>,
    /// Text after the completion (insertion); refused.
    pub(crate) suffix: Option<Value>,
    /// Server-side candidates to pick the best of; only 1 (or `n`) is served.
    pub(crate) best_of: Option<i64>,
    /// The shared fields.
    #[serde(flatten)]
    pub(crate) common: CommonParams,
}

/// `POST /v1/reason`: Ponder's native endpoint.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReasonBody {
    /// The question.
    pub(crate) problem: String,
    /// Strategy name [default: the server's default strategy].
    pub(crate) strategy: Option<String>,
    /// Strategy parameters.
    #[serde(default)]
    pub(crate) params: Value,
    /// Token budget [default 4096].
    pub(crate) budget_tokens: Option<i64>,
    /// Deadline in milliseconds.
    pub(crate) deadline_ms: Option<i64>,
    /// Seed [default 0].
    pub(crate) seed: Option<serde_json::Number>,
}

/// `usage.prompt_tokens_details`.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct PromptTokensDetails {
    /// Prompt tokens served from the prefix cache.
    pub(crate) cached_tokens: u64,
}

/// `usage.completion_tokens_details`.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct CompletionTokensDetails {
    /// Tokens generated that are not in the returned text (search branches, probes).
    pub(crate) reasoning_tokens: u64,
}

/// OpenAI's usage object.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct UsageOut {
    /// Prompt tokens.
    pub(crate) prompt_tokens: u64,
    /// Tokens generated.
    pub(crate) completion_tokens: u64,
    /// Their sum.
    pub(crate) total_tokens: u64,
    /// Prompt details.
    pub(crate) prompt_tokens_details: PromptTokensDetails,
    /// Completion details.
    pub(crate) completion_tokens_details: CompletionTokensDetails,
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

/// One alternative in chat logprobs.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct TopLogprob {
    /// Token text.
    pub(crate) token: String,
    /// Its logprob.
    pub(crate) logprob: f32,
    /// Its UTF-8 bytes.
    pub(crate) bytes: Vec<u8>,
}

/// One generated token in chat logprobs.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct TokenLogprob {
    /// Token text.
    pub(crate) token: String,
    /// Its logprob.
    pub(crate) logprob: f32,
    /// Its UTF-8 bytes.
    pub(crate) bytes: Vec<u8>,
    /// The most likely alternatives.
    pub(crate) top_logprobs: Vec<TopLogprob>,
}

/// Chat `logprobs`.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ChatLogprobs {
    /// Per generated token.
    pub(crate) content: Vec<TokenLogprob>,
}
