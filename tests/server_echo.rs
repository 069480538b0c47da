//! `echo` with `logprobs` on `/v1/completions` (what lm-evaluation-harness's loglikelihood
//! tasks send: the context and continuation as one prompt, `max_tokens` 1, `logprobs` 1, `echo`
//! true): a real server on the default model returns the prompt's tokens with their logprobs,
//! the first null, before the completion's; a continuation scored by echo has the logprobs it
//! had when it was generated, and a greedy token is the top alternative where it stands.

use serde_json::{json, Value};

use crate::server::{post, TestServer};

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
    for extra in [json!({"stream": true}), json!({"strategy": "best_of_n"})] {
        let mut body = json!({"model": "ponder", "prompt": "1, 2, 3,", "max_tokens": 2,
                              "echo": true});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        let (status, out) = completion(&server, body);
        assert_eq!(status, 400, "{extra}: {out}");
        assert_eq!(out["error"]["param"], "echo", "{out}");
    }
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
