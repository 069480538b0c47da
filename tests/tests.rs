//! Ponder's integration tests: one binary, one module per concern (ripgrep's layout).
//!
//! Tests that need the real default model fail with the setup command when it is missing;
//! `bash .ci/run` installs it first.

mod util;

mod auth;
mod bad_input;
mod cli;
#[cfg(feature = "cuda")]
mod engine_cuda;
mod executor;
mod fuzz_corpus;
mod gguf_quant_types;
mod hostile_input;
mod llama_parity;
mod plugin;
mod prm_budget;
mod prm_engine;
mod prm_fixture;
mod prm_llm;
mod prm_reward_head;
mod qwen2_parity;
mod reliability;
mod server;
mod server_load;
mod server_remote;
mod server_ui;
mod router;
mod strategies;
mod tokenizer;
