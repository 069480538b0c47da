//! Early-stopping strategies against the scripted `FakeGenerator`: first-finish and
//! short-m@k pick by length, DeepConf stops unconfident traces, answer convergence stops once
//! its probes agree (one chain or several), adaptive parallel thinking widens only while the
//! answers disagree. `algorithms.rs` holds the search strategies and the shared properties.

// Test helpers state expectations with `expect` as the tests do (clippy.toml allows that in
// `#[test]` functions only; library and binary code may not).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use ponder_strategies::fake::{FakeChunk, FakeGenerator, FakeState};
use ponder_strategies::{
    run, Budget, Context, Outcome, Problem, Registry, SearchTree, StrategyError,
};
use ponder_verifiers::Verifier;
use serde_json::json;

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(f)
}

fn solve(
    name: &str,
    params: serde_json::Value,
    generator: Arc<FakeGenerator>,
    verifier: Option<Arc<dyn Verifier>>,
    budget: u64,
    seed: u64,
) -> Result<Outcome, StrategyError> {
    let strategy = Registry::with_builtins().build(name, params)?;
    let mut ctx = Context::new(
        generator,
        Problem::new("What is 2+3?"),
        Budget::tokens(budget),
    )
    .with_seed(seed);
    if let Some(v) = verifier {
        ctx = ctx.with_verifier(v);
    }
    block_on(run(strategy.as_ref(), ctx))
}

fn lengths() -> FakeGenerator {
    FakeGenerator::new(|s: FakeState<'_>| {
        let len: usize = match s
            .text
            .split_whitespace()
            .next()
            .and_then(|w| w.strip_prefix("len"))
            .and_then(|w| w.parse().ok())
        {
            Some(l) => l,
            None => return FakeChunk::step(format!("len{} ", 10 + s.seed % 60), -0.1),
        };
        let written = s.text.split_whitespace().count();
        let rest = len.saturating_sub(written);
        FakeChunk::last(format!("{}\\boxed{{{len}}}", "w ".repeat(rest)), -0.1)
    })
}

fn trace_lengths(out: &Outcome) -> Vec<usize> {
    out.tree
        .nodes()
        .filter(|n| n.depth == 1)
        .filter_map(|n| {
            n.text
                .split_whitespace()
                .next()
                .and_then(|w| w.strip_prefix("len"))
                .and_then(|l| l.parse().ok())
        })
        .collect()
}

#[test]
fn first_finish_returns_the_shortest_trace() -> Result<(), StrategyError> {
    let generator = Arc::new(lengths());
    let out = solve(
        "first_finish",
        json!({"k": 6, "chunk_tokens": 4}),
        generator.clone(),
        None,
        1_000_000,
        9,
    )?;
    let lens = trace_lengths(&out);
    assert_eq!(lens.len(), 6);
    let shortest = lens.iter().min().copied().unwrap_or(0);
    assert_eq!(out.answer, Some(shortest.to_string()), "lengths {lens:?}");
    assert_eq!(out.candidates.len(), 1);
    assert_eq!(
        generator.counters().live,
        0,
        "every other trace was cancelled and released"
    );
    // The others stopped early: nothing was generated past the finisher's chunk.
    assert!(out.usage.generated_tokens < 6 * (shortest as u64 + 8));
    Ok(())
}

#[test]
fn short_m_of_k_votes_among_the_first_m() -> Result<(), StrategyError> {
    let out = solve(
        "short_m_of_k",
        json!({"k": 6, "m": 3, "chunk_tokens": 4}),
        Arc::new(lengths()),
        None,
        1_000_000,
        9,
    )?;
    let mut lens = trace_lengths(&out);
    lens.sort_unstable();
    assert_eq!(out.candidates.len(), 3);
    let finished: Vec<String> = out
        .candidates
        .iter()
        .filter_map(|c| c.answer.clone())
        .collect();
    // The three finishers are the three shortest chunk-rounded traces.
    for a in &finished {
        let l: usize = a.parse().unwrap_or(usize::MAX);
        assert!(l.div_ceil(4) <= lens[2].div_ceil(4) + 1, "{l} vs {lens:?}");
    }
    // All distinct → a tie, won by the first (shortest) finisher.
    assert_eq!(out.answer.as_ref(), finished.first());
    Ok(())
}

#[test]
fn deepconf_stops_low_confidence_traces() -> Result<(), StrategyError> {
    // Half the traces (by seed) are unconfident; each trace is 60 words long.
    let generator = FakeGenerator::new(|s: FakeState<'_>| {
        let kind = match s.text.split_whitespace().next() {
            Some(k) => k.to_string(),
            None => (if s.seed.is_multiple_of(2) { "hi" } else { "lo" }).to_string(),
        };
        let lp = if kind == "hi" { -0.05 } else { -2.5 };
        let written = s.text.split_whitespace().count();
        if written == 0 {
            return FakeChunk::step(format!("{kind} "), lp);
        }
        let answer = if kind == "hi" { 1 } else { 2 };
        FakeChunk::last(
            format!(
                "{}\\boxed{{{answer}}}",
                "w ".repeat(60usize.saturating_sub(written))
            ),
            lp,
        )
    });
    // One warm-up trace passes a 10% filter; without `consensus: null` its lone vote would be a
    // consensus and stop the search.
    let params = json!({"n": 10, "warmup": 4, "window": 8, "keep_percent": 10.0, "chunk_tokens": 8, "consensus": null});
    let out = solve("deepconf", params, Arc::new(generator), None, 1_000_000, 21)?;
    let threshold = out
        .tree
        .get(SearchTree::ROOT)
        .and_then(|n| n.notes.get("threshold"))
        .and_then(|v| v.as_f64())
        .unwrap_or(0.0);
    assert!(
        threshold > 2.0,
        "a confident warm-up trace set a high threshold ({threshold})"
    );
    let stopped: Vec<_> = out
        .tree
        .nodes()
        .filter(|n| n.notes.contains_key("stopped_low_confidence"))
        .collect();
    assert!(!stopped.is_empty(), "some online traces were unconfident");
    for n in &stopped {
        assert!(
            out.tree.text(n.id).starts_with("lo"),
            "only unconfident traces are stopped"
        );
        assert!(
            out.tree
                .path(n.id)
                .iter()
                .map(|i| out.tree.get(*i).map_or(0, |x| x.tokens))
                .sum::<usize>()
                < 61,
            "stopped before the end"
        );
    }
    assert_eq!(
        out.answer.as_deref(),
        Some("1"),
        "the confident traces' answer wins the weighted vote"
    );
    Ok(())
}

#[test]
fn answer_convergence_stops_once_probes_agree() -> Result<(), StrategyError> {
    // Twenty steps, but the probe answers 5 from the start.
    let generator = FakeGenerator::new(|s: FakeState<'_>| {
        if s.text.ends_with("\\boxed{") {
            return FakeChunk::last("5}", -0.01);
        }
        let d = s.text.matches("\n\n").count();
        if d >= 20 {
            FakeChunk::last("\\boxed{5}", -0.1)
        } else {
            FakeChunk::step(format!("step {d}\n\n"), -0.1)
        }
    });
    let out = solve(
        "answer_convergence",
        json!({"patience": 3}),
        Arc::new(generator),
        None,
        1_000_000,
        0,
    )?;
    assert_eq!(out.answer.as_deref(), Some("5"));
    let steps = out.tree.nodes().filter(|n| n.depth > 0).count();
    assert_eq!(
        steps, 4,
        "stopped after three agreeing probes (the third submitted with step 4) instead of twenty steps"
    );
    assert!(out.usage.probe_tokens > 0);
    Ok(())
}

#[test]
fn answer_convergence_runs_n_chains_at_once_and_votes_their_answers() -> Result<(), StrategyError> {
    // Each chain's first step carries its seed; the probe answers 7 for chains whose seed is
    // divisible by 3 and 5 otherwise, so chains can disagree and the vote decides.
    let generator = Arc::new(FakeGenerator::new(|s: FakeState<'_>| {
        if s.text.ends_with("\\boxed{") {
            let first = s.text.split("\n\n").next().unwrap_or("");
            let seed: u64 = first.trim_start_matches("seed ").parse().unwrap_or(1);
            return FakeChunk::last(if seed.is_multiple_of(3) { "7}" } else { "5}" }, -0.01);
        }
        match s.text.matches("\n\n").count() {
            0 => FakeChunk::step(format!("seed {}\n\n", s.seed), -0.1),
            d => FakeChunk::step(format!("step {d}\n\n"), -0.1),
        }
    }));
    let out = solve(
        "answer_convergence",
        json!({"n": 5, "patience": 2}),
        generator.clone(),
        None,
        1_000_000,
        3,
    )?;
    assert_eq!(out.candidates.len(), 5, "one answer per chain");
    let openings: std::collections::HashSet<&str> = out
        .candidates
        .iter()
        .map(|c| c.text.split("\n\n").next().unwrap_or(""))
        .collect();
    assert_eq!(openings.len(), 5, "every chain draws its own seed");
    let sevens = out
        .candidates
        .iter()
        .filter(|c| c.answer.as_deref() == Some("7"))
        .count();
    let majority = if sevens * 2 > out.candidates.len() {
        "7"
    } else {
        "5"
    };
    assert_eq!(
        out.answer.as_deref(),
        Some(majority),
        "{:?}",
        out.candidates
    );
    assert!(
        generator.counters().max_in_flight >= 5,
        "the chains run at once, not one after another"
    );
    Ok(())
}

#[test]
fn adaptive_parallel_starting_with_four_decides_an_easy_question_in_one_round(
) -> Result<(), StrategyError> {
    // At the default stop confidence (0.95) four agreeing answers are the fewest that decide
    // (3–0 gives 15/16): a first round of four decides an easy question with nothing after it.
    let agree = FakeGenerator::new(|_s: FakeState<'_>| FakeChunk::last("so \\boxed{4}", -0.1));
    let out = solve(
        "adaptive_parallel",
        json!({"initial": 4}),
        Arc::new(agree),
        None,
        1_000_000,
        1,
    )?;
    assert_eq!(out.candidates.len(), 4);
    let rounds = out
        .tree
        .get(SearchTree::ROOT)
        .and_then(|n| n.notes.get("rounds"))
        .and_then(|v| v.as_u64());
    assert_eq!(rounds, Some(1), "decided without widening");
    assert_eq!(out.answer.as_deref(), Some("4"));
    Ok(())
}

#[test]
fn adaptive_parallel_widens_only_while_answers_disagree() -> Result<(), StrategyError> {
    let agree = FakeGenerator::new(|_s: FakeState<'_>| FakeChunk::last("so \\boxed{4}", -0.1));
    // 3–0 gives the leader posterior 15/16 ≥ 0.9: decided after the first round.
    let params = json!({"initial": 3, "grow": 2, "max_n": 9, "stop_confidence": 0.9});
    let out = solve(
        "adaptive_parallel",
        params.clone(),
        Arc::new(agree),
        None,
        1_000_000,
        1,
    )?;
    assert_eq!(
        out.candidates.len(),
        3,
        "three agreeing traces decide at once"
    );
    let disagree = FakeGenerator::new(|s: FakeState<'_>| {
        FakeChunk::last(format!("so \\boxed{{{}}}", s.seed % 2), -0.1)
    });
    let out = solve(
        "adaptive_parallel",
        params,
        Arc::new(disagree),
        None,
        1_000_000,
        1,
    )?;
    assert!(
        out.candidates.len() > 3,
        "a split vote widens ({} traces)",
        out.candidates.len()
    );
    Ok(())
}
