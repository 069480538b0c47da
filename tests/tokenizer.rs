//! The tokenizer rebuilt from SmolLM2's GGUF metadata: llama.cpp agreement on a committed
//! fixture, special-token ids, round-trips over arbitrary Unicode, and the chat template.

use candle_core::quantized::gguf_file::Value;
use ponder_engine::forward::GgufFile;
use ponder_strategies::Turn;
use proptest::prelude::*;
use serde::Deserialize;

use crate::util::{smollm2, smollm2_path};

#[derive(Deserialize)]
struct Fixture {
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    text: String,
    ids: Vec<u32>,
}

#[test]
fn ids_match_llama_cpp_fixture() {
    let raw = include_str!("fixtures/smollm2_token_ids.json");
    let fixture: Fixture = serde_json::from_str(raw).expect("fixture");
    assert_eq!(fixture.cases.len(), 20);
    let tok = &smollm2().tokenizer;
    for case in &fixture.cases {
        let ids = tok.encode(&case.text).expect("encode");
        assert_eq!(
            ids, case.ids,
            "token ids differ from llama.cpp for {:?}",
            case.text
        );
    }
}

#[test]
fn special_tokens_map_to_the_gguf_ids() {
    let gguf = GgufFile::open(&smollm2_path()).expect("gguf");
    let tokens = match gguf.metadata().get("tokenizer.ggml.tokens") {
        Some(Value::Array(a)) => a.clone(),
        _ => panic!("no token list"),
    };
    let index_of = |s: &str| {
        tokens
            .iter()
            .position(|t| matches!(t, Value::String(x) if x == s))
            .map(|i| i as u32)
    };
    let tok = &smollm2().tokenizer;
    for special in ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] {
        let id = index_of(special).expect("special token in GGUF");
        assert_eq!(tok.token_id(special), Some(id), "{special}");
        assert_eq!(
            tok.encode(special).expect("encode"),
            vec![id],
            "{special} must encode to one id"
        );
    }
    let eos = gguf
        .metadata()
        .get("tokenizer.ggml.eos_token_id")
        .and_then(|v| v.to_u32().ok())
        .expect("eos id");
    assert!(tok.eos().contains(&eos));
    assert!(
        tok.eos().contains(&index_of("<|im_end|>").expect("im_end")),
        "chat turns end at <|im_end|>"
    );
}

#[test]
fn chat_template_renders_smollm2_im_start_format() {
    let m = smollm2();
    let out = m
        .render_chat(&[
            Turn::new("system", "Be brief."),
            Turn::new("user", "What is 2+3?"),
        ])
        .expect("render");
    assert_eq!(out, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2+3?<|im_end|>\n<|im_start|>assistant\n");
    // Without a system message SmolLM2's template supplies its default one.
    let out = m.render_chat(&[Turn::new("user", "Hi")]).expect("render");
    assert!(out.starts_with("<|im_start|>system\n"), "{out}");
    assert!(
        out.ends_with("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"),
        "{out}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn decode_encode_round_trips_unicode(s in any::<String>()) {
        let tok = &smollm2().tokenizer;
        let ids = tok.encode(&s).expect("encode");
        prop_assert_eq!(tok.decode(&ids).expect("decode"), s);
    }

    #[test]
    fn decode_encode_round_trips_text_like_strings(s in "[a-zA-Z0-9 \\n\\t.,;:!?'\"()\\[\\]{}+\\-*/=^_\\\\$%<>|éüß中文🎉]{0,80}") {
        let tok = &smollm2().tokenizer;
        let ids = tok.encode(&s).expect("encode");
        prop_assert_eq!(tok.decode(&ids).expect("decode"), s);
    }
}
