//! Fidelity tests: each asserts a property the method's paper (or reference implementation)
//! defines, against the scripted `FakeGenerator` — capped steps, roll-outs, duplicate beams,
//! DVTS subtree ends, balanced answer probes, step-wise PRM scoring of whole solutions,
//! DeepConf's online consensus stop and offline filter, per-trace seeds, adaptive widening and
//! pruning — and that independent work is submitted together.

// Tests state expectations with `expect` (clippy.toml allows it in `#[test]` functions).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::sync::Arc;

use ponder_strategies::fake::{FakeChunk, FakeGenerator, FakeState};
use ponder_strategies::{
    run, Budget, Context, NodeStatus, Outcome, Problem, Registry, SearchTree, StrategyError,
};
use ponder_verifiers::{FnVerifier, Scores, Solution, Verifier};
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
    seed: u64,
) -> Result<Outcome, StrategyError> {
    let strategy = Registry::with_builtins().build(name, params)?;
    let mut ctx = Context::new(
        generator,
        Problem::new("What is 2+3?"),
        Budget::tokens(1_000_000),
    )
    .with_seed(seed);
    if let Some(v) = verifier {
        ctx = ctx.with_verifier(v);
    }
    block_on(run(strategy.as_ref(), ctx))
}

/// Reads `tag=<number>` from `text`.
fn tagged(text: &str, tag: &str) -> Option<f32> {
    text.split(&format!("{tag}="))
        .nth(1)?
        .split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .next()?
        .parse()
        .ok()
}

/// Scores every step by its own `s=` tag (0.5 without one).
fn per_step_score() -> Arc<dyn Verifier> {
    Arc::new(FnVerifier::new("per-step", |sol: &Solution<'_>| {
        let steps: Vec<f32> = sol
            .steps
            .iter()
            .map(|s| tagged(s, "s").unwrap_or(0.5))
            .collect();
        let overall = steps.last().copied().unwrap_or(0.0);
        Scores {
            steps,
            overall,
            cost: 0,
        }
    }))
}

fn note_f64(out: &Outcome, id: usize, key: &str) -> Option<f64> {
    out.tree.get(id)?.notes.get(key)?.as_f64()
}

fn finished_answers(out: &Outcome) -> Vec<Option<String>> {
    out.candidates
        .iter()
        .filter(|c| c.finished)
        .map(|c| c.answer.clone())
        .collect()
}

#[test]
fn a_capped_step_is_never_a_finished_solution() -> Result<(), StrategyError> {
    // The first step is 30 words with no delimiter before its end: at 10 tokens a step it is
    // cut twice. Then a short step, then the answer. Probes answer 5.
    let generator = || {
        Arc::new(FakeGenerator::new(|s: FakeState<'_>| {
            if s.text.ends_with("\\boxed{") {
                return FakeChunk::last("5}", -0.05);
            }
            let steps = s.text.matches("\n\n").count();
            let words = s.text.split_whitespace().count();
            match steps {
                0 => FakeChunk::step(format!("{}w\n\n", "w ".repeat(29 - words)), -0.1),
                1 => FakeChunk::step("The sum is 5.\n\n", -0.1),
                _ => FakeChunk::last("So \\boxed{5}.", -0.1),
            }
        }))
    };
    let steps = json!({"max_step_tokens": 10, "max_steps": 8});
    for (name, params) in [
        ("beam_search", json!({"n": 4, "width": 2, "steps": steps})),
        ("dvts", json!({"n": 4, "width": 2, "steps": steps})),
        ("a_star", json!({"steps": steps})),
        (
            "mcts",
            json!({"iterations": 8, "batch": 1, "c_puct": 0.0, "steps": steps}),
        ),
        ("answer_convergence", json!({"patience": 2, "steps": steps})),
    ] {
        let out = solve(name, params, generator(), None, 3)?;
        assert_eq!(
            out.answer.as_deref(),
            Some("5"),
            "{name}: {:?}",
            out.candidates
        );
        for c in &out.candidates {
            assert!(
                c.text.matches("\n\n").count() >= 1 || !c.finished,
                "{name}: a capped step was taken for a solution: {:?}",
                c.text
            );
        }
        if name != "answer_convergence" {
            assert!(
                finished_answers(&out).contains(&Some("5".into())),
                "{name}: the capped first step was continued to a finished solution"
            );
        }
    }
    Ok(())
}

/// Six steps, then `\boxed{6}`; every step of a seed-tagged score.
fn six_steps() -> Arc<FakeGenerator> {
    Arc::new(FakeGenerator::new(|s: FakeState<'_>| {
        let d = s.text.matches("\n\n").count() + 1;
        let tag = (s.seed % 1000) as f32 / 1000.0;
        if d >= 6 {
            FakeChunk::last(format!("d{d} s={tag:.3} \\boxed{{6}}"), -0.2)
        } else {
            FakeChunk::step(format!("d{d} s={tag:.3}\n\n"), -0.2)
        }
    }))
}

#[test]
fn beam_and_dvts_roll_the_survivors_out_to_the_end() -> Result<(), StrategyError> {
    for name in ["beam_search", "dvts"] {
        let params = json!({"n": 4, "width": 2, "steps": {"max_steps": 3}});
        let out = solve(name, params, six_steps(), Some(per_step_score()), 5)?;
        assert!(!out.candidates.is_empty());
        assert!(
            out.candidates.iter().all(|c| c.finished),
            "{name}: the last iteration generates to the end: {:?}",
            out.candidates.iter().map(|c| &c.text).collect::<Vec<_>>()
        );
        assert_eq!(out.answer.as_deref(), Some("6"), "{name}");
    }
    Ok(())
}

#[test]
fn beam_search_stops_once_n_solutions_are_complete() -> Result<(), StrategyError> {
    // A child whose seed is even ends the solution; the others take another step.
    let generator = Arc::new(FakeGenerator::new(|s: FakeState<'_>| {
        let d = s.text.matches("\n\n").count() + 1;
        if s.seed.is_multiple_of(2) {
            FakeChunk::last(format!("d{d} \\boxed{{{d}}}"), -0.1)
        } else {
            FakeChunk::step(format!("d{d} s{}\n\n", s.seed % 997), -0.1)
        }
    }));
    let params = json!({"n": 4, "width": 2, "steps": {"max_steps": 10}});
    let out = solve("beam_search", params, generator, None, 7)?;
    let finished: Vec<usize> = out
        .candidates
        .iter()
        .filter(|c| c.finished)
        .map(|c| out.tree.get(c.node).map_or(0, |n| n.depth))
        .collect();
    assert!(finished.len() >= 4, "{finished:?}");
    // The depth at which the fourth solution was completed is the last one generated.
    let mut sorted = finished.clone();
    sorted.sort_unstable();
    let deepest = out.tree.nodes().map(|n| n.depth).max().unwrap_or(0);
    assert_eq!(deepest, sorted[3], "no step after N = 4 complete solutions");
    assert!(deepest < 10, "the search ended before max_steps");
    Ok(())
}

#[test]
fn beam_search_drops_duplicate_beams() -> Result<(), StrategyError> {
    // Every sample of a step is the same text: M = 2 beams would be one beam twice.
    let generator = Arc::new(FakeGenerator::new(|s: FakeState<'_>| {
        let d = s.text.matches("\n\n").count() + 1;
        if d >= 4 {
            FakeChunk::last("\\boxed{4}", -0.1)
        } else {
            FakeChunk::step(format!("step {d}\n\n"), -0.1)
        }
    }));
    let params = json!({"n": 4, "width": 2});
    let out = solve("beam_search", params, generator, None, 1)?;
    for depth in 1..4 {
        let kept = out
            .tree
            .nodes()
            .filter(|n| n.depth == depth && n.status == NodeStatus::Expanded)
            .count();
        assert_eq!(kept, 1, "depth {depth}: one distinct beam");
        assert!(out
            .tree
            .nodes()
            .any(|n| n.depth == depth && n.notes.contains_key("duplicate")));
    }
    assert_eq!(out.answer.as_deref(), Some("4"));
    Ok(())
}

#[test]
fn n_not_divisible_by_width_still_samples_n_children_per_step() -> Result<(), StrategyError> {
    for (name, n, width) in [("beam_search", 7, 2), ("dvts", 10, 4)] {
        let params = json!({"n": n, "width": width, "steps": {"max_steps": 4}});
        let out = solve(name, params, six_steps(), Some(per_step_score()), 2)?;
        let first = out.tree.nodes().filter(|n| n.depth == 1).count();
        assert_eq!(first, n, "{name}: n = {n}, width = {width}");
    }
    Ok(())
}

#[test]
fn a_dvts_subtree_ends_when_its_best_child_has_finished() -> Result<(), StrategyError> {
    // A child with seed % 3 == 0 finishes (score 0.9); the others take a step (score 0.5).
    let generator = Arc::new(FakeGenerator::new(|s: FakeState<'_>| {
        let d = s.text.matches("\n\n").count() + 1;
        if s.seed.is_multiple_of(3) {
            FakeChunk::last(format!("d{d} s=0.9 \\boxed{{{d}}}"), -0.1)
        } else {
            FakeChunk::step(format!("d{d} s=0.5 r{}\n\n", s.seed % 997), -0.1)
        }
    }));
    let params = json!({"n": 8, "width": 4, "steps": {"max_steps": 10}});
    let out = solve("dvts", params, generator, Some(per_step_score()), 4)?;
    let mut ended_some = false;
    for g in 0..2 {
        let group: Vec<_> = out
            .tree
            .nodes()
            .filter(|n| n.notes.get("group") == Some(&json!(g)))
            .collect();
        let first_finish = group
            .iter()
            .filter(|n| n.status == NodeStatus::Finished)
            .map(|n| n.depth)
            .min();
        let deepest = group.iter().map(|n| n.depth).max().unwrap_or(0);
        if let Some(d) = first_finish {
            ended_some = true;
            assert_eq!(
                deepest, d,
                "subtree {g} went on after its best child finished"
            );
        }
    }
    assert!(ended_some, "the script finished some children");
    Ok(())
}

#[test]
fn dvts_subtrees_share_each_call_and_probes_go_with_the_next_step() -> Result<(), StrategyError> {
    // Two subtrees, four steps (the last a roll-out): four engine calls of eight children.
    let generator = six_steps();
    let params = json!({"n": 8, "width": 4, "steps": {"max_steps": 4}});
    let out = solve("dvts", params, generator.clone(), Some(per_step_score()), 5)?;
    let c = generator.counters();
    let depth = out.tree.nodes().map(|n| n.depth).max().unwrap_or(0) as u64;
    assert_eq!(depth, 4);
    assert_eq!(
        (c.extend_calls, c.sequences_extended),
        (depth, 8 * depth),
        "every step of both subtrees is one call"
    );
    let generator = Arc::new(FakeGenerator::arithmetic());
    solve(
        "answer_convergence",
        json!({"patience": 5}),
        generator.clone(),
        None,
        0,
    )?;
    assert!(
        generator.counters().max_in_flight >= 2,
        "the probe is submitted with the next step"
    );
    Ok(())
}

#[test]
fn the_answer_probe_reads_a_balanced_box() -> Result<(), StrategyError> {
    let generator = Arc::new(FakeGenerator::new(|s: FakeState<'_>| {
        // The probe's answer, continued from wherever the last decode stopped. Word tokens:
        // the `}` that closes the numerator ends a token of its own.
        let full = "\\frac{ 1 }{ 2 }} and more";
        if let Some(at) = s.text.rfind("\\boxed{") {
            let written = &s.text[at + "\\boxed{".len()..];
            let rest = full.strip_prefix(written).unwrap_or("");
            return FakeChunk::last(rest, -0.01);
        }
        let d = s.text.matches("\n\n").count();
        FakeChunk::step(format!("step {d}\n\n"), -0.1)
    }));
    let out = solve(
        "answer_convergence",
        json!({"patience": 2}),
        generator,
        None,
        0,
    )?;
    let answer = out.answer.unwrap_or_default().replace(' ', "");
    assert_eq!(
        answer, "\\frac{1}{2}",
        "the probe read past the numerator's brace"
    );
    Ok(())
}

#[test]
fn best_of_n_scores_a_finished_solution_step_by_step() -> Result<(), StrategyError> {
    let generator = || {
        Arc::new(FakeGenerator::new(|_s: FakeState<'_>| {
            FakeChunk::last("s=0.9 first\n\ns=0.2 second\n\ns=0.8 so \\boxed{5}", -0.1)
        }))
    };
    for name in ["best_of_n", "weighted_best_of_n"] {
        let mut scores = Vec::new();
        for by in ["prm_last", "prm_min", "prm_prod"] {
            let params = json!({"n": 1, "score_by": by});
            let out = solve(name, params, generator(), Some(per_step_score()), 1)?;
            scores.push(out.candidates[0].score.unwrap_or(-1.0));
        }
        let expected = [0.8f32, 0.2, 0.9 * 0.2 * 0.8];
        for (got, want) in scores.iter().zip(expected) {
            assert!((got - want).abs() < 1e-5, "{name}: {scores:?}");
        }
    }
    Ok(())
}

/// A trace of `len` words ending in `\boxed{answer}`; the first word is `open<seed>`.
fn traces(answer: fn(u64) -> u64, logprob: fn(u64) -> f32) -> Arc<FakeGenerator> {
    Arc::new(FakeGenerator::new(move |s: FakeState<'_>| {
        let first = s.text.split_whitespace().next().map(str::to_string);
        let seed: u64 = match first.as_deref().and_then(|w| w.strip_prefix("open")) {
            Some(x) => x.parse().unwrap_or(0),
            None => return FakeChunk::step(format!("open{} ", s.seed), logprob(s.seed)),
        };
        let written = s.text.split_whitespace().count();
        FakeChunk::last(
            format!(
                "{}\\boxed{{{}}}",
                "w ".repeat(40usize.saturating_sub(written)),
                answer(seed)
            ),
            logprob(seed),
        )
    }))
}

fn openings(out: &Outcome) -> Vec<String> {
    out.tree
        .nodes()
        .filter(|n| n.depth == 1)
        .filter_map(|n| n.text.split_whitespace().next().map(str::to_string))
        .collect()
}

#[test]
fn deepconf_online_stops_at_consensus() -> Result<(), StrategyError> {
    let params = json!({"n": 8, "warmup": 3, "window": 8, "chunk_tokens": 8,
                        "consensus_min_votes": 3});
    let out = solve("deepconf", params, traces(|_| 4, |_| -0.1), None, 3)?;
    assert_eq!(out.answer.as_deref(), Some("4"));
    assert_eq!(
        out.candidates.len(),
        3,
        "three agreeing warm-up traces are a consensus of three (share 1 ≥ τ = 0.95)"
    );
    assert!(note_f64(&out, SearchTree::ROOT, "consensus").is_some_and(|s| s >= 0.95));
    // By default a consensus needs four agreeing votes: three warm-up traces do not stop it.
    let params = json!({"n": 8, "warmup": 3, "window": 8, "chunk_tokens": 8});
    let out = solve("deepconf", params, traces(|_| 4, |_| -0.1), None, 3)?;
    assert_eq!(out.answer.as_deref(), Some("4"));
    assert!(
        out.candidates.len() >= 4,
        "stopped on {} votes",
        out.candidates.len()
    );
    // Without the stop every trace runs.
    let params = json!({"n": 8, "warmup": 3, "window": 8, "chunk_tokens": 8, "consensus": null});
    let out = solve("deepconf", params, traces(|_| 4, |_| -0.1), None, 3)?;
    assert_eq!(out.candidates.len(), 8);
    Ok(())
}

#[test]
fn deepconf_offline_keeps_the_most_confident_traces_and_votes() -> Result<(), StrategyError> {
    // Confident traces (seed % 4 == 0) answer 1; the unconfident majority answers 2.
    let gen = || {
        traces(
            |s| if s % 4 == 0 { 1 } else { 2 },
            |s| if s % 4 == 0 { -0.05 } else { -2.5 },
        )
    };
    let all = json!({"mode": "offline", "n": 12, "keep_percent": 100.0, "window": 8});
    let everyone = solve("deepconf", all, gen(), None, 2)?;
    let confident = everyone
        .candidates
        .iter()
        .filter(|c| c.answer.as_deref() == Some("1"))
        .count();
    assert!(
        (1..=3).contains(&confident),
        "the seed gives a confident minority ({confident} of 12)"
    );
    assert_eq!(everyone.candidates.len(), 12, "offline runs every trace");
    assert_eq!(
        everyone.answer.as_deref(),
        Some("2"),
        "unfiltered, the majority wins"
    );
    let keep = 100.0 * confident as f64 / 12.0;
    let top = json!({"mode": "offline", "n": 12, "keep_percent": keep, "window": 8});
    let filtered = solve("deepconf", top, gen(), None, 2)?;
    assert_eq!(filtered.answer.as_deref(), Some("1"), "the top η% vote");
    let kept: Vec<bool> = filtered
        .tree
        .nodes()
        .filter_map(|n| n.notes.get("kept").and_then(|v| v.as_bool()))
        .collect();
    assert_eq!(kept.iter().filter(|k| **k).count(), confident);
    Ok(())
}

#[test]
fn every_trace_of_a_search_has_its_own_seed() -> Result<(), StrategyError> {
    // Every answer differs, so neither search stops early; no two traces may open alike.
    for (name, params) in [
        (
            "deepconf",
            json!({"n": 8, "warmup": 3, "window": 8, "chunk_tokens": 8}),
        ),
        (
            "adaptive_parallel",
            json!({"initial": 2, "grow": 2, "max_n": 8, "chunk_tokens": 8}),
        ),
    ] {
        let out = solve(name, params, traces(|s| s, |_| -0.1), None, 5)?;
        let opens = openings(&out);
        let distinct: BTreeSet<&String> = opens.iter().collect();
        assert_eq!(opens.len(), 8, "{name}: {opens:?}");
        assert_eq!(distinct.len(), opens.len(), "{name}: {opens:?}");
    }
    Ok(())
}

#[test]
fn adaptive_parallel_prunes_with_its_defaults() -> Result<(), StrategyError> {
    // Odd seeds give unconfident traces; all agree on the answer.
    let gen = traces(|_| 3, |s| if s % 2 == 1 { -2.5 } else { -0.05 });
    let out = solve("adaptive_parallel", json!({}), gen, None, 1)?;
    let unconfident: Vec<_> = out
        .tree
        .nodes()
        .filter(|n| n.depth == 1 && n.mean_logprob.is_some_and(|m| m < -1.0))
        .collect();
    assert!(
        !unconfident.is_empty(),
        "the seed launched unconfident traces"
    );
    let pruned = out
        .tree
        .nodes()
        .filter(|n| n.notes.contains_key("pruned_low_confidence"))
        .count();
    assert_eq!(
        pruned,
        unconfident.len(),
        "every unconfident trace is pruned"
    );
    assert_eq!(out.answer.as_deref(), Some("3"));
    Ok(())
}

/// Traces of seed-chosen length 8–200 words answering 7: `len<L>` first.
fn long_and_short() -> Arc<FakeGenerator> {
    Arc::new(FakeGenerator::new(|s: FakeState<'_>| {
        let len: usize = match s
            .text
            .split_whitespace()
            .next()
            .and_then(|w| w.strip_prefix("len"))
            .and_then(|w| w.parse().ok())
        {
            Some(l) => l,
            None => return FakeChunk::step(format!("len{} ", 8 + s.seed % 193), -0.1),
        };
        let rest = len.saturating_sub(s.text.split_whitespace().count());
        FakeChunk::last(format!("{}\\boxed{{7}}", "w ".repeat(rest)), -0.1)
    }))
}

#[test]
fn adaptive_parallel_stops_running_traces_once_the_vote_is_decided() -> Result<(), StrategyError> {
    // Five traces of different lengths all answer 7: the fourth to finish decides (4–0 ≥ 0.95).
    let params = json!({"initial": 5, "grow": 1, "max_n": 5, "chunk_tokens": 4});
    let out = solve("adaptive_parallel", params, long_and_short(), None, 6)?;
    let stopped = out
        .tree
        .nodes()
        .filter(|n| n.notes.contains_key("stopped_decided"))
        .count();
    assert_eq!(out.candidates.len() + stopped, 5);
    assert_eq!(out.candidates.len(), 4, "decided at 4–0, the fifth stopped");
    Ok(())
}

#[test]
fn adaptive_parallel_widens_while_earlier_traces_still_run() -> Result<(), StrategyError> {
    let params = json!({"initial": 2, "grow": 2, "max_n": 6, "chunk_tokens": 4});
    let out = solve("adaptive_parallel", params, long_and_short(), None, 8)?;
    let roots: Vec<usize> = out.tree.children(SearchTree::ROOT);
    assert!(roots.len() > 2, "the search widened");
    // A later trace's first chunk was generated before an initial trace's last one.
    let last_of = |start: usize| {
        let mut cur = start;
        while let Some(&c) = out.tree.children(cur).last() {
            cur = c;
        }
        cur
    };
    let initial_end = roots[..2].iter().map(|r| last_of(*r)).max().unwrap_or(0);
    assert!(
        roots[2..].iter().any(|r| *r < initial_end),
        "widened traces joined while the first ones ran ({roots:?}, end {initial_end})"
    );
    Ok(())
}
