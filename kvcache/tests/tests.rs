//! ponder-kvcache's integration tests: one binary, one module per concern (ripgrep's layout).
//! They use only the public API and model the tensor layer with a shadow memory (`util`).

// Test helpers state expectations with `expect` as the tests do (clippy.toml allows that in
// `#[test]` functions only; library and binary code may not).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod util;

mod random_ops;
mod scenarios;
