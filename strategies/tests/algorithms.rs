//! Algorithm tests of the built-in strategies against the scripted `FakeGenerator`: what each
//! method must do (keep the best beams, pop in f order, follow PUCT), budgets that are never
//! exceeded, and seeded determinism. `early_stopping.rs` holds the early-stopping strategies,
//! `fidelity.rs` and `tree_search.rs` the properties each paper defines, `interrupt.rs`
//! cancellation and deadlines.

// Test helpers state expectations with `expect` as the tests do (clippy.toml allows that in
// `#[test]` functions only; library and binary code may not).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use ponder_strategies::fake::{FakeChunk, FakeGenerator, FakeState};
use ponder_strategies::{
    run, Budget, Context, NodeStatus, Outcome, Problem, Registry, SearchFinish, SearchTree,
    StrategyError,
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

/// A score in [0, 1) derived from a seed.
fn unit(seed: u64) -> f32 {
    (seed % 1000) as f32 / 1000.0
}

/// Reads `s=0.123` from the last step.
fn last_step_score() -> Arc<dyn Verifier> {
    Arc::new(FnVerifier::new("tagged", |sol: &Solution<'_>| {
        let s = sol
            .steps
            .last()
            .and_then(|t| t.split("s=").nth(1))
            .and_then(|t| t.split_whitespace().next())
            .and_then(|t| t.parse::<f32>().ok())
            .unwrap_or(0.0);
        Scores::uniform(sol.steps.len(), s)
    }))
}

/// Steps "d<depth> s=<score>" with seed-derived scores; finishes at `depth` with \boxed{depth}.
fn tagged_steps(depth: usize) -> FakeGenerator {
    FakeGenerator::new(move |s: FakeState<'_>| {
        let d = s.text.matches("\n\n").count() + 1;
        if d >= depth {
            FakeChunk::last(
                format!("d{d} s={:.3} so \\boxed{{{d}}}", unit(s.seed)),
                -0.2,
            )
        } else {
            FakeChunk::step(format!("d{d} s={:.3}\n\n", unit(s.seed)), -0.2)
        }
    })
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

#[test]
fn beam_search_keeps_the_top_m_by_score_at_every_step() -> Result<(), StrategyError> {
    let out = solve(
        "beam_search",
        json!({"n": 6, "width": 2}),
        Arc::new(tagged_steps(4)),
        Some(last_step_score()),
        100_000,
        3,
    )?;
    assert_eq!(out.finish_reason, SearchFinish::Completed);
    for depth in 1..4 {
        let level: Vec<_> = out.tree.nodes().filter(|n| n.depth == depth).collect();
        assert_eq!(level.len(), 6, "every step scores N = 6 candidates");
        let kept: Vec<f32> = level
            .iter()
            .filter(|n| n.status == NodeStatus::Expanded)
            .filter_map(|n| n.score)
            .collect();
        let pruned: Vec<f32> = level
            .iter()
            .filter(|n| n.status == NodeStatus::Pruned)
            .filter_map(|n| n.score)
            .collect();
        assert_eq!(kept.len(), 2, "depth {depth}: M = 2 beams kept");
        assert_eq!(pruned.len(), 4);
        let worst_kept = kept.iter().copied().fold(f32::INFINITY, f32::min);
        assert!(
            pruned.iter().all(|p| *p <= worst_kept),
            "depth {depth}: kept {kept:?} vs pruned {pruned:?}"
        );
    }
    assert_eq!(out.answer.as_deref(), Some("4"));
    let best = out
        .candidates
        .iter()
        .filter_map(|c| c.score)
        .fold(f32::MIN, f32::max);
    assert_eq!(
        out.selected.and_then(|i| out.candidates[i].score),
        Some(best),
        "the best-scored solution is selected"
    );
    Ok(())
}

#[test]
fn dvts_runs_independent_greedy_subtrees() -> Result<(), StrategyError> {
    let out = solve(
        "dvts",
        json!({"n": 8, "width": 4}),
        Arc::new(tagged_steps(3)),
        Some(last_step_score()),
        100_000,
        5,
    )?;
    // Two subtrees, each expanding 4 children of its single beam per step.
    let first: Vec<_> = out.tree.nodes().filter(|n| n.depth == 1).collect();
    assert_eq!(first.len(), 8);
    for g in 0..2 {
        let group: Vec<_> = first
            .iter()
            .filter(|n| n.notes.get("group") == Some(&json!(g)))
            .collect();
        assert_eq!(group.len(), 4);
        assert_eq!(
            group
                .iter()
                .filter(|n| n.status == NodeStatus::Expanded)
                .count(),
            1,
            "subtree {g} keeps one beam"
        );
    }
    assert_eq!(
        out.candidates.len(),
        8,
        "each subtree's last step yields 4 finished solutions"
    );
    Ok(())
}

#[test]
fn composition_deepconf_stop_inside_dvts_prunes_unconfident_beams() -> Result<(), StrategyError> {
    // Steps of beams whose seed is odd are unconfident (logprob -3).
    let generator = FakeGenerator::new(|s: FakeState<'_>| {
        let lp = if s.seed % 2 == 1 { -3.0 } else { -0.05 };
        let d = s.text.matches("\n\n").count();
        if d >= 2 {
            FakeChunk::last("a b c d e f \\boxed{5}", lp)
        } else {
            FakeChunk::step("a b c d e f g h\n\n", lp)
        }
    });
    let params = json!({"n": 8, "width": 4, "score_by": "confidence", "early_stop": {"window": 4, "threshold": 2.0}});
    let out = solve("dvts", params, Arc::new(generator), None, 100_000, 2)?;
    let pruned = out
        .tree
        .nodes()
        .filter(|n| n.status == NodeStatus::Pruned && n.mean_logprob.is_some_and(|m| m < -1.0))
        .count();
    let low = out
        .tree
        .nodes()
        .filter(|n| n.mean_logprob.is_some_and(|m| m < -1.0))
        .count();
    assert!(low > 0, "the script produced unconfident steps");
    assert_eq!(
        pruned, low,
        "every unconfident step is pruned by the inner DeepConf rule"
    );
    assert_eq!(out.answer.as_deref(), Some("5"));
    Ok(())
}

#[test]
fn a_star_pops_in_f_order_and_stops_at_the_first_complete_state() -> Result<(), StrategyError> {
    let out = solve(
        "a_star",
        json!({"expansions": 3, "max_expansions": 30, "batch": 1, "heuristic_weight": 0.0}),
        Arc::new(tagged_steps(3)),
        Some(last_step_score()),
        1_000_000,
        11,
    )?;
    let f = |id: usize| {
        out.tree
            .get(id)
            .and_then(|n| n.notes.get("f"))
            .and_then(|v| v.as_f64())
            .unwrap_or(0.0)
    };
    let popped = |id: usize| {
        out.tree
            .get(id)
            .and_then(|n| n.notes.get("pop_order"))
            .and_then(|v| v.as_u64())
    };
    for p in out.tree.nodes().filter(|n| popped(n.id).is_some()) {
        let k = popped(p.id).unwrap_or(0);
        // Every state open at pop k (parent popped earlier, itself not yet popped) has f ≥ f(p).
        for q in out
            .tree
            .nodes()
            .filter(|q| q.parent.and_then(popped).is_some_and(|pk| pk < k))
        {
            if popped(q.id).is_none_or(|qk| qk > k) {
                assert!(
                    f(q.id) >= f(p.id) - 1e-9,
                    "pop {k} took f={} while #{} had f={}",
                    f(p.id),
                    q.id,
                    f(q.id)
                );
            }
        }
    }
    // Uniform cost (w = 0) is admissible: the first complete state popped has the lowest cost
    // of every complete state generated, and the search stopped there.
    assert_eq!(out.candidates.len(), 1);
    let chosen = out.candidates[0].node;
    let g = |id: usize| {
        out.tree
            .get(id)
            .and_then(|n| n.notes.get("g"))
            .and_then(|v| v.as_f64())
            .unwrap_or(f64::MAX)
    };
    for n in out.tree.nodes().filter(|n| n.depth == 3) {
        assert!(g(n.id) >= g(chosen) - 1e-9);
    }
    assert_eq!(out.answer.as_deref(), Some("3"));
    Ok(())
}

#[test]
fn mcts_without_exploration_follows_the_highest_value_child() -> Result<(), StrategyError> {
    // Every solution's value is that of its first step, so Q(child) stays fixed and PUCT with
    // c = 0 must send every later iteration into the best first step.
    let generator = FakeGenerator::new(|s: FakeState<'_>| {
        FakeChunk::step(format!("v={:.3}\n\n", unit(s.seed)), -0.1)
    });
    let verifier: Arc<dyn Verifier> = Arc::new(FnVerifier::new("first", |sol: &Solution<'_>| {
        let v = sol
            .steps
            .first()
            .and_then(|t| t.trim().strip_prefix("v="))
            .and_then(|t| t.parse::<f32>().ok())
            .unwrap_or(0.0);
        Scores::uniform(sol.steps.len(), v)
    }));
    let out = solve(
        "mcts",
        json!({"iterations": 4, "batch": 1, "expansions": 3, "c_puct": 0.0}),
        Arc::new(generator),
        Some(verifier),
        1_000_000,
        2,
    )?;
    let visits = |id: usize| {
        out.tree
            .get(id)
            .and_then(|n| n.notes.get("visits"))
            .and_then(|v| v.as_u64())
            .unwrap_or(0)
    };
    let children = out.tree.children(SearchTree::ROOT);
    let best = children
        .iter()
        .copied()
        .max_by(|a, b| {
            out.tree
                .get(*a)
                .and_then(|n| n.score)
                .unwrap_or(0.0)
                .total_cmp(&out.tree.get(*b).and_then(|n| n.score).unwrap_or(0.0))
        })
        .unwrap_or(0);
    assert_eq!(
        visits(best),
        1 + 3 * 3,
        "three expansions of three children each went under the best child"
    );
    for c in children.iter().filter(|c| **c != best) {
        assert_eq!(visits(*c), 1);
    }
    assert_eq!(visits(SearchTree::ROOT), 3 + 3 * 3);
    Ok(())
}

#[test]
fn mcts_puct_formula() {
    // Unvisited children with a higher prior are explored first; visits discount the bonus.
    assert!(
        ponder_strategies::puct(0.0, 0.6, 4, 0, 1.0) > ponder_strategies::puct(0.0, 0.4, 4, 0, 1.0)
    );
    assert!(
        (ponder_strategies::puct(0.5, 0.5, 9, 2, 2.0) - (0.5 + 2.0 * 0.5 * 3.0 / 3.0)).abs()
            < 1e-12
    );
}

/// Traces of seed-chosen length L ("len<L>" first), L words then \boxed{L}.
#[test]
fn best_of_n_weighted_and_self_consistency_select_as_documented() -> Result<(), StrategyError> {
    // Answer = seed % 3; score: answer 0 → 0.9 (rare best), others 0.5.
    let generator = || {
        Arc::new(FakeGenerator::new(|s: FakeState<'_>| {
            FakeChunk::last(
                format!(
                    "s={} \\boxed{{{}}}",
                    if s.seed.is_multiple_of(3) { 0.9 } else { 0.5 },
                    s.seed % 3
                ),
                -0.1,
            )
        }))
    };
    let out = solve(
        "best_of_n",
        json!({"n": 8}),
        generator(),
        Some(last_step_score()),
        1_000_000,
        8,
    )?;
    let best = out
        .candidates
        .iter()
        .filter_map(|c| c.score)
        .fold(f32::MIN, f32::max);
    assert_eq!(
        out.selected.and_then(|i| out.candidates[i].score),
        Some(best)
    );
    let sc = solve(
        "self_consistency",
        json!({"n": 8}),
        generator(),
        None,
        1_000_000,
        8,
    )?;
    let answers: Vec<String> = sc
        .candidates
        .iter()
        .filter_map(|c| c.answer.clone())
        .collect();
    let count = |a: &str| answers.iter().filter(|x| *x == a).count();
    let winner = sc.answer.clone().unwrap_or_default();
    assert!(
        answers.iter().all(|a| count(a) <= count(&winner)),
        "majority of {answers:?}"
    );
    let w = solve(
        "weighted_best_of_n",
        json!({"n": 8}),
        generator(),
        Some(last_step_score()),
        1_000_000,
        8,
    )?;
    let sum = |a: &str| {
        w.candidates
            .iter()
            .filter(|c| c.answer.as_deref() == Some(a))
            .filter_map(|c| c.score)
            .sum::<f32>()
    };
    let top = w.answer.clone().unwrap_or_default();
    assert!(w
        .candidates
        .iter()
        .filter_map(|c| c.answer.as_deref())
        .all(|a| sum(a) <= sum(&top) + 1e-6));
    Ok(())
}

#[test]
fn forks_share_the_prompt_prefill() -> Result<(), StrategyError> {
    let generator = Arc::new(FakeGenerator::arithmetic());
    let out = solve(
        "self_consistency",
        json!({"n": 8, "max_tokens": 64}),
        generator.clone(),
        None,
        1_000_000,
        1,
    )?;
    assert_eq!(out.candidates.len(), 8);
    let prompt_tokens = generator_prompt_tokens();
    assert_eq!(
        out.usage.prefill_tokens_computed, prompt_tokens,
        "the prompt is computed once"
    );
    assert_eq!(
        out.usage.prefill_tokens_reused,
        7 * prompt_tokens,
        "seven forks reuse it"
    );
    Ok(())
}

fn generator_prompt_tokens() -> u64 {
    let g = FakeGenerator::arithmetic();
    let p = ponder_strategies::Prompt {
        system: Problem::new("What is 2+3?").system,
        history: Vec::new(),
        user: "What is 2+3?".into(),
    };
    block_on(ponder_strategies::Generator::open(
        &g,
        &p,
        &Default::default(),
    ))
    .map(|(_, n)| n as u64)
    .unwrap_or(0)
}

#[test]
fn same_seed_same_tree_for_every_strategy() -> Result<(), StrategyError> {
    for name in Registry::with_builtins().names() {
        let a = solve(
            &name,
            json!({}),
            Arc::new(tagged_steps(3)),
            Some(last_step_score()),
            20_000,
            42,
        )?;
        let b = solve(
            &name,
            json!({}),
            Arc::new(tagged_steps(3)),
            Some(last_step_score()),
            20_000,
            42,
        )?;
        let tree = |o: &Outcome| serde_json::to_string(&o.tree).unwrap_or_default();
        assert_eq!(tree(&a), tree(&b), "{name}: tree differs between runs");
        assert_eq!(a.answer, b.answer, "{name}");
        assert_eq!(a.usage.spent(), b.usage.spent(), "{name}");
    }
    Ok(())
}

#[test]
fn bad_parameters_are_named() {
    let r = Registry::with_builtins();
    let err = |name: &str, p: serde_json::Value| {
        r.build(name, p)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    assert!(err("beam_search", json!({"width": 0})).contains("width"));
    assert!(err("beam_search", json!({"steps": {"delimiter": ""}})).contains("steps.delimiter"));
    assert!(err("best_of_n", json!({"n": -1})).contains("strategy_params"));
    assert!(err("mcts", json!({"bogus": 1})).contains("unknown field"));
    let unknown = err("bogo_search", json!({}));
    assert!(
        unknown.contains("valid strategies") && unknown.contains("beam_search"),
        "{unknown}"
    );
}

#[test]
fn a_budget_too_small_for_any_answer_is_a_typed_error() {
    let r = solve(
        "best_of_n",
        json!({}),
        Arc::new(FakeGenerator::arithmetic()),
        None,
        5,
        0,
    );
    assert!(
        matches!(r, Err(StrategyError::BudgetTooSmall { budget: 5, .. })),
        "{r:?}"
    );
}

#[test]
fn a_budget_that_ends_a_search_before_any_candidate_answers_with_the_furthest_solution() {
    // Steps never end a solution, so no candidate exists when the budget runs out.
    let endless = || {
        Arc::new(FakeGenerator::new(|s: FakeState<'_>| {
            let d = s.text.matches("\n\n").count();
            FakeChunk::step(format!("so far x = {} w w w w w w\n\n", d + 1), -0.2)
        }))
    };
    for name in [
        "beam_search",
        "dvts",
        "a_star",
        "mcts",
        "first_finish",
        "short_m_of_k",
    ] {
        let out = solve(name, json!({}), endless(), None, 600, 3)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        // Stopped by the budget, or (A*, MCTS) at the search's own limits first.
        assert!(
            matches!(
                out.finish_reason,
                SearchFinish::Budget | SearchFinish::Completed
            ),
            "{name}: {:?}",
            out.finish_reason
        );
        assert_eq!(out.candidates.len(), 1, "{name}");
        let only = &out.candidates[0];
        assert!(!only.finished, "{name}");
        // The furthest path: no node of the tree has generated more tokens above it.
        let most = out.tree.nodes().map(|n| out.tree.path_tokens(n.id)).max();
        assert_eq!(Some(out.tree.path_tokens(only.node)), most, "{name}");
        assert_eq!(only.text, out.tree.text(only.node), "{name}");
        assert!(
            only.answer.is_some(),
            "{name}: the answer is read from the text"
        );
        assert_eq!(out.selected, Some(0), "{name}");
        assert!(out.usage.spent() <= 600, "{name}");
    }
}

mod budget_property {
    use super::*;
    use proptest::prelude::*;

    fn steps_of(words: usize, steps: usize) -> FakeGenerator {
        FakeGenerator::new(move |s: FakeState<'_>| {
            if s.text.ends_with("\\boxed{") {
                return FakeChunk::last("7}", -0.1);
            }
            let d = s.text.matches("\n\n").count();
            let body = "w ".repeat(words);
            if d + 1 >= steps {
                FakeChunk::last(
                    format!("{body}\\boxed{{7}}"),
                    -0.1 - (s.seed % 5) as f32 * 0.3,
                )
            } else {
                FakeChunk::step(format!("{body}\n\n"), -0.1 - (s.seed % 5) as f32 * 0.3)
            }
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]
        #[test]
        fn spent_never_exceeds_the_budget(strategy in 0usize..13, budget in 20u64..4000, words in 1usize..40, steps in 1usize..6, seed in 0u64..1000) {
            let names = Registry::with_builtins().names();
            let name = &names[strategy % names.len()];
            let generator = Arc::new(steps_of(words, steps));
            let verifier: Option<Arc<dyn Verifier>> = (seed % 2 == 0).then(last_step_score);
            match solve(name, json!({}), generator.clone(), verifier, budget, seed) {
                Ok(out) => {
                    prop_assert!(out.usage.spent() <= budget, "{name}: spent {} of {budget}", out.usage.spent());
                    let c = generator.counters().cost;
                    prop_assert_eq!(out.usage.generated_tokens, c.generated, "{}: generated tokens are all metered", name);
                    prop_assert_eq!(out.usage.prefill_tokens_computed, c.prefill_computed);
                    if out.candidates.iter().any(|c| c.finished) {
                        prop_assert!(out.answer.is_some(), "{name}: a finished candidate exists but no answer");
                    }
                }
                Err(StrategyError::BudgetTooSmall { spent, .. }) => prop_assert!(spent <= budget),
                Err(e) => prop_assert!(false, "{name}: {e}"),
            }
        }
    }
}
