//! What Ponder sends a backend is valid for the engine's own request model: every built-in
//! strategy and plain decoding with `n` > 1, seeded (with seeds past int64) and unseeded, run
//! against the vLLM fixture, which validates each request as vLLM 0.32.0 does
//! (`engine_rules`), and none is refused.

use std::sync::Arc;

use ponder::backends::{RemoteGenerator, RemoteOptions};
use ponder::reason::{reason, ReasonRequest};
use ponder_strategies::Registry;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::backend_engines::{fixture, pool, ReplayServer};

/// Seeds a client may send: past int64 (half of all u64), at its edge, small; and none.
const SEEDS: [Option<u64>; 4] = [Some(u64::MAX - 12_345), Some(1 << 63), Some(7), None];

#[test]
fn every_strategy_sends_only_requests_vllm_accepts() {
    let server = ReplayServer::start(fixture("vllm.json"), None);
    let rt = crate::util::runtime(1);
    let registry = Registry::with_builtins();
    for name in registry.names() {
        for seed in SEEDS {
            let generator = Arc::new(RemoteGenerator::new(pool(RemoteOptions::new(vec![server
                .url
                .clone()]))));
            let req = ReasonRequest {
                problem: "What is 3 + 4?".into(),
                history: Vec::new(),
                shots: Vec::new(),
                strategy: name.clone(),
                params: json!({}),
                budget_tokens: 4_000,
                deadline_ms: None,
                // What the API draws for a request without a seed: any u64.
                seed: seed.unwrap_or_else(rand::random),
            };
            let result = rt.block_on(reason(
                &registry,
                generator,
                None,
                &req,
                CancellationToken::new(),
            ));
            let refused = server.seen(|s| s.refused.clone());
            assert!(
                refused.is_empty(),
                "{name} seed {seed:?}: refused {refused:?}"
            );
            result.unwrap_or_else(|e| panic!("{name} seed {seed:?}: {e}"));
        }
    }
}

#[test]
fn plain_decoding_with_several_choices_sends_only_requests_vllm_accepts() {
    let server = ReplayServer::start(fixture("vllm.json"), None);
    let rt = crate::util::runtime(1);
    let url = server.serve_in_front(&rt, |b| b);
    let client = reqwest::Client::new();
    for seed in SEEDS {
        for (route, mut body) in [
            (
                "/v1/completions",
                json!({"model": "ponder", "prompt": "What is 3 + 4?", "max_tokens": 16}),
            ),
            (
                "/v1/chat/completions",
                json!({"model": "ponder", "max_tokens": 16,
                       "messages": [{"role": "user", "content": "What is 3 + 4?"}]}),
            ),
        ] {
            body["n"] = json!(3);
            // Legacy completions count alternatives; chat asks with a flag and a count.
            if route == "/v1/completions" {
                body["logprobs"] = json!(2);
            } else {
                body["logprobs"] = json!(true);
                body["top_logprobs"] = json!(2);
            }
            if let Some(s) = seed {
                body["seed"] = json!(s);
            }
            let (status, reply) =
                crate::util::post_json(&rt, &client, &format!("{url}{route}"), &body);
            let refused = server.seen(|s| s.refused.clone());
            assert!(
                refused.is_empty(),
                "{route} seed {seed:?}: refused {refused:?}"
            );
            assert_eq!(status, 200, "{route} seed {seed:?}: {reply}");
            assert_eq!(
                reply["choices"].as_array().map(Vec::len),
                Some(3),
                "{reply}"
            );
        }
    }
}

#[test]
fn a_strategy_with_the_callers_four_stop_strings_sends_vllm_at_most_four() {
    // A step-level strategy's own delimiter plus the four stop strings a client may send make
    // five; vLLM 0.32.0 takes at most four (`VLLM_MAX_STOP_STRINGS`).
    let server = ReplayServer::start(fixture("vllm.json"), None);
    let rt = crate::util::runtime(1);
    let url = server.serve_in_front(&rt, |b| b);
    let client = reqwest::Client::new();
    for strategy in ["beam_search", "answer_convergence"] {
        let body = json!({"model": "ponder", "strategy": strategy, "budget_tokens": 4_000,
                          "stop": ["W1", "X2", "Y3", "Z4"],
                          "messages": [{"role": "user", "content": "What is 3 + 4?"}]});
        let (status, reply) =
            crate::util::post_json(&rt, &client, &format!("{url}/v1/chat/completions"), &body);
        let refused = server.seen(|s| s.refused.clone());
        assert!(refused.is_empty(), "{strategy}: refused {refused:?}");
        assert_eq!(status, 200, "{strategy}: {reply}");
    }
}

#[test]
fn an_out_of_range_seed_is_what_the_fixture_refuses() {
    // The regression this guards: a seed sent unmasked is refused by the vLLM fixture.
    let server = ReplayServer::start(fixture("vllm.json"), None);
    let rt = crate::util::runtime(1);
    let client = reqwest::Client::new();
    let body = json!({"model": "m", "prompt": "x", "max_tokens": 4, "seed": u64::MAX});
    let (status, reply): (u16, Value) = crate::util::post_json(
        &rt,
        &client,
        &format!("{}/v1/completions", server.url),
        &body,
    );
    assert_eq!(status, 400, "{reply}");
    assert_eq!(server.seen(|s| s.refused.len()), 1);
}

#[test]
fn chat_template_kwargs_reach_the_prompt_sent_to_the_backend() {
    // Ponder renders backends' prompts itself (`/v1/completions`), with --backend-tokenizer's
    // template: here Qwen3's real one, so `enable_thinking` is seen in the prompt on the wire.
    let format = ponder::backends::BackendFormat::load(
        &crate::util::thinking_family("qwen3").join("tokenizer_config.json"),
    )
    .expect("qwen3's template");
    let server = ReplayServer::start(fixture("vllm.json"), None);
    let rt = crate::util::runtime(1);
    let qwen3 = pool(RemoteOptions {
        format: Some(Arc::new(format)),
        ..RemoteOptions::new(vec![server.url.clone()])
    });
    let url = server.serve_in_front(&rt, |b| b.remote(qwen3));
    let client = reqwest::Client::new();
    let empty_block = "<|im_start|>assistant\n<think>\n\n</think>\n\n";
    for (extra, thinking) in [
        (json!({}), false),
        (
            json!({"strategy": "best_of_n", "strategy_params": {"n": 2}}),
            false,
        ),
        (json!({}), true),
        (
            json!({"strategy": "best_of_n", "strategy_params": {"n": 2}}),
            true,
        ),
    ] {
        let before = server.seen(|s| s.prompts.len());
        let mut body = json!({"model": "ponder", "max_tokens": 16,
            "chat_template_kwargs": {"enable_thinking": thinking},
            "messages": [{"role": "user", "content": "What is 3 + 4?"}]});
        if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
            b.extend(e.clone());
        }
        let (status, reply) =
            crate::util::post_json(&rt, &client, &format!("{url}/v1/chat/completions"), &body);
        assert_eq!(status, 200, "{body}: {reply}");
        let sent = server.seen(|s| s.prompts[before..].to_vec());
        assert!(!sent.is_empty(), "{body}: nothing sent");
        for prompt in sent {
            // Every prompt a search sends continues the rendered conversation.
            assert!(
                prompt.contains(
                    "<|im_start|>user\nWhat is 3 + 4?<|im_end|>\n<|im_start|>assistant\n"
                ),
                "{prompt:?}"
            );
            assert_eq!(
                prompt.contains(empty_block),
                !thinking,
                "{body}: {prompt:?}"
            );
        }
    }
}
