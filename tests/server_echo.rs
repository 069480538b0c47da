//! `echo` with `logprobs` on `/v1/completions` (what lm-evaluation-harness's loglikelihood
//! tasks send: the context and continuation as one prompt, `max_tokens` 1, `logprobs` 1, `echo`
//! true): a real server on the default model returns the prompt's tokens with their logprobs,
//! the first null, before the completion's; a continuation scored by echo has the logprobs it
//! had when it was generated, and a greedy token is the top alternative where it stands.

use serde_json::{json, Value};

use crate::server::{post, sse_data, TestServer};

fn completion(server: &TestServer, body: Value) -> (u16, Value) {
    let client = reqwest::Client::new();
    server.block_on(post(&client, &server.url("/v1/completions"), body))
}

fn floats(v: &Value) -> Vec<Option<f64>> {
    v.as_array()
        .expect("an array")
        .iter()
        .map(Value::as_f64)
        .collect()
}

#[test]
fn echo_returns_the_prompts_logprobs_and_scores_a_continuation_as_it_was_generated() {
    let server = TestServer::start(|b| b);
    let prompt = "The days of the week are Monday, Tuesday,";
    // Greedy continuation with its logprobs.
    let (status, generated) = completion(
        &server,
        json!({"model": "ponder", "prompt": prompt, "max_tokens": 6, "temperature": 0,
               "logprobs": 2}),
    );
    assert_eq!(status, 200, "{generated}");
    let continuation = generated["choices"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    let gen_lp = floats(&generated["choices"][0]["logprobs"]["token_logprobs"]);
    let gen_tokens = generated["choices"][0]["logprobs"]["tokens"]
        .as_array()
        .unwrap()
        .clone();
    assert!(!continuation.is_empty() && gen_lp.iter().all(Option::is_some));

    // Echo of the prompt alone, one more token.
    let (status, echoed) = completion(
        &server,
        json!({"model": "ponder", "prompt": prompt, "max_tokens": 1, "temperature": 0,
               "logprobs": 2, "echo": true}),
    );
    assert_eq!(status, 200, "{echoed}");
    let choice = &echoed["choices"][0];
    let text = choice["text"].as_str().unwrap();
    assert!(
        text.starts_with(prompt),
        "echo starts with the prompt: {text:?}"
    );
    let lp = &choice["logprobs"];
    let token_lp = floats(&lp["token_logprobs"]);
    let prompt_tokens = echoed["usage"]["prompt_tokens"].as_u64().unwrap() as usize;
    assert_eq!(
        token_lp.len(),
        prompt_tokens + 1,
        "every prompt token, then the generated one"
    );
    assert!(token_lp[0].is_none(), "the first token has no logprob");
    assert!(lp["top_logprobs"][0].is_null());
    assert!(token_lp[1..].iter().all(|l| l.is_some_and(|l| l <= 1e-6)));
    let offsets: Vec<u64> = lp["text_offset"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_u64)
        .collect();
    assert_eq!(offsets.len(), token_lp.len());
    assert_eq!(offsets[0], 0);
    assert!(offsets.windows(2).all(|w| w[0] <= w[1]));
    assert_eq!(
        offsets[prompt_tokens] as usize,
        prompt.len(),
        "the completion's first token starts where the prompt ends"
    );
    // The one generated token is the greedy continuation's first.
    assert_eq!(lp["tokens"][prompt_tokens], gen_tokens[0]);

    // The prompt and its greedy continuation scored by echo: the continuation's tokens carry
    // the logprobs they were generated with (prefill vs decode arithmetic: within 0.02), and
    // each is the top alternative at its place (lm-evaluation-harness's `is_greedy`).
    let (status, scored) = completion(
        &server,
        json!({"model": "ponder", "prompt": format!("{prompt}{continuation}"),
               "max_tokens": 1, "temperature": 0, "logprobs": 1, "echo": true}),
    );
    assert_eq!(status, 200, "{scored}");
    let lp = &scored["choices"][0]["logprobs"];
    let token_lp = floats(&lp["token_logprobs"]);
    let tokens = lp["tokens"].as_array().unwrap();
    let n = gen_tokens.len();
    let whole = scored["usage"]["prompt_tokens"].as_u64().unwrap() as usize;
    assert_eq!(
        &tokens[whole - n..whole],
        &gen_tokens[..],
        "the continuation tokenizes as generated"
    );
    for i in 0..n {
        let (got, want) = (token_lp[whole - n + i].unwrap(), gen_lp[i].unwrap());
        assert!(
            (got - want).abs() < 0.02,
            "token {i} {:?}: scored {got}, generated {want}",
            tokens[whole - n + i]
        );
        let top = lp["top_logprobs"][whole - n + i].as_object().unwrap();
        assert!(
            top.contains_key(tokens[whole - n + i].as_str().unwrap()),
            "the greedy token is the top alternative: {top:?}"
        );
    }
}

#[test]
fn echo_is_refused_where_it_cannot_be_served_naming_it() {
    let server = TestServer::start(|b| b);
    let (status, out) = completion(
        &server,
        json!({"model": "ponder", "prompt": "1, 2, 3,", "max_tokens": 2, "echo": true,
               "strategy": "best_of_n"}),
    );
    assert_eq!(status, 400, "{out}");
    assert_eq!(out["error"]["param"], "echo", "{out}");
    // Without logprobs, the prompt text is simply repeated.
    let (status, out) = completion(
        &server,
        json!({"model": "ponder", "prompt": "1, 2, 3,", "max_tokens": 2, "temperature": 0,
               "echo": true}),
    );
    assert_eq!(status, 200, "{out}");
    assert!(out["choices"][0]["text"]
        .as_str()
        .unwrap()
        .starts_with("1, 2, 3,"));
    assert!(out["choices"][0]["logprobs"].is_null());
}

/// The chunks of a streamed `/v1/completions` reply, folded as a client folds them: the text
/// concatenated and the logprobs' lists appended chunk after chunk.
fn streamed(server: &TestServer, body: Value) -> (String, Value) {
    let client = reqwest::Client::new();
    let text = server.block_on(async {
        let r = client
            .post(server.url("/v1/completions"))
            .json(&body)
            .send()
            .await
            .expect("send");
        assert_eq!(r.status().as_u16(), 200);
        r.text().await.expect("body")
    });
    let mut out = String::new();
    let mut logprobs = json!({"text_offset": [], "token_logprobs": [], "tokens": [],
                              "top_logprobs": []});
    for chunk in sse_data(&text) {
        if chunk == "[DONE]" {
            break;
        }
        let chunk: Value = serde_json::from_str(&chunk).expect("a JSON chunk");
        let Some(choice) = chunk["choices"].get(0) else {
            continue;
        };
        out.push_str(choice["text"].as_str().unwrap_or(""));
        for key in ["text_offset", "token_logprobs", "tokens", "top_logprobs"] {
            if let Some(items) = choice["logprobs"][key].as_array() {
                logprobs[key]
                    .as_array_mut()
                    .unwrap()
                    .extend(items.iter().cloned());
            }
        }
    }
    (out, logprobs)
}

/// Each token's text starts in `text` where its `text_offset` says.
fn assert_offsets_index(text: &str, logprobs: &Value) {
    let offsets = logprobs["text_offset"].as_array().unwrap();
    for (o, t) in offsets.iter().zip(logprobs["tokens"].as_array().unwrap()) {
        let (o, t) = (o.as_u64().unwrap() as usize, t.as_str().unwrap());
        assert_eq!(
            text.get(o..o + t.len()),
            Some(t),
            "offset {o} of {t:?} in {text:?}"
        );
    }
}

#[test]
fn streamed_echo_sends_the_prompt_first_and_folds_to_the_unstreamed_reply() {
    let server = TestServer::start(|b| b);
    let body = json!({"model": "ponder", "prompt": "Monday, Tuesday,", "max_tokens": 5,
                      "temperature": 0, "logprobs": 2, "echo": true});
    let (status, whole) = completion(&server, body.clone());
    assert_eq!(status, 200, "{whole}");
    let mut stream_body = body;
    stream_body["stream"] = json!(true);
    let (text, logprobs) = streamed(&server, stream_body);
    let choice = &whole["choices"][0];
    assert_eq!(text, choice["text"].as_str().unwrap());
    assert!(text.starts_with("Monday, Tuesday,"), "{text:?}");
    for key in ["text_offset", "tokens", "top_logprobs"] {
        assert_eq!(logprobs[key], choice["logprobs"][key], "{key}");
    }
    // The same tokens' logprobs, within the batch's numerical noise.
    let (a, b) = (
        floats(&logprobs["token_logprobs"]),
        floats(&choice["logprobs"]["token_logprobs"]),
    );
    assert_eq!(a.len(), b.len());
    assert_eq!(a[0], None, "the prompt's first token has no logprob");
    for (x, y) in a.iter().zip(&b).skip(1) {
        assert!((x.unwrap() - y.unwrap()).abs() < 1e-3, "{x:?} vs {y:?}");
    }
    assert_offsets_index(&text, &logprobs);
}

#[test]
fn streamed_logprob_offsets_continue_across_chunks() {
    let server = TestServer::start(|b| b);
    let (text, logprobs) = streamed(
        &server,
        json!({"model": "ponder", "prompt": "Count: 1, 2, 3,", "max_tokens": 8, "temperature": 0,
               "logprobs": 1, "stream": true}),
    );
    assert_eq!(
        logprobs["text_offset"].as_array().unwrap().len(),
        8,
        "{logprobs}"
    );
    assert_offsets_index(&text, &logprobs);
}
