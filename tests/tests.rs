//! Ponder's integration tests: one binary, one module per concern (ripgrep's layout).
//!
//! Tests that need the real default model fail with the setup command when it is missing;
//! `bash .ci/run` installs it first.

mod util;

mod bad_input;
mod cli;
mod executor;
mod gguf_quant_types;
mod llama_parity;
mod plugin;
mod qwen2_parity;
mod strategies;
mod tokenizer;
