//! One canonical answer per candidate: a solution that marks no final answer is asked for one
//! (a probe charged as probe tokens), a marked one is not, and numeric answers with units vote
//! as numbers — tested with the deterministic fake generator.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use ponder_strategies::fake::{FakeChunk, FakeGenerator, FakeState};
use ponder_strategies::{Outcome, StrategyError};
use serde_json::json;

fn solve(name: &str, generator: FakeGenerator) -> Result<Outcome, StrategyError> {
    common::solve(
        name,
        json!({"n": 4, "max_tokens": 64}),
        Arc::new(generator),
        "Maya has 7 apples and buys 5 more. How many apples does she have?",
        100_000,
        1,
    )
}

#[test]
fn a_solution_without_a_marked_answer_is_asked_for_one() -> Result<(), StrategyError> {
    for strategy in ["self_consistency", "weighted_best_of_n"] {
        // The solution's last number is not its answer (3 friends); asked, the model says 12.
        let generator = FakeGenerator::new(|s: FakeState<'_>| {
            if s.text.ends_with("\\boxed{") {
                FakeChunk::last("12 apples}", -0.05)
            } else {
                FakeChunk::last("So 7 + 5 = 12 apples, shared with 3 friends.", -0.1)
            }
        });
        let out = solve(strategy, generator)?;
        assert!(
            out.usage.probe_tokens > 0,
            "{strategy}: the probe is charged"
        );
        let answers: Vec<Option<&str>> =
            out.candidates.iter().map(|c| c.answer.as_deref()).collect();
        assert_eq!(answers, vec![Some("12"); 4], "{strategy}");
        assert_eq!(out.answer.as_deref(), Some("12"));
    }
    Ok(())
}

#[test]
fn a_marked_answer_is_not_probed_and_votes_as_a_number() -> Result<(), StrategyError> {
    // `45 minutes` and `45` are recorded as `45`; the vote counts them together.
    let generator = FakeGenerator::new(|s: FakeState<'_>| match s.seed % 4 {
        0 => FakeChunk::last("The answer is 45 minutes.", -0.1),
        1 => FakeChunk::last("The answer is 40.", -0.1),
        _ => FakeChunk::last("The answer is 45.", -0.1),
    });
    let out = solve("self_consistency", generator)?;
    assert_eq!(
        out.usage.probe_tokens, 0,
        "no probe when the answer is marked"
    );
    let answers: Vec<&str> = out
        .candidates
        .iter()
        .filter_map(|c| c.answer.as_deref())
        .collect();
    assert_eq!(answers.len(), 4);
    assert!(
        answers.iter().all(|a| *a == "40" || *a == "45"),
        "{answers:?}"
    );
    let fives = answers.iter().filter(|a| **a == "45").count();
    if fives != 2 {
        let majority = if fives > 2 { "45" } else { "40" };
        assert_eq!(out.answer.as_deref(), Some(majority), "{answers:?}");
    }
    Ok(())
}
