//! Fidelity tests of the tree searches against the scripted `FakeGenerator`: AB-MCTS as
//! TreeQuest defines it (nodes are answers; GEN samples, refinement sees answer and score;
//! Thompson sampling; a batch per iteration), MCTS (terminal rewards, roll-outs, selection by
//! visits or value, no stall on terminal leaves, virtual-loss batches) and A* (cost to go, best
//! f among complete solutions).

// Tests state expectations with `expect` (clippy.toml allows it in `#[test]` functions).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use ponder_strategies::fake::{FakeChunk, FakeGenerator, FakeState};
use ponder_strategies::{
    run, Budget, Context, Outcome, Problem, Registry, SearchFinish, SearchTree, StrategyError,
};
use ponder_verifiers::{FnVerifier, Scores, Solution, Verifier};
use serde_json::json;

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
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(run(strategy.as_ref(), ctx))
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

/// Scores a solution by the last `q=` tag in its text (0 without one).
fn q_score() -> Arc<dyn Verifier> {
    Arc::new(FnVerifier::new("q", |sol: &Solution<'_>| {
        let text = sol.steps.join("\n");
        let q = text
            .rsplit("q=")
            .next()
            .filter(|_| text.contains("q="))
            .and_then(|t| tagged(&format!("q={t}"), "q"))
            .unwrap_or(0.0);
        Scores::uniform(sol.steps.len(), q)
    }))
}

/// Every node of the search tree: its id, parent and text (what a replay must reproduce).
fn tree_shape(out: &Outcome) -> Vec<(usize, Option<usize>, String)> {
    out.tree
        .nodes()
        .map(|n| (n.id, n.parent, out.tree.text(n.id)))
        .collect()
}

fn note(out: &Outcome, id: usize, key: &str) -> Option<serde_json::Value> {
    out.tree.get(id)?.notes.get(key).cloned()
}

/// Fresh answers score `fresh(seed)`; a refinement of an answer scored `q` scores `refine(q)`.
/// A refinement says whether its prompt showed the previous answer's score.
fn answers(fresh: fn(u64) -> f32, refine: fn(f32) -> f32) -> Arc<FakeGenerator> {
    Arc::new(FakeGenerator::new(move |s: FakeState<'_>| {
        if s.prompt.contains("previous attempt") {
            let prev = tagged(s.prompt, "q").unwrap_or(0.0);
            let shown = s.prompt.contains(&format!("scored it {prev:.2}"));
            return FakeChunk::last(
                format!("refined shown={shown} q={:.3} \\boxed{{5}}", refine(prev)),
                -0.1,
            );
        }
        FakeChunk::last(format!("fresh q={:.3} \\boxed{{5}}", fresh(s.seed)), -0.1)
    }))
}

fn ab_shape(
    fresh: fn(u64) -> f32,
    refine: fn(f32) -> f32,
    posterior: &str,
    pipeline: bool,
) -> Result<(Outcome, u64, u64), StrategyError> {
    let params = json!({"iterations": 8, "batch": 2, "posterior": posterior, "pipeline": pipeline});
    let out = solve(
        "ab_mcts",
        params,
        answers(fresh, refine),
        Some(q_score()),
        4,
    )?;
    let count = |k: &str| {
        note(&out, SearchTree::ROOT, k)
            .and_then(|v| v.as_u64())
            .unwrap_or(0)
    };
    let (w, d) = (count("wider"), count("deeper"));
    Ok((out, w, d))
}

#[test]
fn ab_mcts_nodes_are_answers_and_a_refinement_sees_the_answer_and_its_score(
) -> Result<(), StrategyError> {
    let (out, wider, deeper) = ab_shape(|_| 0.3, |q| (q + 0.2).min(0.99), "beta", false)?;
    assert_eq!(wider + deeper, 16, "8 iterations of 2 expansions");
    // Every node is a complete answer, and a candidate.
    let nodes: Vec<_> = out
        .tree
        .nodes()
        .filter(|n| n.id != SearchTree::ROOT)
        .collect();
    assert_eq!(nodes.len(), 16);
    assert_eq!(out.candidates.len(), 16);
    assert!(out.candidates.iter().all(|c| c.finished));
    for n in &nodes {
        if let Some(parent) = note(&out, n.id, "refines").and_then(|v| v.as_u64()) {
            assert!(n.text.contains("shown=true"), "{}", n.text);
            let before = tagged(&out.tree.text(parent as usize), "q").unwrap_or(0.0);
            let after = tagged(&n.text, "q").unwrap_or(0.0);
            assert!(
                (after - (before + 0.2).min(0.99)).abs() < 1e-3,
                "refined from the parent"
            );
        }
    }
    Ok(())
}

#[test]
fn ab_mcts_goes_deeper_when_refinements_score_well() -> Result<(), StrategyError> {
    for (posterior, pipeline) in [("beta", false), ("gaussian", false), ("beta", true)] {
        let (out, wider, deeper) =
            ab_shape(|_| 0.2, |q| (q + 0.25).min(0.99), posterior, pipeline)?;
        assert!(
            deeper > wider,
            "{posterior}: wider {wider} vs deeper {deeper}"
        );
        let depth = out
            .tree
            .nodes()
            .filter_map(|n| note(&out, n.id, "ab_depth").and_then(|v| v.as_u64()))
            .max()
            .unwrap_or(0);
        assert!(depth >= 3, "{posterior}: refined {depth} deep");
        let best = out.selected.and_then(|i| out.candidates[i].score);
        assert!(
            best.is_some_and(|s| s > 0.6),
            "{posterior}: a refinement won"
        );
    }
    Ok(())
}

#[test]
fn ab_mcts_goes_wider_when_fresh_samples_score_well() -> Result<(), StrategyError> {
    for (posterior, pipeline) in [("beta", false), ("gaussian", false), ("beta", true)] {
        let (_, wider, deeper) = ab_shape(
            |s| 0.5 + (s % 50) as f32 / 100.0,
            |_| 0.05,
            posterior,
            pipeline,
        )?;
        assert!(
            wider > deeper,
            "{posterior}: wider {wider} vs deeper {deeper}"
        );
    }
    Ok(())
}

#[test]
fn ab_mcts_expands_a_batch_per_round_in_one_call() -> Result<(), StrategyError> {
    let generator = answers(|_| 0.4, |q| q);
    let params = json!({"iterations": 3, "batch": 3});
    solve("ab_mcts", params, generator.clone(), Some(q_score()), 1)?;
    let c = generator.counters();
    assert_eq!((c.extend_calls, c.sequences_extended), (3, 9));
    Ok(())
}

#[test]
fn ab_mcts_keeps_batch_answers_in_flight_and_replays_by_seed() -> Result<(), StrategyError> {
    let run = || -> Result<(Outcome, u64, usize), StrategyError> {
        let generator = answers(|s| 0.2 + (s % 7) as f32 / 10.0, |q| (q + 0.1).min(0.99));
        let params = json!({"iterations": 3, "batch": 3, "pipeline": true});
        let out = solve("ab_mcts", params, generator.clone(), Some(q_score()), 1)?;
        let c = generator.counters();
        Ok((out, c.sequences_extended, c.max_in_flight))
    };
    let (first, extended, in_flight) = run()?;
    assert_eq!(extended, 9, "iterations × batch answers");
    assert_eq!(in_flight, 3, "batch answers run at once, never more");
    // A later selection waits for the oldest answer in flight to be generated and sees every
    // answer before that one in launch order, so the tree does not depend on which answer
    // finished first.
    let (again, _, _) = run()?;
    assert_eq!(tree_shape(&first), tree_shape(&again));
    Ok(())
}

/// Scores like `q_score`, but takes turns of the executor (until the generator extends a
/// sequence, at most 64), as a model-backed verifier does, and counts the scorings during
/// which the generator extended a sequence.
struct SlowScorer {
    generator: Arc<FakeGenerator>,
    inner: Arc<dyn Verifier>,
    overlapped: std::sync::atomic::AtomicU64,
}

#[async_trait::async_trait]
impl Verifier for SlowScorer {
    fn name(&self) -> &str {
        "slow"
    }

    async fn score(&self, solution: Solution<'_>) -> ponder_verifiers::Result<Scores> {
        let before = self.generator.counters().sequences_extended;
        for _ in 0..64 {
            if self.generator.counters().sequences_extended > before {
                self.overlapped
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                break;
            }
            tokio::task::yield_now().await;
        }
        self.inner.score(solution).await
    }
}

#[test]
fn ab_mcts_pipeline_scores_an_answer_while_the_next_generates() -> Result<(), StrategyError> {
    // One answer in flight: the next answer is chosen without the newest score, so it
    // generates while that answer is scored; every scoring but the last overlaps a generation.
    let run = || -> Result<(Outcome, u64), StrategyError> {
        let generator = answers(|s| 0.2 + (s % 7) as f32 / 10.0, |q| (q + 0.1).min(0.99));
        let slow = Arc::new(SlowScorer {
            generator: generator.clone(),
            inner: q_score(),
            overlapped: Default::default(),
        });
        let params = json!({"iterations": 6, "batch": 1, "pipeline": true});
        let out = solve("ab_mcts", params, generator, Some(slow.clone()), 3)?;
        let overlapped = slow.overlapped.load(std::sync::atomic::Ordering::Relaxed);
        Ok((out, overlapped))
    };
    let (first, overlapped) = run()?;
    assert_eq!(first.candidates.len(), 6);
    assert_eq!(
        overlapped, 5,
        "each scoring but the last ran beside a generation"
    );
    // Which of a scoring and a generation ends first does not change the tree.
    let (again, _) = run()?;
    assert_eq!(tree_shape(&first), tree_shape(&again));
    Ok(())
}

/// A model-backed verifier whose worst case no budget here can cover: every scoring is refused.
struct Unaffordable;

#[async_trait::async_trait]
impl Verifier for Unaffordable {
    fn name(&self) -> &str {
        "unaffordable"
    }

    async fn score(&self, solution: Solution<'_>) -> ponder_verifiers::Result<Scores> {
        Ok(Scores::uniform(solution.steps.len(), 1.0))
    }

    fn cost_bound(&self, _solution: &Solution<'_>) -> u64 {
        u64::MAX / 4
    }
}

#[test]
fn ab_mcts_keeps_answers_whose_scoring_the_budget_refuses() -> Result<(), StrategyError> {
    for pipeline in [false, true] {
        let params = json!({"iterations": 4, "batch": 2, "pipeline": pipeline});
        let out = solve(
            "ab_mcts",
            params,
            answers(|_| 0.4, |q| q),
            Some(Arc::new(Unaffordable)),
            2,
        )?;
        // The first round's answers were generated, then their scoring was refused: they stay
        // as unscored candidates and the search ends with one of them, not `BudgetTooSmall`.
        assert_eq!(
            out.finish_reason,
            SearchFinish::Budget,
            "pipeline {pipeline}"
        );
        assert_eq!(out.answer.as_deref(), Some("5"), "pipeline {pipeline}");
        assert!(!out.candidates.is_empty());
        assert!(out.candidates.iter().all(|c| c.score.is_none()));
        assert_eq!(out.usage.verifier_tokens, 0);
    }
    Ok(())
}

/// Step 1 is `v=<seed-tagged>`; steps go on until depth 3, where `\boxed{5}` ends them.
fn three_steps() -> Arc<FakeGenerator> {
    Arc::new(FakeGenerator::new(|s: FakeState<'_>| {
        let d = s.text.matches("\n\n").count() + 1;
        if d >= 3 {
            FakeChunk::last("so \\boxed{5}", -0.1)
        } else {
            FakeChunk::step(format!("d{d} r{}\n\n", s.seed % 997), -0.1)
        }
    }))
}

/// 1 for a complete solution answering 5, 0 for another complete one, 0.5 for a partial one.
fn outcome_reward() -> Arc<dyn Verifier> {
    Arc::new(FnVerifier::new("outcome", |sol: &Solution<'_>| {
        let r = if !sol.complete {
            0.5
        } else if sol.steps.join("").contains("\\boxed{5}") {
            1.0
        } else {
            0.0
        };
        Scores::uniform(sol.steps.len(), r)
    }))
}

#[test]
fn mcts_values_leaves_by_terminal_reward_of_a_rollout_or_by_the_prm() -> Result<(), StrategyError> {
    let params = json!({"iterations": 3, "leaf_value": "rollout"});
    let out = solve("mcts", params, three_steps(), Some(outcome_reward()), 1)?;
    let values: Vec<f64> = out
        .tree
        .nodes()
        .filter_map(|n| note(&out, n.id, "rollout_value").and_then(|v| v.as_f64()))
        .collect();
    assert!(!values.is_empty());
    assert!(
        values.iter().all(|v| *v == 1.0),
        "a roll-out's value is the verifier's terminal reward: {values:?}"
    );
    assert!(out.candidates.iter().any(|c| c.finished));
    let params = json!({"iterations": 3, "leaf_value": "prm"});
    let out = solve("mcts", params, three_steps(), Some(outcome_reward()), 1)?;
    assert!(out
        .tree
        .nodes()
        .all(|n| !n.notes.contains_key("rollout_value")));
    for c in out.candidates.iter().filter(|c| c.finished) {
        assert_eq!(c.score, Some(1.0), "a terminal node's value is its reward");
    }
    Ok(())
}

#[test]
fn mcts_does_not_stall_on_terminal_leaves() -> Result<(), StrategyError> {
    // Every sample is a one-step answer: each iteration must still generate.
    let generator = Arc::new(FakeGenerator::new(|s: FakeState<'_>| {
        FakeChunk::last(format!("a{} \\boxed{{5}}", s.seed % 997), -0.1)
    }));
    let params = json!({"iterations": 4, "expansions": 2, "batch": 1, "c_puct": 0.0});
    let out = solve("mcts", params, generator, Some(outcome_reward()), 1)?;
    assert_eq!(out.tree.children(SearchTree::ROOT).len(), 8);
    Ok(())
}

#[test]
fn mcts_selects_a_batch_of_distinct_leaves_under_virtual_loss() -> Result<(), StrategyError> {
    let generator = three_steps();
    let params = json!({"iterations": 3, "expansions": 2, "batch": 2, "steps": {"max_steps": 10}});
    solve("mcts", params, generator.clone(), Some(outcome_reward()), 1)?;
    let c = generator.counters();
    // Iteration 1 expands the root; 2 and 3 expand two different leaves each.
    assert_eq!((c.extend_calls, c.sequences_extended), (3, 2 + 4 + 4));
    Ok(())
}

#[test]
fn mcts_picks_the_answer_by_visits_or_by_value() -> Result<(), StrategyError> {
    // "B" answers at once with reward 0.9; "A" takes a step (0.6) and then answers (0.55).
    let generator = Arc::new(FakeGenerator::new(|s: FakeState<'_>| {
        if s.text.starts_with('A') {
            return FakeChunk::last(format!("v=0.55 \\boxed{{1}} {}", s.seed % 97), -0.1);
        }
        if s.seed.is_multiple_of(2) {
            FakeChunk::last("B v=0.9 \\boxed{9}", -0.1)
        } else {
            FakeChunk::step("A v=0.6\n\n", -0.1)
        }
    }));
    let verifier: Arc<dyn Verifier> = Arc::new(FnVerifier::new("v", |sol: &Solution<'_>| {
        let v = sol.steps.last().and_then(|t| tagged(t, "v")).unwrap_or(0.0);
        Scores::uniform(sol.steps.len(), v)
    }));
    let run_with = |select: &str| {
        let params =
            json!({"iterations": 5, "expansions": 4, "batch": 1, "c_puct": 0.0, "select": select});
        solve("mcts", params, generator.clone(), Some(verifier.clone()), 2)
    };
    let by_value = run_with("value")?;
    let kinds: Vec<_> = by_value
        .tree
        .children(SearchTree::ROOT)
        .iter()
        .filter_map(|c| by_value.tree.get(*c).map(|n| n.text.starts_with('A')))
        .collect();
    assert!(
        kinds.contains(&true) && kinds.contains(&false),
        "the seed samples both: {kinds:?}"
    );
    assert_eq!(by_value.answer.as_deref(), Some("9"), "the highest reward");
    let by_visits = run_with("visits")?;
    assert_eq!(
        by_visits.answer.as_deref(),
        Some("1"),
        "the most-visited path"
    );
    Ok(())
}

#[test]
fn a_star_estimates_the_cost_to_go_and_a_deeper_correct_path_wins() -> Result<(), StrategyError> {
    // Even seeds answer at once, wrongly (PRM 0.4); odd seeds take 8 good steps (0.8 each).
    let generator = Arc::new(FakeGenerator::new(|s: FakeState<'_>| {
        let d = s.text.matches("\n\n").count();
        if s.text.starts_with("right") {
            return if d >= 7 {
                FakeChunk::last("s=0.8 \\boxed{5}", -0.1)
            } else {
                FakeChunk::step(format!("s=0.8 step {d}\n\n"), -0.1)
            };
        }
        if s.seed.is_multiple_of(2) {
            FakeChunk::last("wrong s=0.4 \\boxed{7}", -0.1)
        } else {
            FakeChunk::step("right s=0.8\n\n", -0.1)
        }
    }));
    let verifier: Arc<dyn Verifier> = Arc::new(FnVerifier::new("s", |sol: &Solution<'_>| {
        let steps: Vec<f32> = sol
            .steps
            .iter()
            .map(|t| tagged(t, "s").unwrap_or(0.5))
            .collect();
        let overall = steps.last().copied().unwrap_or(0.0);
        Scores {
            steps,
            overall,
            cost: 0,
        }
    }));
    for params in [
        json!({"expansions": 4, "max_expansions": 40, "steps": {"max_steps": 12}}),
        json!({"expansions": 4, "max_expansions": 40, "heuristic": "zero", "steps": {"max_steps": 12}}),
        json!({"expansions": 4, "max_expansions": 40, "stop_at_first": false, "steps": {"max_steps": 12}}),
    ] {
        let out = solve(
            "a_star",
            params.clone(),
            generator.clone(),
            Some(verifier.clone()),
            3,
        )?;
        assert!(
            out.tree.nodes().any(|n| n.text.starts_with("wrong")),
            "the seed samples a shallow wrong answer"
        );
        assert_eq!(out.answer.as_deref(), Some("5"), "{params}");
        // The pick is the best f among the complete solutions found.
        let f = |c: &ponder_strategies::Candidate| {
            note(&out, c.node, "f")
                .and_then(|v| v.as_f64())
                .unwrap_or(f64::MAX)
        };
        let chosen = out
            .selected
            .map(|i| f(&out.candidates[i]))
            .unwrap_or(f64::MAX);
        for c in out.candidates.iter().filter(|c| c.finished) {
            assert!(chosen <= f(c) + 1e-9, "{params}");
        }
    }
    // h estimates what is still to go: 0 for a complete state, positive before the end.
    assert!(ponder_strategies::step_cost(1.0, 0.8) > 0.0);
    assert_eq!(ponder_strategies::step_cost(0.8, 0.9), 0.0);
    Ok(())
}
