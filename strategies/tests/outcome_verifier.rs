//! A verifier that judges finished candidates only (`Verifier::scores_partial` false, as the
//! learned outcome verifier is) scores what best-of-N and MCTS roll-outs hand it, and a search
//! that would score a tree's partial solutions with it is refused before it is called — not
//! given scores out of its distribution.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use ponder_strategies::fake::{FakeChunk, FakeGenerator, FakeState};
use ponder_strategies::{run, Budget, Context, Outcome, Problem, Registry, StrategyError};
use ponder_verifiers::{Scores, Solution, Verifier, VerifierError};
use serde_json::json;

/// Scores every solution 0.5 and counts the solutions it was shown; judges finished
/// candidates only.
#[derive(Default)]
struct WholeOnly {
    seen: AtomicUsize,
}

#[async_trait::async_trait]
impl Verifier for WholeOnly {
    fn name(&self) -> &str {
        "whole-only"
    }

    fn scores_partial(&self) -> bool {
        false
    }

    async fn score(&self, solution: Solution<'_>) -> ponder_verifiers::Result<Scores> {
        self.seen.fetch_add(1, Ordering::SeqCst);
        Ok(Scores::uniform(solution.steps.len(), 0.5))
    }
}

/// Three steps, then `\boxed{5}`.
fn three_steps() -> Arc<FakeGenerator> {
    Arc::new(FakeGenerator::new(|s: FakeState<'_>| {
        if s.text.matches("\n\n").count() >= 2 {
            FakeChunk::last("so \\boxed{5}", -0.2)
        } else {
            FakeChunk::step(format!("step {}\n\n", s.seed % 7), -0.2)
        }
    }))
}

fn solve(
    name: &str,
    params: serde_json::Value,
    verifier: Arc<WholeOnly>,
) -> Result<Outcome, StrategyError> {
    let strategy = Registry::with_builtins().build(name, params)?;
    let ctx = Context::new(
        three_steps(),
        Problem::new("What is 2+3?"),
        Budget::tokens(50_000),
    )
    .with_verifier(verifier);
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(run(strategy.as_ref(), ctx))
}

#[test]
fn finished_candidates_and_roll_outs_are_scored() {
    for (name, params) in [
        ("best_of_n", json!({"n": 4, "score_by": "orm"})),
        ("weighted_best_of_n", json!({"n": 4, "score_by": "orm"})),
        ("mcts", json!({"iterations": 3, "leaf_value": "rollout"})),
    ] {
        let verifier = Arc::new(WholeOnly::default());
        let out =
            solve(name, params, Arc::clone(&verifier)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(out.answer.as_deref(), Some("5"), "{name}");
        assert!(
            verifier.seen.load(Ordering::SeqCst) > 0,
            "{name}: the verifier scored"
        );
    }
}

#[test]
fn a_tree_search_scoring_partial_solutions_is_refused_before_the_verifier_is_called() {
    for (name, params) in [
        ("beam_search", json!({"n": 4, "width": 2})),
        ("a_star", json!({})),
        ("mcts", json!({"iterations": 3, "leaf_value": "prm"})),
    ] {
        let verifier = Arc::new(WholeOnly::default());
        match solve(name, params, Arc::clone(&verifier)) {
            Err(StrategyError::Verifier(VerifierError::InvalidRequest {
                verifier: v,
                reason,
            })) => {
                assert_eq!(v, "whole-only", "{name}");
                assert!(
                    reason.contains("finished candidates only"),
                    "{name}: {reason}"
                );
            }
            other => panic!("{name}: expected the refusal, got {other:?}"),
        }
        assert_eq!(
            verifier.seen.load(Ordering::SeqCst),
            0,
            "{name}: never called"
        );
    }
}
