//! The engines' own request validation on `/v1/completions`, transcribed from their source at
//! the pinned versions in `tests/fixtures/backends/CONSTRAINTS.md` (each rule cites its line
//! there): the replay fixtures refuse a request as the engine would, with its status, so a
//! field Ponder sends outside an engine's range fails a test instead of a deployment.

use serde_json::Value;

/// The engine a fixture stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Engine {
    /// vLLM 0.32.0.
    Vllm,
    /// SGLang 0.5.3.
    Sglang,
    /// llama.cpp's server, as vendored by llama-cpp-python 0.3.36.
    LlamaCppServer,
    /// llama-cpp-python 0.3.36's server.
    LlamaCppPython,
    /// `ponder serve` (its own API tests validate it).
    Ponder,
}

/// `--parallel` of the llama.cpp server the fixture stands for (`n` must not exceed it).
const LLAMA_SERVER_SLOTS: i64 = 4;
/// vLLM's default `max_logprobs` (`vllm/config/model.py:282`).
const VLLM_MAX_LOGPROBS: i64 = 20;
/// vLLM's `VLLM_MAX_STOP_STRINGS` default (`vllm/envs.py:1159`).
const VLLM_MAX_STOP_STRINGS: usize = 4;
/// vLLM's `VLLM_MAX_N_SEQUENCES` default (`vllm/envs.py:1149-1150`).
const VLLM_MAX_N_SEQUENCES: i64 = 16_384;
/// vLLM's highest temperature (`sampling_params.py:653-670`).
const VLLM_MAX_TEMPERATURE: f64 = 2.0;
/// `max_model_len` of the server the vLLM fixture stands for: the fixtures' model's
/// (SmolLM2's `max_position_embeddings`).
const VLLM_MAX_MODEL_LEN: i64 = 8_192;
/// The vocabulary of the fixtures' model (SmolLM2), for `logit_bias` ids.
const VOCAB: i64 = 49_152;
/// vLLM's `_SAMPLING_EPS`: a temperature below it is greedy.
const SAMPLING_EPS: f64 = 1e-5;

impl Engine {
    /// The engine of a fixture, by its `engine` field.
    pub(crate) fn of(fixture: &Value) -> Self {
        match fixture["engine"].as_str().unwrap_or("") {
            "vllm" => Self::Vllm,
            "sglang" => Self::Sglang,
            "llama.cpp server" => Self::LlamaCppServer,
            "llama-cpp-python server" => Self::LlamaCppPython,
            _ => Self::Ponder,
        }
    }

    /// The status this engine answers a refused request with.
    pub(crate) fn refusal_status(self) -> u16 {
        match self {
            // FastAPI's pydantic validation error.
            Self::LlamaCppPython => 422,
            _ => 400,
        }
    }
}

fn num(body: &Value, field: &str) -> Option<f64> {
    body.get(field)
        .filter(|v| !v.is_null())
        .and_then(Value::as_f64)
}

/// An integer field: `Ok(None)` when absent or null, `Err` when not an integer.
fn int(body: &Value, field: &str) -> Result<Option<i64>, String> {
    match body.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_i64()
            .map(Some)
            .ok_or_else(|| format!("{field}: {v} is not a valid int64")),
    }
}

/// A field any integer is valid for (Python's unbounded `int`).
fn any_int(body: &Value, field: &str) -> Result<(), String> {
    match body.get(field) {
        None | Some(Value::Null) => Ok(()),
        Some(v) => check(v.is_i64() || v.is_u64(), || {
            format!("{field}: {v} is not an integer")
        }),
    }
}

fn check(ok: bool, message: impl FnOnce() -> String) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(message())
    }
}

fn in_range(body: &Value, field: &str, lo: f64, hi: f64) -> Result<(), String> {
    match num(body, field) {
        Some(v) => check(v >= lo && v <= hi, || {
            format!("{field} must be in [{lo}, {hi}], got {v}")
        }),
        None => Ok(()),
    }
}

fn logit_bias_ids(body: &Value) -> Result<(), String> {
    let Some(bias) = body.get("logit_bias").and_then(Value::as_object) else {
        return Ok(());
    };
    for key in bias.keys() {
        let id: i64 = key
            .parse()
            .map_err(|_| format!("logit_bias key {key:?} is not a token id"))?;
        check((0..VOCAB).contains(&id), || {
            format!("logit_bias token id {id} is out of the vocabulary")
        })?;
    }
    Ok(())
}

/// Why `engine` refuses `body`, if it does.
pub(crate) fn validate(engine: Engine, body: &Value) -> Result<(), String> {
    match engine {
        Engine::Vllm => vllm(body),
        Engine::Sglang => sglang(body),
        Engine::LlamaCppServer => llama_server(body),
        Engine::LlamaCppPython => llama_cpp_python(body),
        Engine::Ponder => Ok(()),
    }
}

fn vllm(body: &Value) -> Result<(), String> {
    // P = entrypoints/openai/completion/protocol.py, GP = entrypoints/generate/base/protocol.py,
    // SP = sampling_params.py (`_verify_args`, `verify`), RP = renderers/params.py.
    int(body, "seed")?; // P:66 (int64: _INT64_MIN/_INT64_MAX, P:44-45)
    if let Some(lp) = int(body, "logprobs")? {
        check(lp >= 0 || lp == -1, || {
            "`logprobs` must be a non-negative value or -1.".into() // P:565-574
        })?;
        let asked = if lp == -1 { VOCAB } else { lp };
        check(asked <= VLLM_MAX_LOGPROBS, || {
            // SP:919-934 (-1 counts as the whole vocabulary)
            format!("Requested sample logprobs of {asked}, which is greater than max allowed: 20")
        })?;
    }
    if let Some(m) = int(body, "max_tokens")? {
        check(m >= 1, || {
            format!("max_tokens must be at least 1, got {m}.")
        })?; // SP:688-693
        check(m <= VLLM_MAX_MODEL_LEN, || {
            format!(
                "'max_tokens' is too large: {m}. This model's maximum context length is \
                 {VLLM_MAX_MODEL_LEN} tokens"
            )
        })?; // RP:256-268
    }
    let n = int(body, "n")?.unwrap_or(1);
    check((1..=VLLM_MAX_N_SEQUENCES).contains(&n), || {
        format!("n must be at least 1 and at most {VLLM_MAX_N_SEQUENCES}, got {n}.")
    })?; // SP:46-59
    in_range(body, "presence_penalty", -2.0, 2.0)?; // SP:635-638
    in_range(body, "frequency_penalty", -2.0, 2.0)?; // SP:639-642
    if let Some(r) = num(body, "repetition_penalty") {
        check(r.is_finite() && r > 0.0, || {
            format!("repetition_penalty must be a finite number greater than 0, got {r}")
        })?; // SP:643-652
    }
    let temperature = num(body, "temperature").unwrap_or(1.0);
    check(
        temperature.is_finite() && (0.0..=VLLM_MAX_TEMPERATURE).contains(&temperature),
        || format!("temperature must be in [0, {VLLM_MAX_TEMPERATURE}], got {temperature}"),
    )?; // SP:653-670
    if let Some(p) = num(body, "top_p") {
        check(p > 0.0 && p <= 1.0, || {
            format!("top_p must be in (0, 1], got {p}.")
        })?; // SP:671-676
    }
    if let Some(k) = int(body, "top_k")? {
        check(k >= -1, || {
            format!("top_k must be 0 (disable), or at least 1, got {k}.")
        })?; // SP:677-685
    }
    in_range(body, "min_p", 0.0, 1.0)?; // SP:686-687
    if let Some(stops) = body.get("stop").and_then(Value::as_array) {
        check(stops.len() <= VLLM_MAX_STOP_STRINGS, || {
            format!(
                "stop: at most {VLLM_MAX_STOP_STRINGS} items, got {}",
                stops.len()
            )
        })?; // GP:26-28
        let empty = stops.iter().any(|s| s.as_str().is_none_or(str::is_empty));
        check(!empty, || "stop cannot contain an empty string.".into())?; // SP:731-733
    }
    let streams = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let options = body.get("stream_options").is_some_and(|o| !o.is_null());
    check(!options || streams, || {
        "Stream options can only be defined when `stream=True`.".into() // P:578-589
    })?;
    if temperature < SAMPLING_EPS {
        check(n == 1, || {
            format!("n must be 1 when using greedy sampling, got {n}.")
        })?; // SP:612-617
    }
    logit_bias_ids(body) // keys int() (SP:488-513), ids in the vocabulary (SP:1072-1090)
}

fn sglang(body: &Value) -> Result<(), String> {
    // protocol.py:200: any int; not passed to sampling on /v1/completions.
    any_int(body, "seed")?;
    if let Some(m) = int(body, "max_tokens")? {
        check(m > 0, || "max_tokens must be positive".into())?; // protocol.py:243
    }
    // sampling_params.py SamplingParams.verify, after its defaults (top_k -1, temperature 1).
    let temperature = num(body, "temperature").unwrap_or(1.0);
    check(temperature >= 0.0, || {
        "temperature must be non-negative".into()
    })?; // :97
    if let Some(p) = num(body, "top_p") {
        check(p > 0.0 && p <= 1.0, || {
            format!("top_p must be in (0, 1], got {p}.")
        })?; // :101
    }
    in_range(body, "min_p", 0.0, 1.0)?; // :103
    if let Some(k) = int(body, "top_k")? {
        // :105, after __init__ turns -1 into the whole vocabulary and greedy into 1.
        let greedy = temperature < SAMPLING_EPS;
        check(greedy || k == -1 || k >= 1, || {
            format!("top_k must be -1 (disable) or at least 1, got {k}.")
        })?;
    }
    in_range(body, "frequency_penalty", -2.0, 2.0)?; // :109
    in_range(body, "presence_penalty", -2.0, 2.0)?; // :114
    in_range(body, "repetition_penalty", 0.0, 2.0)?; // :118
    logit_bias_ids(body) // :138
}

fn llama_server(body: &Value) -> Result<(), String> {
    // server-common.cpp:1049-1059
    if body.get("echo").and_then(Value::as_bool).unwrap_or(false) {
        return Err("Only no echo is supported".into());
    }
    for unsupported in ["best_of", "suffix"] {
        check(body.get(unsupported).is_none(), || {
            format!("Unsupported param: {unsupported}")
        })?;
    }
    // server-schema.cpp: hard limits throw (n_predict :44, n_cmpl :62); the others clamp.
    for name in ["n_predict", "max_tokens"] {
        if let Some(m) = int(body, name)? {
            check((-1..=i64::from(i32::MAX)).contains(&m), || {
                format!("Field '{name}': Value must be between -1 <= value <= 2147483647")
            })?;
        }
    }
    if let Some(n) = int(body, "n")? {
        check((1..=LLAMA_SERVER_SLOTS).contains(&n), || {
            format!("Field 'n': Value must be between 1 <= value <= {LLAMA_SERVER_SLOTS}")
        })?;
    }
    // seed (:176) is read as uint32 without a limit: any integer passes, truncated.
    any_int(body, "seed")
}

fn llama_cpp_python(body: &Value) -> Result<(), String> {
    // llama_cpp/server/types.py, CreateCompletionRequest's Field bounds.
    any_int(body, "seed")?; // :139, any int (truncated to 32 bits by the C sampler)
    if let Some(m) = int(body, "max_tokens")? {
        check(m >= 0, || "max_tokens: greater than or equal to 0".into())?; // :118
    }
    if let Some(lp) = int(body, "logprobs")? {
        check(lp >= 0, || "logprobs: greater than or equal to 0".into())?; // :131
    }
    in_range(body, "top_p", 0.0, 1.0)?; // :33
    in_range(body, "min_p", 0.0, 1.0)?; // :41
    if let Some(k) = int(body, "top_k")? {
        check(k >= 0, || "top_k: greater than or equal to 0".into())?; // :59
    }
    if let Some(r) = num(body, "repeat_penalty") {
        check(r >= 0.0, || {
            "repeat_penalty: greater than or equal to 0".into()
        })?; // :66
    }
    in_range(body, "presence_penalty", -2.0, 2.0)?; // :73
    in_range(body, "frequency_penalty", -2.0, 2.0) // :80
}

#[test]
fn the_rules_refuse_what_the_engines_refuse() {
    use serde_json::json;
    let ok = json!({"prompt": "x", "max_tokens": 8, "seed": i64::MAX, "logprobs": 5});
    for e in [
        Engine::Vllm,
        Engine::Sglang,
        Engine::LlamaCppServer,
        Engine::LlamaCppPython,
    ] {
        assert_eq!(validate(e, &ok), Ok(()), "{e:?}");
    }
    let big_seed = json!({"prompt": "x", "seed": u64::MAX});
    assert!(validate(Engine::Vllm, &big_seed).is_err());
    assert!(
        validate(Engine::LlamaCppServer, &big_seed).is_ok(),
        "truncated silently"
    );
    assert!(validate(Engine::Vllm, &json!({"prompt": "x", "logprobs": 21})).is_err());
    assert!(validate(Engine::Sglang, &json!({"prompt": "x", "top_k": 0})).is_err());
    assert!(validate(Engine::LlamaCppPython, &json!({"prompt": "x", "top_k": -1})).is_err());
    assert!(validate(Engine::LlamaCppServer, &json!({"prompt": "x", "n": 5})).is_err());
    let options = json!({"prompt": "x", "stream_options": {"include_usage": true}});
    assert!(validate(Engine::Vllm, &options).is_err());
    // New in vLLM 0.32.0 (CONSTRAINTS.md): at most 4 stop strings, temperature at most 2,
    // max_tokens within max_model_len, logprobs -1 past the model's request model.
    let stops = json!({"prompt": "x", "stop": ["a", "b", "c", "d", "e"]});
    assert!(validate(Engine::Vllm, &stops).is_err());
    assert!(validate(
        Engine::Vllm,
        &json!({"prompt": "x", "stop": ["a", "b", "c", "d"]})
    )
    .is_ok());
    assert!(validate(Engine::Vllm, &json!({"prompt": "x", "temperature": 2.5})).is_err());
    assert!(validate(Engine::Vllm, &json!({"prompt": "x", "max_tokens": 9000})).is_err());
    assert!(validate(Engine::Vllm, &json!({"prompt": "x", "logprobs": -1})).is_err());
}
