//! Ponder's integration tests: one binary, one module per concern (ripgrep's layout).
//!
//! Tests that need the real default model fail with the setup command when it is missing;
//! `bash .ci/run` installs it first.

// Test helpers state expectations with `expect` as the tests do (clippy.toml allows that in
// `#[test]` functions only; library and binary code may not).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod util;

/// The README's plug-in example, compiled once for `plugin` and `server`.
#[path = "../examples/custom_strategy.rs"]
#[allow(dead_code, unreachable_pub)]
mod custom_strategy;

mod auth;
mod backend_engines;
mod backend_llama_server;
mod backend_llamacpp;
mod backend_stream;
mod backend_wire;
mod bad_input;
mod cli;
#[cfg(feature = "cuda")]
mod engine_cuda;
mod engine_rules;
mod executor;
mod fuzz_corpus;
mod gguf_quant_types;
mod hostile_input;
mod learned_verifier;
mod llama_parity;
mod plugin;
mod prm_budget;
mod prm_engine;
mod prm_fixture;
mod prm_llm;
mod prm_reward_head;
mod qwen2_parity;
mod qwen3_parity;
mod reliability;
mod router;
mod router_auto;
mod server;
mod server_defaults;
mod server_echo;
mod server_load;
mod server_ops;
mod server_remote;
mod server_shots;
mod server_thinking;
mod server_ui;
mod strategies;
mod thinking_models;
mod tokenizer;
mod verifier_hidden;
