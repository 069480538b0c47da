//! A thinking model's chat replies over the API: its `<think>` block is returned apart from
//! `content`, as `reasoning` (vLLM's field) and `reasoning_content` (DeepSeek's), streamed and
//! not, counted in `usage.completion_tokens_details.reasoning_tokens`; plain decoding and a
//! search alike; `--reasoning-parser none` leaves replies whole; an earlier assistant turn's
//! thinking is accepted. The model is the vLLM fixture (`backend_engines`) answering as a
//! thinking model writes, so the reply's tokens are known exactly.

use ponder_verifiers::ReasoningParser;
use serde_json::{json, Value};

use crate::backend_engines::{fixture, ReplayServer};

/// The reply's tokens: a block of nine tokens (tags included), a blank line, the answer.
const TOKENS: [&str; 11] = [
    "<think>", "\n", "Add", " 3", " and", " 4", ".", "\n", "</think>", "\n\n", "7",
];
const THINKING: &str = "\nAdd 3 and 4.\n";

/// vLLM's fixture, answering every request with [`TOKENS`] (then EOS).
fn thinking_engine() -> ReplayServer {
    let mut f = fixture("vllm.json");
    let text: String = TOKENS.concat();
    let offsets: Vec<usize> = TOKENS
        .iter()
        .scan(0, |at, t| {
            let start = *at;
            *at += t.len();
            Some(start)
        })
        .collect();
    let choice = &mut f["final"]["choices"][0];
    choice["text"] = json!(text);
    choice["logprobs"] = json!({
        "text_offset": offsets,
        "token_logprobs": vec![-0.25; TOKENS.len()],
        "tokens": TOKENS,
        "top_logprobs": TOKENS.iter().map(|t| json!({*t: -0.25})).collect::<Vec<_>>(),
    });
    f["final"]["usage"]["completion_tokens"] = json!(TOKENS.len());
    ReplayServer::start(f, None)
}

/// `ponder serve --backend <engine>` with `parser`, on `rt`; its URL.
fn serve(
    rt: &tokio::runtime::Runtime,
    engine: &ReplayServer,
    parser: Option<ReasoningParser>,
) -> String {
    engine.serve_in_front(rt, |b| b.reasoning_parser(parser))
}

fn chat(model: &str, stream: bool) -> Value {
    json!({
        "model": model,
        "messages": [
            {"role": "user", "content": "What is 1 + 1?"},
            // An earlier turn's thinking, under both names: accepted, not shown to the model.
            {"role": "assistant", "content": "2", "reasoning_content": "1 and 1.", "reasoning": "1 and 1."},
            {"role": "user", "content": "What is 3 + 4?"},
        ],
        "max_tokens": 20,
        "stream": stream,
        "stream_options": if stream { json!({"include_usage": true}) } else { Value::Null },
    })
}

/// A streamed reply folded: (content, reasoning, reasoning_content, usage).
fn fold_stream(
    rt: &tokio::runtime::Runtime,
    url: &str,
    body: &Value,
) -> (String, String, String, Value) {
    let text = rt.block_on(async {
        let r = reqwest::Client::new()
            .post(format!("{url}/v1/chat/completions"))
            .json(body)
            .send()
            .await
            .expect("POST");
        assert_eq!(r.status(), 200);
        r.text().await.expect("body")
    });
    fold_sse(&text)
}

/// An SSE chat reply folded: (content, reasoning, reasoning_content, usage).
fn fold_sse(text: &str) -> (String, String, String, Value) {
    let (mut content, mut reasoning, mut reasoning_content, mut usage) =
        (String::new(), String::new(), String::new(), Value::Null);
    for line in text.lines().filter_map(|l| l.strip_prefix("data: ")) {
        if line == "[DONE]" {
            break;
        }
        let chunk: Value = serde_json::from_str(line).expect("chunk JSON");
        assert!(chunk.get("error").is_none(), "{chunk}");
        if !chunk["usage"].is_null() {
            usage = chunk["usage"].clone();
        }
        for c in chunk["choices"].as_array().into_iter().flatten() {
            let delta = &c["delta"];
            content.push_str(delta["content"].as_str().unwrap_or(""));
            reasoning.push_str(delta["reasoning"].as_str().unwrap_or(""));
            reasoning_content.push_str(delta["reasoning_content"].as_str().unwrap_or(""));
        }
    }
    (content, reasoning, reasoning_content, usage)
}

#[test]
fn a_thinking_reply_returns_its_thinking_apart_from_its_content() {
    let engine = thinking_engine();
    let rt = crate::util::runtime(1);
    let url = serve(&rt, &engine, Some(ReasoningParser::think()));
    let client = reqwest::Client::new();
    let (status, v) = crate::util::post_json(
        &rt,
        &client,
        &format!("{url}/v1/chat/completions"),
        &chat("ponder", false),
    );
    assert_eq!(status, 200, "{v}");
    let message = &v["choices"][0]["message"];
    assert_eq!(message["content"], "7", "{v}");
    assert_eq!(message["reasoning"], THINKING, "{v}");
    assert_eq!(message["reasoning_content"], THINKING, "{v}");
    // The nine tokens up to the closing tag, counted from the engine's own tokens.
    assert_eq!(v["usage"]["completion_tokens"], 11, "{v}");
    assert_eq!(
        v["usage"]["completion_tokens_details"]["reasoning_tokens"], 9,
        "{v}"
    );

    let (content, reasoning, reasoning_content, usage) =
        fold_stream(&rt, &url, &chat("ponder", true));
    assert_eq!(content, "7");
    assert_eq!(reasoning, THINKING);
    assert_eq!(reasoning_content, THINKING);
    assert_eq!(
        usage["completion_tokens_details"]["reasoning_tokens"], 9,
        "{usage}"
    );
}

#[test]
fn a_search_returns_its_chosen_solutions_thinking_apart() {
    let engine = thinking_engine();
    let rt = crate::util::runtime(1);
    let url = serve(&rt, &engine, Some(ReasoningParser::think()));
    let mut body = chat("ponder/self_consistency", false);
    body["strategy_params"] = json!({"n": 2});
    body["budget_tokens"] = json!(400);
    let (status, v) = crate::util::post_json(
        &rt,
        &reqwest::Client::new(),
        &format!("{url}/v1/chat/completions"),
        &body,
    );
    assert_eq!(status, 200, "{v}");
    let message = &v["choices"][0]["message"];
    assert_eq!(message["content"], "7", "{v}");
    assert_eq!(message["reasoning_content"], THINKING, "{v}");
    assert_eq!(
        v["ponder"]["answer"], "7",
        "the answer is read after the block: {v}"
    );
    let usage = &v["usage"];
    let reasoning = usage["completion_tokens_details"]["reasoning_tokens"]
        .as_u64()
        .unwrap();
    // Everything but the one token of content (the chosen solution's thinking among it;
    // without the search's per-token texts, counted in proportion to its bytes).
    let completion = usage["completion_tokens"].as_u64().unwrap();
    assert!(
        reasoning + 1 >= completion && reasoning <= completion,
        "{v}"
    );

    body["stream"] = json!(true);
    let (content, _, reasoning_content, _) = fold_stream(&rt, &url, &body);
    assert_eq!(
        (content.as_str(), reasoning_content.as_str()),
        ("7", THINKING)
    );
}

#[test]
fn without_a_parser_the_reply_stays_whole() {
    let engine = thinking_engine();
    let rt = crate::util::runtime(1);
    let url = serve(&rt, &engine, None);
    let (status, v) = crate::util::post_json(
        &rt,
        &reqwest::Client::new(),
        &format!("{url}/v1/chat/completions"),
        &chat("ponder", false),
    );
    assert_eq!(status, 200, "{v}");
    let message = &v["choices"][0]["message"];
    assert_eq!(message["content"], TOKENS.concat(), "{v}");
    assert!(message.get("reasoning").is_none() && message.get("reasoning_content").is_none());
    assert_eq!(
        v["usage"]["completion_tokens_details"]["reasoning_tokens"], 0,
        "{v}"
    );
    // Text completions are never split.
    let url2 = serve(&rt, &engine, Some(ReasoningParser::think()));
    let (status, v) = crate::util::post_json(
        &rt,
        &reqwest::Client::new(),
        &format!("{url2}/v1/completions"),
        &json!({"model": "ponder", "prompt": "3 + 4 =", "max_tokens": 20}),
    );
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["choices"][0]["text"], TOKENS.concat(), "{v}");
}

/// `budget_forcing` on the real default model (which has no thinking tokens: the strategy opens
/// and closes the block in text): a chat completion returns the thinking apart from the
/// answer, the thinking within its maximum (in the model's own tokens), streamed and not;
/// bounds that cannot hold are 400s naming the field.
#[test]
fn budget_forcing_on_the_default_model_returns_bounded_thinking_apart() {
    let server = crate::server::TestServer::start(|b| b);
    let client = reqwest::Client::new();
    let body = |stream: bool, params: Value, budget: u64| {
        crate::server::chat(
            "Tom has 3 apples and buys 4 more. How many apples does he have?",
            json!({"model": "ponder/budget_forcing", "strategy_params": params,
                   "budget_tokens": budget, "seed": 3, "stream": stream}),
        )
    };
    let params = json!({"max_thinking_tokens": 24, "answer_tokens": 24});
    let (status, v) = server.send(client.post(server.url("/v1/chat/completions")).json(&body(
        false,
        params.clone(),
        2000,
    )));
    assert_eq!(status, 200, "{v}");
    let message = &v["choices"][0]["message"];
    let thinking = message["reasoning_content"].as_str().expect("thinking");
    assert_eq!(message["reasoning"], message["reasoning_content"]);
    let content = message["content"].as_str().unwrap();
    assert!(content.starts_with("Final Answer:"), "{v}");
    assert!(
        !content.contains("<think>") && !thinking.contains("</think>"),
        "{v}"
    );
    // At most 24 thinking tokens: with the answer phase's at most 24 and the forced answer
    // probe's, the search generated no more than that.
    let generated = v["ponder"]["usage"]["generated_tokens"].as_u64().unwrap();
    assert!(generated <= 24 + 24, "{v}");
    assert!(
        v["usage"]["completion_tokens_details"]["reasoning_tokens"]
            .as_u64()
            .unwrap()
            > 0
    );

    let text = server.block_on(async {
        client
            .post(server.url("/v1/chat/completions"))
            .json(&body(true, params, 2000))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    });
    let (streamed_content, _, streamed_thinking, _) = fold_sse(&text);
    assert_eq!(
        (streamed_content.as_str(), streamed_thinking.as_str()),
        (content, thinking)
    );

    for (params, budget, field) in [
        (
            json!({"min_thinking_tokens": 50, "max_thinking_tokens": 10}),
            2000,
            "min_thinking_tokens",
        ),
        (
            json!({"min_thinking_tokens": 900, "max_thinking_tokens": 1000}),
            400,
            "budget_tokens",
        ),
    ] {
        let (status, v) = server.send(
            client
                .post(server.url("/v1/chat/completions"))
                .json(&body(false, params, budget)),
        );
        assert_eq!(status, 400, "{v}");
        assert!(
            v["error"]["message"].as_str().unwrap_or("").contains(field),
            "{v}"
        );
    }
}
