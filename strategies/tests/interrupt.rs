//! Interruptions mid-call: a deadline or a cancellation stops a generator call that is still
//! running (not only between calls), the search ends with its best answer so far and the
//! matching finish reason, and the work the engine did before the interruption is charged.

// Test helpers state expectations with `expect` as the tests do (clippy.toml allows that in
// `#[test]` functions only; library and binary code may not).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ponder_strategies::fake::{FakeChunk, FakeGenerator, FakeState};
use ponder_strategies::{
    run, Budget, ChatTemplateKwargs, Context, Cost, CostTally, ExtendRequest, Extension, Generator,
    Problem, Prompt, Registry, Result, Sampling, SearchFinish, Selection, SeqHandle, StepSpec,
    Strategy, StrategyError,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// What [`Slow`] reports computed before it stalls.
const DONE_BEFORE_STALL: Cost = Cost {
    generated: 7,
    prefill_computed: 11,
    prefill_reused: 0,
    recomputed: 0,
    tree: 18,
};

/// A generator whose `extend` computes a little, then stalls far longer than any test runs
/// (an engine call that would outlive the deadline). Records whether a call was dropped.
struct Slow {
    inner: FakeGenerator,
    dropped: Arc<AtomicBool>,
}

struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[async_trait]
impl Generator for Slow {
    async fn open(
        &self,
        prompt: &Prompt,
        template: &ChatTemplateKwargs,
    ) -> Result<(SeqHandle, usize)> {
        self.inner.open(prompt, template).await
    }
    fn fork(&self, seq: SeqHandle) -> Result<SeqHandle> {
        self.inner.fork(seq)
    }
    fn append(&self, seq: SeqHandle, text: &str) -> Result<usize> {
        self.inner.append(seq, text)
    }
    fn prefill_bound(&self, seq: SeqHandle) -> Result<usize> {
        self.inner.prefill_bound(seq)
    }
    async fn extend(&self, batch: &[ExtendRequest]) -> Result<Vec<Extension>> {
        self.extend_tallied(batch, &CostTally::default()).await
    }
    async fn extend_tallied(
        &self,
        batch: &[ExtendRequest],
        tally: &CostTally,
    ) -> Result<Vec<Extension>> {
        let _guard = SetOnDrop(Arc::clone(&self.dropped));
        tally.add(DONE_BEFORE_STALL);
        tokio::time::sleep(Duration::from_secs(600)).await;
        self.inner.extend(batch).await
    }
    fn release(&self, seq: SeqHandle) {
        self.inner.release(seq)
    }
}

fn slow() -> (Arc<Slow>, Arc<AtomicBool>) {
    let dropped = Arc::new(AtomicBool::new(false));
    let g = Arc::new(Slow {
        inner: FakeGenerator::arithmetic(),
        dropped: Arc::clone(&dropped),
    });
    (g, dropped)
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(f)
}

fn best_of_n() -> Box<dyn Strategy> {
    Registry::with_builtins()
        .build("best_of_n", json!({"n": 2, "max_tokens": 32}))
        .expect("strategy")
}

#[test]
fn a_deadline_interrupts_a_call_in_flight_and_charges_what_was_computed() {
    let (g, dropped) = slow();
    let budget = Budget {
        tokens: 10_000,
        deadline: Some(Duration::from_millis(30)),
    };
    let ctx = Context::new(g, Problem::new("What is 2+3?"), budget);
    let out = block_on(run(best_of_n().as_ref(), ctx)).expect("outcome");
    assert_eq!(out.finish_reason, SearchFinish::Deadline);
    assert!(
        dropped.load(Ordering::SeqCst),
        "the stalled call was dropped"
    );
    assert_eq!(out.usage.generated_tokens, DONE_BEFORE_STALL.generated);
    assert_eq!(
        out.usage.prefill_tokens_computed,
        DONE_BEFORE_STALL.prefill_computed
    );
}

#[test]
fn a_cancelled_call_is_charged_what_was_computed() {
    let (g, dropped) = slow();
    let cancel = CancellationToken::new();
    let ctx = Context::new(g, Problem::new("What is 2+3?"), Budget::tokens(10_000))
        .with_cancellation(cancel.clone());
    let out = block_on(async move {
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(30)).await;
            cancel.cancel();
        });
        run(best_of_n().as_ref(), ctx).await
    })
    .expect("outcome");
    assert_eq!(out.finish_reason, SearchFinish::Cancelled);
    assert!(dropped.load(Ordering::SeqCst));
    assert_eq!(
        out.usage.spent(),
        7 + 11,
        "not zero: the engine did that work"
    );
}

/// Catches every error and returns normally, as a strategy keeping its best answer might.
struct Swallows;

#[async_trait]
impl Strategy for Swallows {
    fn name(&self) -> &str {
        "swallows"
    }

    async fn search(&self, ctx: &Context) -> Result<Selection> {
        let root = ctx.open().await?;
        let spec = StepSpec {
            max_tokens: 16,
            stop: Vec::new(),
            sampling: Sampling::default(),
        };
        let _ignored = ctx.extend(vec![(root, 0)], &spec).await;
        Ok(Selection::default())
    }
}

#[test]
fn a_search_that_caught_the_deadline_still_reports_it() {
    let (g, _) = slow();
    let budget = Budget {
        tokens: 10_000,
        deadline: Some(Duration::from_millis(30)),
    };
    let ctx = Context::new(g, Problem::new("What is 2+3?"), budget);
    let out = block_on(run(&Swallows, ctx)).expect("outcome");
    assert_eq!(out.finish_reason, SearchFinish::Deadline);
}

#[test]
fn cancellation_and_deadlines_end_the_search_with_the_best_answer_so_far(
) -> Result<(), StrategyError> {
    // A cancelled search stops before doing anything and says so.
    let token = CancellationToken::new();
    token.cancel();
    let strategy = Registry::with_builtins().build("self_consistency", json!({}))?;
    let ctx = Context::new(
        Arc::new(FakeGenerator::arithmetic()),
        Problem::new("What is 2+3?"),
        Budget::tokens(10_000),
    )
    .with_cancellation(token);
    let out = block_on(run(strategy.as_ref(), ctx))?;
    assert_eq!(out.finish_reason, SearchFinish::Cancelled);
    assert_eq!(out.usage.spent(), 0);
    // A deadline that passes mid-search keeps what was found: one step per call, 5 ms each.
    let slow = FakeGenerator::new(|s: FakeState<'_>| {
        std::thread::sleep(std::time::Duration::from_millis(5));
        FakeChunk::last(format!("so \\boxed{{{}}}", s.seed % 2), -0.1)
    });
    let strategy = Registry::with_builtins().build(
        "adaptive_parallel",
        json!({"initial": 1, "grow": 1, "max_n": 1000, "stop_confidence": 1.0}),
    )?;
    let budget = Budget {
        tokens: 1_000_000,
        deadline: Some(std::time::Duration::from_millis(60)),
    };
    let ctx = Context::new(Arc::new(slow), Problem::new("What is 2+3?"), budget);
    let out = block_on(run(strategy.as_ref(), ctx))?;
    assert_eq!(out.finish_reason, SearchFinish::Deadline);
    assert!(
        !out.candidates.is_empty() && out.answer.is_some(),
        "an answer from the traces finished in time"
    );
    Ok(())
}
