//! The `/v1/completions` body sent to a backend, every field inside what each engine's own
//! request model accepts: vLLM, SGLang, llama.cpp's server and llama-cpp-python's server, at
//! the versions and source lines tabled in `tests/fixtures/backends/CONSTRAINTS.md`. The engine
//! fixtures refuse requests by that table, so a field that leaves an engine's range fails a
//! test.
//!
//! What that asks of the body:
//! - `seed`: Ponder's seeds are full-range u64 ([`Context::seed_for`], the API's random seed);
//!   vLLM takes only int64 (`protocol.py`, `CompletionRequest.seed`, negative ones included)
//!   and answered 400 to the other half. The wire seed is the same 64 bits read as a signed
//!   integer ([`wire_seed`]): inside int64 for every seed, and lossless — a Ponder behind
//!   Ponder wraps a negative seed back (OpenAI's seeds are signed), so a search through it
//!   replays the in-process one; llama.cpp reads the low 32 bits either way. The local engine
//!   keeps the full seed, so local searches replay as before.
//! - `max_tokens`: at least 1 (the caller answers a zero cap without a request) and at most
//!   `i32::MAX` (llama.cpp's `n_predict`).
//! - `logprobs`: at most 20, vLLM's default `max_logprobs` (strategies and the API already
//!   refuse more; the cap here keeps the wire inside it whatever the caller).
//! - `top_k`: only when on. Off is 0 for vLLM and llama.cpp, -1 for SGLang (which refuses 0)
//!   and refused below 0 by llama-cpp-python, so no value means "off" everywhere.
//! - `n` is never sent (one request per branch, each with its own seed); penalties, biases and
//!   stop strings only when set, stop strings never empty ([`Stops`]), at most four
//!   ([`MAX_WIRE_STOPS`]).
//! - `stream` with `stream_options.include_usage`, so vLLM and SGLang end the stream with the
//!   usage (llama.cpp's server always does; llama-cpp-python ignores it).
//!
//! [`Context::seed_for`]: ponder_strategies::Context::seed_for
#![deny(clippy::indexing_slicing)]

use ponder_strategies::{LogitAdjust, Sampling, Stops};
use serde_json::{json, Value};

/// Most alternatives per token any engine accepts by default (vLLM's `max_logprobs`).
pub(super) const MAX_WIRE_LOGPROBS: usize = 20;

/// Most stop strings one request carries: vLLM 0.32.0 refuses more (`VLLM_MAX_STOP_STRINGS`,
/// `generate/base/protocol.py`), as OpenAI's API does. A request with more sends the first
/// ones (a strategy's own delimiters come first) and the generator cuts at the others itself.
pub(super) const MAX_WIRE_STOPS: usize = 4;

/// `seed` as sent: its 64 bits as a signed integer, a valid int64 for every engine and
/// lossless (`wire_seed(s) as u64 == s`).
pub(super) fn wire_seed(seed: u64) -> i64 {
    i64::from_ne_bytes(seed.to_ne_bytes())
}

/// One continuation request.
#[derive(Debug, Clone, Copy)]
pub(super) struct Completion<'a> {
    /// The `model` field.
    pub model: &'a str,
    /// The text continued.
    pub prompt: &'a str,
    /// Tokens to generate at most (at least 1).
    pub max_tokens: usize,
    /// Sampling, the seed full-range.
    pub sampling: &'a Sampling,
    /// Penalties and biases.
    pub logits: &'a LogitAdjust,
    /// Stop strings.
    pub stops: &'a Stops,
    /// Whether the reply is streamed (SSE).
    pub stream: bool,
}

impl Completion<'_> {
    /// The JSON body.
    ///
    /// Both port types are destructured whole, so a field added to either does not compile
    /// until it is sent (or said not to be) here.
    pub(super) fn body(&self) -> Value {
        let Sampling {
            temperature,
            top_p,
            top_k,
            min_p,
            seed,
            top_logprobs,
        } = *self.sampling;
        let LogitAdjust {
            repetition_penalty,
            presence_penalty,
            frequency_penalty,
            logit_bias,
        } = self.logits;
        let mut body = json!({
            "model": self.model,
            "prompt": self.prompt,
            "max_tokens": self.max_tokens.clamp(1, i32::MAX as usize),
            "temperature": temperature,
            "top_p": top_p,
            "seed": wire_seed(seed),
            "logprobs": top_logprobs.min(MAX_WIRE_LOGPROBS),
            // Explicit, so servers with other defaults (llama-cpp-python: min_p 0.05,
            // repeat_penalty 1.1) sample as asked; servers ignore names they do not know.
            "min_p": min_p,
            "repeat_penalty": repetition_penalty,
        });
        let Some(fields) = body.as_object_mut() else {
            return body;
        };
        if self.stream {
            // vLLM refuses `stream_options` without `stream`.
            fields.insert("stream".into(), json!(true));
            fields.insert("stream_options".into(), json!({"include_usage": true}));
        }
        if top_k > 0 {
            fields.insert("top_k".into(), json!(top_k));
        }
        if !self.stops.is_empty() {
            fields.insert("stop".into(), json!(self.stops.as_slice()));
        }
        // OpenAI's penalties and biases, sent only when set (plain decoding passes them).
        if *repetition_penalty != 1.0 {
            fields.insert("repetition_penalty".into(), json!(repetition_penalty));
        }
        if *presence_penalty != 0.0 {
            fields.insert("presence_penalty".into(), json!(presence_penalty));
        }
        if *frequency_penalty != 0.0 {
            fields.insert("frequency_penalty".into(), json!(frequency_penalty));
        }
        if !logit_bias.is_empty() {
            let bias: serde_json::Map<String, Value> = logit_bias
                .iter()
                .map(|(t, b)| (t.to_string(), json!(b)))
                .collect();
            fields.insert("logit_bias".into(), Value::Object(bias));
        }
        body
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn every_seed_goes_out_as_a_valid_int64_losslessly_and_small_seeds_unchanged() {
        for seed in [0, 1, 42, i64::MAX as u64, i64::MAX as u64 + 1, u64::MAX] {
            let w = wire_seed(seed);
            assert_eq!(u64::from_ne_bytes(w.to_ne_bytes()), seed, "{seed} -> {w}");
            if seed <= i64::MAX as u64 {
                assert_eq!(w as u64, seed);
            }
        }
    }

    #[test]
    fn the_body_keeps_every_field_inside_the_engines_ranges() {
        let sampling = Sampling {
            seed: u64::MAX,
            top_logprobs: 50,
            ..Sampling::default()
        };
        let stops = Stops::new(["\n\n", ""]);
        let body = Completion {
            model: "m",
            prompt: "p",
            max_tokens: usize::MAX,
            sampling: &sampling,
            logits: &LogitAdjust::default(),
            stops: &stops,
            stream: true,
        }
        .body();
        assert_eq!(body["seed"], json!(-1));
        assert_eq!(body["logprobs"], json!(20));
        assert_eq!(body["max_tokens"], json!(i32::MAX));
        assert_eq!(body["stop"], json!(["\n\n"]));
        assert!(body.get("top_k").is_none() && body.get("n").is_none());
        assert!(body.get("repetition_penalty").is_none());
        assert_eq!(body["stream_options"]["include_usage"], json!(true));
    }
}
