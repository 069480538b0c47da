//! What the strategy tests share: running a registered strategy on the fake generator to its
//! outcome, on a current-thread runtime, as the server's driver (`run`) does.

#![allow(dead_code, clippy::expect_used)]

use std::future::Future;
use std::sync::Arc;

use ponder_strategies::{
    run, Budget, Context, Generator, Outcome, Problem, Registry, StrategyError,
};

/// `future` to completion on a current-thread runtime.
pub(crate) fn block_on<F: Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(future)
}

/// The registered strategy `name` with `params`, run on `generator` for `question` under
/// `budget` tokens with seed `seed`.
pub(crate) fn solve(
    name: &str,
    params: serde_json::Value,
    generator: Arc<dyn Generator>,
    question: &str,
    budget: u64,
    seed: u64,
) -> Result<Outcome, StrategyError> {
    let strategy = Registry::with_builtins().build(name, params)?;
    let ctx =
        Context::new(generator, Problem::new(question), Budget::tokens(budget)).with_seed(seed);
    block_on(run(strategy.as_ref(), ctx))
}
