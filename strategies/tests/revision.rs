//! Sequential revision (Snell et al. 2024) against the scripted `FakeGenerator`: attempt k of a
//! chain is written seeing exactly attempts k−1…k−m of its own chain (m = `context_attempts`),
//! oldest first; `chains` × `attempts` attempts are made; the vote runs across every attempt of
//! every chain (or, with `select: last`, across the chains' final attempts); a budget that binds
//! ends the chains early without being exceeded; bad parameters are refused naming the field.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use ponder_strategies::fake::{FakeChunk, FakeGenerator, FakeState};
use ponder_strategies::{Outcome, Registry, StrategyError};
use serde_json::json;

fn solve(
    params: serde_json::Value,
    generator: Arc<FakeGenerator>,
    budget: u64,
) -> Result<Outcome, StrategyError> {
    common::solve("revision", params, generator, "What is 3+4?", budget, 1)
}

/// Every attempt the model wrote: its number (in the order written) and the attempt numbers
/// its prompt showed, in the order shown.
type Log = Arc<Mutex<Vec<(usize, Vec<usize>)>>>;

/// A model whose attempt number `i` reads "Attempt A<i>" and answers `answer(i)`, logging what
/// each prompt showed.
fn numbered(answer: impl Fn(usize) -> u32 + Send + Sync + 'static) -> (Arc<FakeGenerator>, Log) {
    let log: Log = Arc::default();
    let count = Arc::new(AtomicUsize::new(0));
    let seen = log.clone();
    let generator = FakeGenerator::new(move |s: FakeState<'_>| {
        let i = count.fetch_add(1, Ordering::SeqCst);
        let shown = s
            .prompt
            .split("Attempt A")
            .skip(1)
            .filter_map(|rest| {
                let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                digits.parse().ok()
            })
            .collect();
        seen.lock().unwrap().push((i, shown));
        FakeChunk::last(
            format!(
                "Attempt A{i}: 3 + 4, so the answer is \\boxed{{{}}}",
                answer(i)
            ),
            -0.1,
        )
    });
    (Arc::new(generator), log)
}

/// The chains the log describes (attempt numbers, oldest first): an attempt whose prompt
/// showed nothing starts a chain; a revision continues the chain of the last attempt it saw.
fn chains_of(log: &[(usize, Vec<usize>)]) -> Vec<Vec<usize>> {
    let mut chains: Vec<Vec<usize>> = Vec::new();
    let mut chain_of: HashMap<usize, usize> = HashMap::new();
    for (i, shown) in log {
        let c = match shown.last() {
            None => {
                chains.push(Vec::new());
                chains.len() - 1
            }
            Some(prev) => chain_of[prev],
        };
        chains[c].push(*i);
        chain_of.insert(*i, c);
    }
    chains
}

#[test]
fn revision_k_sees_attempts_k_minus_1_to_k_minus_m_of_its_own_chain() {
    for (chains, attempts, m) in [(1usize, 4usize, 4usize), (2, 5, 2), (3, 3, 1), (2, 6, 3)] {
        let (generator, log) = numbered(|_| 7);
        let out = solve(
            json!({"chains": chains, "attempts": attempts, "context_attempts": m, "max_tokens": 40}),
            generator,
            100_000,
        )
        .unwrap();
        let log = log.lock().unwrap().clone();
        assert_eq!(log.len(), chains * attempts, "{chains}x{attempts}");
        assert_eq!(out.candidates.len(), chains * attempts);
        let found = chains_of(&log);
        assert_eq!(found.len(), chains, "{found:?}");
        let shown: HashMap<usize, Vec<usize>> = log.into_iter().collect();
        for chain in &found {
            assert_eq!(chain.len(), attempts, "{found:?}");
            for (k, i) in chain.iter().enumerate() {
                let expected = &chain[k.saturating_sub(m)..k];
                assert_eq!(
                    &shown[i], expected,
                    "attempt {k} of chain {chain:?} (m {m}) saw {:?}",
                    shown[i]
                );
            }
        }
        // Attempt k of every chain is written in round k: one engine call per round.
        for (k, round) in (0..attempts).map(|k| (k, found.iter().map(move |c| c[k]))) {
            let mut round: Vec<usize> = round.collect();
            round.sort_unstable();
            assert_eq!(
                round,
                ((k * chains)..((k + 1) * chains)).collect::<Vec<_>>()
            );
        }
    }
}

#[test]
fn the_vote_runs_across_every_attempt_of_every_chain_or_across_the_last_ones() {
    // Three chains of three: rounds 0 and 1 (attempts 0..6) answer 4, the final round 9.
    let answer = |i: usize| if i < 6 { 4 } else { 9 };
    let (generator, _) = numbered(answer);
    let out = solve(
        json!({"chains": 3, "attempts": 3, "max_tokens": 40}),
        generator,
        100_000,
    )
    .unwrap();
    assert_eq!(out.answer.as_deref(), Some("4"));
    let support = out.support.expect("a vote's share");
    assert!((support - 6.0 / 9.0).abs() < 1e-9, "{support}");

    let (generator, _) = numbered(answer);
    let out = solve(
        json!({"chains": 3, "attempts": 3, "max_tokens": 40, "select": "last"}),
        generator,
        100_000,
    )
    .unwrap();
    assert_eq!(out.answer.as_deref(), Some("9"));
    let chosen = &out.candidates[out.selected.expect("a chosen attempt")];
    assert!(chosen.text.contains("\\boxed{9}"), "{}", chosen.text);

    // Chains disagreeing with each other: chain c (attempt i, chain i % 2) answers 1 or 2; the
    // chain that holds the majority of all attempts wins, whichever chain it is.
    let (generator, _) = numbered(|i| if i % 2 == 0 { 1 } else { 2 });
    let out = solve(
        json!({"chains": 2, "attempts": 3, "max_tokens": 40}),
        generator,
        100_000,
    )
    .unwrap();
    let votes = |a: &str| {
        out.candidates
            .iter()
            .filter(|c| c.answer.as_deref() == Some(a))
            .count()
    };
    assert_eq!((votes("1"), votes("2")), (3, 3));
    // A tie goes to the answer seen first, as self-consistency breaks it.
    assert_eq!(out.answer.as_deref(), Some("1"));
}

#[test]
fn a_binding_budget_ends_the_chains_early_and_is_never_exceeded() {
    // A model that never ends an attempt: every attempt runs to its cap.
    let rambler = || {
        Arc::new(FakeGenerator::new(|_s: FakeState<'_>| {
            FakeChunk::step("and so on and so on the answer is \\boxed{7} ", -0.2)
        }))
    };
    let unbounded = solve(
        json!({"chains": 2, "attempts": 4, "max_tokens": 48}),
        rambler(),
        1_000_000,
    )
    .unwrap();
    let full = unbounded.usage.spent();
    assert_eq!(unbounded.candidates.len(), 8);
    let mut seen_rounds = Vec::new();
    for budget in [full / 5, full / 2, full * 9 / 10] {
        let out = solve(
            json!({"chains": 2, "attempts": 4, "max_tokens": 48}),
            rambler(),
            budget,
        )
        .unwrap();
        assert!(
            out.usage.spent() <= budget,
            "spent {} of {budget}",
            out.usage.spent()
        );
        let rounds = out.tree.get(0).and_then(|n| n.notes.get("rounds").cloned());
        let rounds = rounds.and_then(|r| r.as_u64()).expect("rounds noted") as usize;
        assert_eq!(out.candidates.len(), 2 * rounds, "{budget}");
        assert!(out.answer.is_some());
        // Every attempt made gets at least a quarter of its cap.
        for c in &out.candidates {
            assert!(c.tokens >= 12, "{} tokens at {budget}", c.tokens);
        }
        seen_rounds.push(rounds);
    }
    // A fifth of the full cost buys one round of whole attempts, half of it two, and most of it
    // more: the chains end earlier the tighter the budget, never at the cost of exceeding it.
    assert_eq!(seen_rounds[0], 1, "{seen_rounds:?}");
    assert!(seen_rounds[1] >= 2, "{seen_rounds:?}");
    assert!(seen_rounds[2] > seen_rounds[1], "{seen_rounds:?}");
    let err = solve(json!({"chains": 8, "attempts": 2}), rambler(), 26).expect_err("no room");
    assert!(
        matches!(&err, StrategyError::InvalidParameter { field, .. } if field == "budget_tokens"),
        "{err}"
    );
}

#[test]
fn bad_parameters_are_refused_naming_the_field() {
    let (generator, _) = numbered(|_| 7);
    for (params, field) in [
        (json!({"chains": 0}), "chains"),
        (json!({"attempts": 0}), "attempts"),
        (json!({"max_tokens": 0}), "max_tokens"),
        (
            json!({"attempts": 3, "context_attempts": 0}),
            "context_attempts",
        ),
    ] {
        let err = solve(params.clone(), generator.clone(), 10_000).expect_err("refused");
        assert!(
            matches!(&err, StrategyError::InvalidParameter { field: f, .. } if f == field),
            "{params}: {err}"
        );
    }
    // One attempt per chain is parallel sampling: no revision, so nothing to show is fine.
    let out = solve(
        json!({"chains": 3, "attempts": 1, "context_attempts": 0}),
        generator,
        10_000,
    )
    .unwrap();
    assert_eq!(out.candidates.len(), 3);
    let Err(err) = Registry::with_builtins().build("revision", json!({"select": "median"})) else {
        panic!("an unknown selection was accepted");
    };
    assert!(
        err.to_string()
            .contains("unknown variant `median`, expected one of `vote`"),
        "{err}"
    );
}
