//! `ponder bench`: workloads that measure Ponder against a baseline run in the same process,
//! printed as one JSON object a script can compare.
//!
//! - `nsample`, `prefix-reuse` (`bench/executor.rs`): the batch executor vs naive one-at-a-time runs.
//! - `beam` (`bench/strategies.rs`): a step-level beam search's cost vs best-of-N at the same N.
//! - `strategies` (`bench/strategies.rs`): accuracy and tokens spent per strategy and budget on a
//!   problem set (its tables: `evals/examples/dev-set-results.md`).
//! - `search` (`bench/search.rs`): every strategy's generated tokens per second relative to best-of-N
//!   at the same N and step settings, without a verifier and with the LLM-as-PRM.
//! - `load` ([`load`]): concurrent clients against a running server; status counts, latency
//!   percentiles, RSS growth and the gauges back at idle.
//! - `serve` ([`serve`]): one search workload's problems per minute, tokens/s and latency on
//!   Ponder's own engine vs Ponder in front of llama.cpp's `llama-server`, and plain decoding's
//!   proxy overhead, in one run.

mod executor;
pub mod load;
mod search;
pub mod serve;
mod strategies;

pub use executor::{
    nsample, prefix_reuse, BatchedRun, BenchOptions, NSampleReport, PrefixReuseReport,
};
pub use search::{search_bench, SearchBenchOptions, SearchReport, SearchRow};
pub use strategies::{
    beam_vs_best_of_n, load_problems, markdown_table, strategy_table, BeamReport, BenchProblem,
    RunCost, TableOptions, TableRow,
};
