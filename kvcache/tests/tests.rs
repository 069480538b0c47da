//! ponder-kvcache's integration tests: one binary, one module per concern (ripgrep's layout).
//! They use only the public API and model the tensor layer with a shadow memory (`util`).

mod util;

mod random_ops;
mod scenarios;
