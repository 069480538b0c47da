//! Hostile input, as property tests that run on stable in CI (`fuzz/` has cargo-fuzz targets for
//! the same entry points, for long runs): truncated and mutated GGUF headers give typed errors,
//! arbitrary chat templates and messages never panic the renderer, and parameter extremes sent to
//! the real server never produce a 5xx. The request parser, validator and SSE encoder have their
//! properties beside the code (`src/api/hostile_tests.rs`); the answer extractor and LaTeX parser
//! in `verifiers/tests/properties.rs`.

use std::io::Write;

use ponder::api::Limits;
use ponder_engine::forward::{ChatTemplate, GgufFile, TextTokenizer};
use ponder_strategies::Turn;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{json, Value};

use crate::server::TestServer;

/// GGUF metadata value types (llama.cpp's numbering).
const U32: u32 = 4;
const F32: u32 = 6;
const STRING: u32 = 8;
const ARRAY: u32 = 9;

fn put_str(b: &mut Vec<u8>, s: &str) {
    b.extend((s.len() as u64).to_le_bytes());
    b.extend(s.as_bytes());
}

fn put_key(b: &mut Vec<u8>, key: &str, ty: u32) {
    put_str(b, key);
    b.extend(ty.to_le_bytes());
}

/// A small valid GGUF v3 llama file: hyper-parameters, a four-token vocabulary, an alignment and
/// one F32 embedding tensor.
fn small_gguf(alignment: u32, embd_dims: &[u64]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend(b"GGUF");
    b.extend(3u32.to_le_bytes());
    b.extend(1u64.to_le_bytes()); // tensors
    b.extend(10u64.to_le_bytes()); // metadata entries
    put_key(&mut b, "general.architecture", STRING);
    put_str(&mut b, "llama");
    put_key(&mut b, "general.alignment", U32);
    b.extend(alignment.to_le_bytes());
    for (k, v) in [
        ("llama.embedding_length", 8u32),
        ("llama.attention.head_count", 2),
        ("llama.feed_forward_length", 16),
        ("llama.block_count", 1),
        ("llama.context_length", 64),
    ] {
        put_key(&mut b, k, U32);
        b.extend(v.to_le_bytes());
    }
    put_key(&mut b, "llama.rope.freq_base", F32);
    b.extend(10_000f32.to_le_bytes());
    put_key(&mut b, "tokenizer.ggml.model", STRING);
    put_str(&mut b, "gpt2");
    put_key(&mut b, "tokenizer.ggml.tokens", ARRAY);
    b.extend(STRING.to_le_bytes());
    b.extend(4u64.to_le_bytes());
    for t in ["a", "b", "ab", "<eos>"] {
        put_str(&mut b, t);
    }
    put_str(&mut b, "token_embd.weight");
    b.extend((embd_dims.len() as u32).to_le_bytes());
    for d in embd_dims {
        b.extend(d.to_le_bytes());
    }
    b.extend(0u32.to_le_bytes()); // F32
    b.extend(0u64.to_le_bytes());
    while b.len() % 32 != 0 {
        b.push(0);
    }
    b.extend(vec![0u8; 4 * 8 * 4]);
    b
}

/// Opens `bytes` as a GGUF file and reads everything the loader reads before the weights.
fn read_all(bytes: &[u8]) -> Result<(), String> {
    let mut f = tempfile::NamedTempFile::new().map_err(|e| e.to_string())?;
    f.write_all(bytes).map_err(|e| e.to_string())?;
    let gguf = GgufFile::open(f.path()).map_err(|e| e.to_string())?;
    gguf.config().map_err(|e| e.to_string())?;
    TextTokenizer::from_gguf(&gguf).map_err(|e| e.to_string())?;
    Ok(())
}

#[test]
fn the_small_gguf_is_valid() {
    let bytes = small_gguf(32, &[8, 4]);
    let mut f = tempfile::NamedTempFile::new().expect("temp");
    f.write_all(&bytes).expect("write");
    let gguf = GgufFile::open(f.path()).expect("open");
    let config = gguf.config().expect("config");
    assert_eq!(
        (config.vocab_size, config.hidden_size, config.num_layers),
        (4, 8, 1)
    );
}

#[test]
fn a_zero_alignment_is_a_corrupt_file_not_a_division_by_zero() {
    let err = read_all(&small_gguf(0, &[8, 4])).expect_err("must fail");
    assert!(err.contains("not a valid GGUF"), "{err}");
}

#[test]
fn an_embedding_without_dimensions_is_a_typed_error_not_an_index_panic() {
    let err = read_all(&small_gguf(32, &[])).expect_err("must fail");
    assert!(err.contains("token_embd"), "{err}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn truncated_gguf_headers_give_errors_not_panics(cut in 0usize..400) {
        let bytes = small_gguf(32, &[8, 4]);
        let _ = read_all(&bytes[..cut.min(bytes.len())]);
    }

    #[test]
    fn mutated_gguf_headers_give_errors_not_panics(
        edits in prop::collection::vec((0usize..400, any::<u8>()), 1..6),
        wide in prop::option::of((0usize..400, prop_oneof![Just(0u64), Just(u64::MAX), Just(1 << 32), Just(1 << 40), any::<u64>()])),
    ) {
        let mut bytes = small_gguf(32, &[8, 4]);
        for (at, v) in edits {
            if let Some(b) = bytes.get_mut(at) {
                *b = v;
            }
        }
        if let Some((at, v)) = wide {
            if let Some(dst) = bytes.get_mut(at..at + 8) {
                dst.copy_from_slice(&v.to_le_bytes());
            }
        }
        let _ = read_all(&bytes);
    }
}

/// Template source assembled from Jinja fragments, well formed or not.
fn template() -> impl Strategy<Value = String> {
    let fragment = prop_oneof![
        Just("{% for message in messages %}".to_string()),
        Just("{% endfor %}".to_string()),
        Just("{% if add_generation_prompt %}".to_string()),
        Just("{% if messages[0]['role'] == 'system' %}".to_string()),
        Just("{% else %}".to_string()),
        Just("{% endif %}".to_string()),
        Just("{{ message['content'] | trim }}".to_string()),
        Just("{{ message.content.strip().upper() }}".to_string()),
        Just("{{ messages[-1].role }}".to_string()),
        Just("{{ messages[99].content }}".to_string()),
        Just("{{ bos_token + eos_token }}".to_string()),
        Just("{{ raise_exception('no') }}".to_string()),
        Just("{{ message.content.split(' ')[1] }}".to_string()),
        Just("{{ 1 / 0 }}".to_string()),
        Just("{{ loop.index0 % 2 }}".to_string()),
        Just("{% set x = namespace(n=0) %}{% set x.n = x.n + 1 %}".to_string()),
        Just("{{ range(3) | join(',') }}".to_string()),
        Just("{{ message.content[:5] ~ message.content[-3:] }}".to_string()),
        Just("{%".to_string()),
        Just("}}".to_string()),
        Just("{{".to_string()),
        Just("<|im_start|>".to_string()),
        "[a-z {}%|'\\[\\]().]{0,12}",
    ];
    prop::collection::vec(fragment, 0..12).prop_map(|v| v.concat())
}

fn messages() -> impl Strategy<Value = Vec<Turn>> {
    let role = prop_oneof![
        Just("system".to_string()),
        Just("user".to_string()),
        Just("assistant".to_string()),
        ".{0,6}"
    ];
    prop::collection::vec(
        (role, ".{0,40}").prop_map(|(r, c)| Turn {
            role: r,
            content: c,
        }),
        0..5,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_templates_and_messages_never_panic_the_renderer(src in template(), msgs in messages(), gen in any::<bool>()) {
        if let Ok(t) = ChatTemplate::new(&src, "<s>", "</s>") {
            let _ = t.render(&msgs, gen);
        }
    }

    #[test]
    fn arbitrary_messages_render_with_a_chatml_template(msgs in messages(), gen in any::<bool>()) {
        let src = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] | trim + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
        let t = ChatTemplate::new(src, "", "<|im_end|>").map_err(|e| TestCaseError::fail(e.to_string()))?;
        let out = t.render(&msgs, gen).map_err(|e| TestCaseError::fail(e.to_string()))?;
        for m in &msgs {
            prop_assert!(out.contains(m.content.trim()));
        }
    }
}

/// A request body with parameters at and past their edges.
fn extreme_request() -> impl Strategy<Value = (String, Value)> {
    let unicode = "\\PC{0,200}";
    let n = prop_oneof![
        Just(json!(1)),
        Just(json!(16)),
        Just(json!(17)),
        Just(json!(0)),
        Just(json!(-1)),
        Just(json!(i64::MAX)),
        Just(json!(1e300))
    ];
    let top_k = prop_oneof![
        Just(json!(0)),
        Just(json!(1)),
        Just(json!(49_151)),
        Just(json!(1_000_000)),
        Just(json!(u32::MAX)),
        Just(json!(-5))
    ];
    let top_logprobs = prop_oneof![
        Just(json!(0)),
        Just(json!(20)),
        Just(json!(21)),
        Just(json!(-1)),
        Just(json!(i64::MIN))
    ];
    let budget = prop_oneof![
        Just(json!(1)),
        Just(json!(40)),
        Just(json!(150)),
        Just(json!(200_001)),
        Just(json!(0)),
        Just(json!(-7))
    ];
    let stop = prop_oneof![
        Just(Value::Null),
        "\\PC{1,8}".prop_map(|s| json!(s)),
        prop::collection::vec("\\PC{0,300}", 0..6).prop_map(|v| json!(v)),
    ];
    let strategy = prop_oneof![
        Just(Value::Null),
        Just(json!("best_of_n")),
        Just(json!("beam_search")),
        Just(json!("self_consistency")),
        Just(json!("mcts"))
    ];
    let route = prop_oneof![Just("/v1/chat/completions"), Just("/v1/completions")];
    (route, unicode, n, top_k, top_logprobs, budget, stop, strategy, any::<bool>(), 1u32..4, prop::option::of(prop_oneof![Just(1i64), Just(50), Just(0)])).prop_map(
        |(route, prompt, n, top_k, top, budget, stop, strategy, stream, max_tokens, deadline)| {
            let mut body = json!({"model": "ponder", "max_tokens": max_tokens, "top_k": top_k, "stop": stop, "stream": stream, "seed": 1});
            if route == "/v1/chat/completions" {
                body["messages"] = json!([{"role": "user", "content": prompt}]);
                body["logprobs"] = json!(true);
                body["top_logprobs"] = top;
            } else {
                body["prompt"] = json!(prompt);
                body["logprobs"] = top;
            }
            if strategy.is_null() {
                body["n"] = n;
            } else {
                body["strategy"] = strategy;
                body["budget_tokens"] = budget;
                body["strategy_params"] = json!({"n": 2, "max_tokens": 8});
            }
            if let Some(d) = deadline {
                body["deadline_ms"] = json!(d);
            }
            (route.to_string(), body)
        },
    )
}

#[test]
fn parameter_extremes_and_huge_unicode_never_get_a_5xx() {
    let limits = Limits {
        max_running: 4,
        max_queue: 256,
        ..Limits::default()
    };
    let server = TestServer::start(|b| b.limits(limits));
    let client = reqwest::Client::new();
    let send = |route: &str, body: &Value| -> (u16, String) {
        server.block_on(async {
            let r = client
                .post(server.url(route))
                .json(body)
                .send()
                .await
                .expect("send");
            let status = r.status().as_u16();
            (status, r.text().await.unwrap_or_default())
        })
    };
    // Fixed extremes first: a prompt of ~900 KB of mixed scripts (under the 1 MiB body limit),
    // stop strings at the byte limit, n at its limit with every logprob.
    let long_stops = vec!["é".repeat(128); 4];
    let huge: String = "日本語の文章 ∑∫√ 🦀🧠 עברית العربية "
        .chars()
        .cycle()
        .take(300_000)
        .collect();
    for (route, body) in [
        (
            "/v1/chat/completions",
            json!({"model": "ponder", "messages": [{"role": "user", "content": huge}], "max_tokens": 1}),
        ),
        (
            "/v1/completions",
            json!({"model": "ponder", "prompt": huge, "max_tokens": 1}),
        ),
        ("/v1/reason", json!({"problem": huge, "budget_tokens": 100})),
        (
            "/v1/chat/completions",
            json!({"model": "ponder", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "n": 16, "logprobs": true, "top_logprobs": 20, "top_k": u32::MAX, "stop": long_stops}),
        ),
    ] {
        let (status, text) = send(route, &body);
        assert!(
            status < 500,
            "{route}: {status} {}",
            &text[..text.len().min(300)]
        );
    }
    let mut runner = TestRunner::new(Config {
        cases: 40,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&extreme_request(), |(route, body)| {
        let (status, text) = send(&route, &body);
        prop_assert!(status < 500, "{} {} -> {} {}", route, body, status, text);
        if status == 200 && body["stream"] == json!(true) {
            prop_assert!(text.trim_end().ends_with("data: [DONE]"), "{}", text);
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}
