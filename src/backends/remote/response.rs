//! Reading one `/v1/completions` choice from whichever engine answered: its text, why it
//! ended, its per-token logprobs and its usage in the engine's own tokens.
//!
//! Every engine trims a matched stop string from `text` (OpenAI semantics) but says which one
//! matched differently; a strategy's step ends at its delimiter, so the delimiter is put back:
//! - vLLM: `choices[i].stop_reason`, the stop string or stop token id, `null` at EOS
//!   (`vllm/entrypoints/openai/protocol.py`, `CompletionResponseChoice`);
//! - SGLang: `choices[i].matched_stop`, the stop string or token id
//!   (`python/sglang/srt/entrypoints/openai/protocol.py`, `CompletionResponseChoice`);
//! - llama.cpp's server: `stop_type` (`eos`, `word`, `limit`) and `stopping_word`
//!   (`tools/server/server-task.cpp`, `server_task_result_cmpl_final::to_json_non_oaicompat`).
//!   Its `/v1/completions` shape carries them only under `__verbose` (a server started with
//!   `--verbose`); they are read there, on the choice or on the response. Its logprobs come in
//!   the chat shape (`logprobs.content[]`), also read;
//! - llama-cpp-python's server: no field. Its `logprobs.tokens` still list every generated
//!   token, those of the stop string included, so the tokens' text runs on past `text`, and
//!   what follows `text` starts with the stop string that matched (at EOS they end with it);
//! - Ponder: `stop_reason`, as vLLM.
//!
//! Recorded responses of each engine are in `tests/fixtures/backends/`.
#![deny(clippy::indexing_slicing)]

use ponder_strategies::{GeneratorError, StopKind, Stops, TokenInfo};
use serde_json::Value;

/// One choice, read.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Completion {
    /// The generated text, the matched stop string included.
    pub text: String,
    /// Why it ended.
    pub stop: StopKind,
    /// Per generated token, its logprob and alternatives.
    pub tokens: Vec<TokenInfo>,
    /// The engine's prompt tokens (`usage.prompt_tokens`).
    pub prompt_tokens: Option<u64>,
    /// Prompt tokens the engine served from its cache.
    pub cached_tokens: u64,
    /// The engine's generated tokens (`usage.completion_tokens`).
    pub completion_tokens: Option<u64>,
}

/// The stop string `field` names, or `Some(None)` when it names a stop token (an integer:
/// EOS-like), `None` when absent.
fn named_stop(field: Option<&Value>) -> Option<Option<String>> {
    match field? {
        Value::String(s) if !s.is_empty() => Some(Some(s.clone())),
        Value::Number(_) => Some(None),
        _ => None,
    }
}

/// llama.cpp's own field `name`: on the choice, the response, or its `__verbose` copy.
fn field<'a>(v: &'a Value, choice: &'a Value, name: &str) -> Option<&'a Value> {
    choice
        .get(name)
        .or_else(|| v.get(name))
        .or_else(|| v.get("__verbose").and_then(|x| x.get(name)))
}

/// llama-cpp-python: the stop string the logprob tokens show after `text`.
fn stop_after_text(choice: &Value, text: &str, stops: &Stops) -> Option<String> {
    let pieces = choice.pointer("/logprobs/tokens")?.as_array()?;
    let all: String = pieces.iter().filter_map(Value::as_str).collect();
    let rest = all.strip_prefix(text)?;
    stops.starting(rest).map(str::to_string)
}

/// Reads `choices[0]` of `v`; `stops` are the stop strings the request sent.
pub(super) fn parse(v: &Value, stops: &Stops) -> Result<Completion, GeneratorError> {
    let bad = |missing: &'static str| GeneratorError::MalformedResponse {
        missing,
        shown: v.to_string().chars().take(300).collect(),
    };
    let choice = v
        .get("choices")
        .and_then(|c| c.get(0))
        .ok_or_else(|| bad("choices"))?;
    let mut text = choice
        .get("text")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("choices[0].text"))?
        .to_string();
    let finish = choice.get("finish_reason").and_then(Value::as_str);
    let stop_type = field(v, choice, "stop_type").and_then(Value::as_str);
    let matched: Option<String> = if finish == Some("length") || stop_type == Some("limit") {
        None
    } else if let Some(m) = named_stop(choice.get("stop_reason")) {
        m
    } else if let Some(m) = named_stop(choice.get("matched_stop")) {
        m
    } else if stop_type == Some("word") {
        field(v, choice, "stopping_word")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    } else if stop_type == Some("eos") {
        None
    } else {
        stop_after_text(choice, &text, stops)
    };
    let stop = match (finish, stop_type, &matched) {
        (Some("length"), _, _) | (_, Some("limit"), _) => StopKind::Length,
        (_, _, Some(m)) => {
            // Some engines (vLLM's include_stop_str_in_output) keep it already.
            if !text.ends_with(m.as_str()) {
                text.push_str(m);
            }
            StopKind::Stop
        }
        _ => StopKind::Eos,
    };
    let tokens = choice.get("logprobs").map(token_infos).unwrap_or_default();
    let count = |path: &str| v.pointer(path).and_then(Value::as_u64);
    let prompt_tokens = count("/usage/prompt_tokens").or_else(|| count("/tokens_evaluated"));
    let cached_tokens = count("/usage/prompt_tokens_details/cached_tokens")
        .or_else(|| count("/tokens_cached"))
        .unwrap_or(0)
        .min(prompt_tokens.unwrap_or(0));
    let completion_tokens =
        count("/usage/completion_tokens").or_else(|| count("/tokens_predicted"));
    Ok(Completion {
        text,
        stop,
        tokens,
        prompt_tokens,
        cached_tokens,
        completion_tokens,
    })
}

/// Per-token logprobs from a completions `logprobs` object (`token_logprobs`, `top_logprobs`).
pub(super) fn token_infos(lp: &Value) -> Vec<TokenInfo> {
    // llama.cpp's server: `content: [{token, logprob, top_logprobs: [{token, logprob}]}]`.
    if let Some(content) = lp.get("content").and_then(Value::as_array) {
        return content
            .iter()
            .map(|t| {
                let mut top: Vec<(String, f32)> = t
                    .get("top_logprobs")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|a| {
                        let tok = a.get("token")?.as_str()?;
                        Some((tok.to_string(), a.get("logprob")?.as_f64()? as f32))
                    })
                    .collect();
                top.sort_by(|a, b| b.1.total_cmp(&a.1));
                TokenInfo {
                    text: t
                        .get("token")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    logprob: t.get("logprob").and_then(Value::as_f64).unwrap_or(0.0) as f32,
                    top,
                }
            })
            .collect();
    }
    let Some(lps) = lp.get("token_logprobs").and_then(Value::as_array) else {
        return Vec::new();
    };
    let tops = lp.get("top_logprobs").and_then(Value::as_array);
    let texts = lp.get("tokens").and_then(Value::as_array);
    lps.iter()
        .enumerate()
        .map(|(i, l)| {
            let mut top: Vec<(String, f32)> = tops
                .and_then(|t| t.get(i))
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .filter_map(|(k, v)| v.as_f64().map(|f| (k.clone(), f as f32)))
                        .collect()
                })
                .unwrap_or_default();
            top.sort_by(|a, b| b.1.total_cmp(&a.1));
            TokenInfo {
                text: texts
                    .and_then(|t| t.get(i))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                logprob: l.as_f64().unwrap_or(0.0) as f32,
                top,
            }
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn logprobs_are_read_best_first() {
        let v = json!({"token_logprobs": [-0.5], "top_logprobs": [{"a": -2.0, "b": -0.5}]});
        let t = token_infos(&v);
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].top[0].0, "b");
    }

    #[test]
    fn a_stop_token_id_is_an_end_of_sequence() {
        let v = json!({"choices": [{"text": "x", "finish_reason": "stop", "stop_reason": 151645}]});
        let c = parse(&v, &Stops::new(["\n\n"])).unwrap();
        assert_eq!((c.text.as_str(), c.stop), ("x", StopKind::Eos));
    }

    #[test]
    fn without_any_stop_evidence_it_is_an_end_of_sequence() {
        let v = json!({"choices": [{"text": "x", "finish_reason": "stop"}]});
        assert_eq!(
            parse(&v, &Stops::new(["\n\n"])).unwrap().stop,
            StopKind::Eos
        );
    }
}
