//! A probe's samples are the strategy's first samples: drawing the first two of a
//! [`SamplePlan`] early ([`Context::probe_samples`]) and then running the strategy gives the
//! same candidates and spends the same generated and probe tokens as running it unprobed —
//! tested with the deterministic fake generator.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use ponder_strategies::fake::{FakeChunk, FakeGenerator, FakeState};
use ponder_strategies::{
    run, Budget, Context, Outcome, Problem, Registry, SamplePlan, StrategyError,
};
use serde_json::json;

/// Answers vary with the seed; some solutions mark no answer and are asked for one.
fn varied(s: FakeState<'_>) -> FakeChunk {
    if s.text.ends_with("\\boxed{") {
        return FakeChunk::last(format!("{}}}", s.seed % 3), -0.05);
    }
    match s.seed % 4 {
        0 => FakeChunk::last("We add them: 7 + 5 = 12, shared by 3.", -0.2),
        1 => FakeChunk::last("The answer is \\boxed{12}.", -0.1),
        _ => FakeChunk::last(format!("The answer is \\boxed{{{}}}.", s.seed % 5), -0.3),
    }
}

/// Never ends on its own: every sample runs to its cap, its answer marked from the start.
fn endless(_: FakeState<'_>) -> FakeChunk {
    FakeChunk::step("The answer is \\boxed{12} and more words follow", -0.2)
}

fn solve(
    name: &str,
    params: serde_json::Value,
    generator: fn(FakeState<'_>) -> FakeChunk,
    budget: u64,
    probe: Option<SamplePlan>,
) -> Result<Outcome, StrategyError> {
    let strategy = Registry::with_builtins().build(name, params)?;
    let ctx = Context::new(
        Arc::new(FakeGenerator::new(generator)),
        Problem::new("Maya has 7 apples and buys 5 more. How many apples does she have?"),
        Budget::tokens(budget),
    )
    .with_seed(9);
    common::block_on(async {
        if let Some(plan) = probe {
            let drawn = ctx.probe_samples(&plan, 2, budget).await?;
            assert_eq!(drawn.len(), 2);
        }
        run(strategy.as_ref(), ctx).await
    })
}

fn plan_of(name: &str, params: &serde_json::Value) -> SamplePlan {
    Registry::with_builtins()
        .build(name, params.clone())
        .expect("build")
        .sample_plan()
        .expect("a sampling strategy has a plan")
}

type Seen = Vec<(String, Option<String>, usize, bool)>;

fn seen(out: &Outcome) -> Seen {
    out.candidates
        .iter()
        .map(|c| (c.text.clone(), c.answer.clone(), c.tokens, c.finished))
        .collect()
}

#[test]
fn a_probed_run_draws_and_spends_what_an_unprobed_one_does() -> Result<(), StrategyError> {
    let params = json!({"n": 5, "max_tokens": 64});
    for name in ["self_consistency", "best_of_n", "weighted_best_of_n"] {
        for (generator, budget) in [
            (varied as fn(FakeState<'_>) -> FakeChunk, 100_000),
            // Tight: the budget, not max_tokens, sets each sample's cap.
            (endless, 180),
        ] {
            let plain = solve(name, params.clone(), generator, budget, None)?;
            let probed = solve(
                name,
                params.clone(),
                generator,
                budget,
                Some(plan_of(name, &params)),
            )?;
            assert_eq!(plain.candidates.len(), 5, "{name}");
            if budget == 180 {
                assert!(
                    plain.candidates.iter().all(|c| c.tokens < 64),
                    "{name}: tight"
                );
            }
            assert_eq!(seen(&probed), seen(&plain), "{name} @ {budget}");
            assert_eq!(probed.answer, plain.answer, "{name} @ {budget}");
            assert_eq!(
                (probed.usage.generated_tokens, probed.usage.probe_tokens),
                (plain.usage.generated_tokens, plain.usage.probe_tokens),
                "{name} @ {budget}: no probe token is wasted or paid twice"
            );
        }
    }
    Ok(())
}

#[test]
fn a_plan_with_a_larger_cap_continues_the_probed_samples_to_it() -> Result<(), StrategyError> {
    // Probed at 16 tokens per sample, run at 48: every sample, probed or not, reaches 48.
    let small = plan_of("self_consistency", &json!({"n": 4, "max_tokens": 16}));
    let out = solve(
        "self_consistency",
        json!({"n": 4, "max_tokens": 48}),
        endless,
        100_000,
        Some(small),
    )?;
    let tokens: Vec<usize> = out.candidates.iter().map(|c| c.tokens).collect();
    assert_eq!(tokens, vec![48; 4]);
    assert_eq!(out.usage.generated_tokens, 4 * 48);
    Ok(())
}

#[test]
fn samples_of_another_decoding_are_not_reused() -> Result<(), StrategyError> {
    let greedy = plan_of(
        "self_consistency",
        &json!({"n": 3, "max_tokens": 16, "decoding": {"temperature": 0.0}}),
    );
    let out = solve(
        "self_consistency",
        json!({"n": 3, "max_tokens": 16}),
        endless,
        100_000,
        Some(greedy),
    )?;
    // The strategy drew its own three; the probe's two were spent besides.
    assert_eq!(out.candidates.len(), 3);
    assert_eq!(out.usage.generated_tokens, 5 * 16);
    Ok(())
}
