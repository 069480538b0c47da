//! The `auto` strategy end to end over the shipped encoder and classifier and the fake
//! generator: its decision in the `Outcome`, the row it runs as measured (strategy, parameters,
//! verifier, budget), the probe that moves a query between bins, a table of another model, and
//! replay under a pinned load.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use ponder::reason::{reason, ReasonRequest};
use ponder::router::{self, Router};
use ponder_strategies::fake::{FakeChunk, FakeGenerator};
use ponder_strategies::{Generator, Outcome, StrategyError};
use tokio_util::sync::CancellationToken;

use crate::router::{embedder_dir, router_with, router_with_table, shipped};

fn run_auto(
    generator: Arc<dyn Generator>,
    problem: &str,
    budget: u64,
) -> Result<Outcome, StrategyError> {
    let registry = router::registry_with_auto(shipped());
    let req = ReasonRequest {
        problem: problem.into(),
        history: Vec::new(),
        shots: Vec::new(),
        strategy: "auto".into(),
        params: serde_json::json!({"load": 0.0}),
        budget_tokens: budget,
        deadline_ms: None,
        seed: 3,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(reason(
        &registry,
        generator,
        None,
        &req,
        CancellationToken::new(),
    ))
}

#[test]
fn auto_answers_chat_directly_and_reports_the_decision() {
    let generator = Arc::new(FakeGenerator::new(|_| {
        FakeChunk::last("Hello! I'm doing well, thanks for asking.", -0.2)
    }));
    let out = run_auto(generator, "Hi! How are you doing today?", 1024).expect("auto");
    assert_eq!(out.strategy, "auto");
    assert_eq!(out.candidates.len(), 1);
    assert_eq!(
        out.text.as_deref(),
        Some("Hello! I'm doing well, thanks for asking.")
    );
    let decision = out.router.as_ref().expect("router object").to_json();
    assert_eq!(decision["category"], "chat");
    assert_eq!(decision["think"], false);
    assert_eq!(decision["strategy"], "direct");
    let json = serde_json::to_value(&out).expect("serialize");
    assert_eq!(json["router"]["category"], "chat");
}

/// A table measured with another model is not applied silently: `auto` runs the model-agnostic
/// policy (a self-consistency vote sized to the budget), says why in its decision, and is
/// shown no examples; the model the table was measured with runs the table.
#[test]
fn a_table_of_another_model_runs_the_model_agnostic_policy_and_says_so() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(router::file::DEFAULT_ROUTER);
    let load = || Router::load(&path, &embedder_dir()).expect("the shipped router");
    let fitted = load()
        .file()
        .allocator
        .table
        .model
        .clone()
        .expect("the shipped table records its model");
    let same = load().serving(&fitted);
    assert!(same.table_foreign().is_none());
    assert!(same.auto_shots() > 0, "the measured examples");
    let other = ponder::models::FittedModel {
        name: "Qwen3-0.6B-Q8_0.gguf".into(),
        sha256: Some("0".repeat(64)),
    };
    let foreign = load().serving(&other);
    let why = foreign
        .table_foreign()
        .expect("a foreign table")
        .to_string();
    assert!(
        why.contains("Qwen3-0.6B") && why.contains("SmolLM2"),
        "{why}"
    );
    assert_eq!(foreign.auto_shots(), 0);
    let d = foreign
        .route(
            "A shop sells 3 pens for $2. How much do 12 pens cost?",
            2048,
            0.0,
        )
        .expect("route");
    assert_eq!(d.allocation.strategy, "self_consistency");
    assert!(d.allocation.row.is_none(), "no measured row");
    assert_eq!(d.allocation.n, 7, "⌊0.9 · 2048 / 256⌋");
    assert_eq!(
        d.allocation.budget_tokens, 2048,
        "the budget the request gave"
    );
    assert!(
        d.allocation.basis.contains("model-agnostic"),
        "{}",
        d.allocation.basis
    );
}

#[test]
fn auto_runs_the_shipped_row_as_measured() {
    let out = run_auto(Arc::new(FakeGenerator::arithmetic()), "What is 2+3?", 4096).expect("auto");
    let decision = out.router.as_ref().expect("router object").to_json();
    assert_eq!(decision["category"], "math");
    assert_eq!(decision["think"], true);
    assert_eq!(out.answer.as_deref(), Some("5"));
    let row = &decision["row"];
    assert_eq!(decision["strategy"], row["strategy"], "{decision}");
    assert_eq!(decision["params"], row["params"], "{decision}");
    let allocated = decision["budget_tokens"].as_u64().expect("budget_tokens");
    assert_eq!(Some(allocated), row["budget"].as_u64(), "{decision}");
    assert!(out.usage.spent() <= allocated, "{decision}");
    let n = row["n"].as_u64().expect("row n") as usize;
    let sampling = matches!(
        row["strategy"].as_str(),
        Some("self_consistency" | "best_of_n" | "weighted_best_of_n")
    );
    if sampling {
        // The probe's two samples are the row's first two: N samples in all, not N + 2
        // (the probe's own tests use a table of sampling rows: `probe_table`).
        assert_eq!(decision["probe"]["samples"], 2, "{decision}");
        assert_eq!(out.candidates.len(), n, "{decision}");
    } else {
        assert!(
            decision["probe"].is_null(),
            "no probe for a search row: {decision}"
        );
    }
}

#[test]
fn auto_runs_a_search_strategy_under_the_allocations_budget() {
    // A bare number routes to math with a calibration row for a search strategy, allocated
    // less than the request's 1,536 tokens (the table's rows are measured at 1,024 and 2,048):
    // the search stops there, not at the request's cap.
    // Long solutions (a capped step is never a finished solution, so each one ends only after
    // several steps): the search spends up to what it is allowed.
    let generator = Arc::new(FakeGenerator::new(|s| {
        if s.text.matches("case").count() >= 6 {
            FakeChunk::last("So the answer is \\boxed{0}.", -0.3)
        } else {
            FakeChunk::step(
                format!("Let me think about case {} again.\n\n", s.seed % 97),
                -0.3,
            )
        }
    }));
    let out = run_auto(generator, "0", 1536).expect("auto");
    let decision = out.router.as_ref().expect("router object").to_json();
    assert_eq!(decision["think"], true, "{decision}");
    let allocated = decision["budget_tokens"].as_u64().expect("budget_tokens");
    assert!(allocated < 1536, "{decision}");
    assert!(
        out.usage.spent() <= allocated,
        "{} spent of {allocated}: {decision}",
        out.usage.spent()
    );
}

#[test]
fn auto_rejects_an_empty_problem() {
    let err = run_auto(Arc::new(FakeGenerator::arithmetic()), "  ", 1024).expect_err("empty");
    assert!(err.to_string().contains("problem"), "{err}");
}

/// Every difficulty's rows: self-consistency at a 40-token cap. The easy bin measured two
/// samples as good as four (so an agreeing probe stops); the hard bin's row takes six.
fn probe_table() -> &'static Arc<Router> {
    static R: OnceLock<Arc<Router>> = OnceLock::new();
    R.get_or_init(|| {
        // Outcomes over 400 calibration problems: the easy bin's 2-sample row solves one
        // problem fewer than its 4-sample row, which the paired test shows non-inferior.
        let solved = |k: usize| "1".repeat(k) + &"0".repeat(400 - k);
        let row = |difficulty: &str, n: usize, solved_k: usize, spent: f64| {
            serde_json::json!({
                "difficulty": difficulty, "strategy": "self_consistency",
                "params": {"n": n, "max_tokens": 40, "force_answer": false},
                "verifier": "none", "n": n, "max_tokens": 40, "budget": 4096,
                "accuracy": solved_k as f64 / 400.0, "mean_spent": spent, "problems": 400,
                "source": "test", "outcomes": solved(solved_k)
            })
        };
        router_with_table(serde_json::json!([
            row("easy", 2, 327, 100.0),
            row("easy", 4, 328, 200.0),
            row("medium", 4, 200, 200.0),
            row("hard", 6, 160, 300.0),
        ]))
    })
}

fn run_with(
    router: &Arc<Router>,
    generator: Arc<dyn Generator>,
    problem: &str,
    params: serde_json::Value,
) -> Outcome {
    run_scored(router, generator, problem, params, None)
}

/// [`run_with`] on a server whose searches are scored by `verifier`.
fn run_scored(
    router: &Arc<Router>,
    generator: Arc<dyn Generator>,
    problem: &str,
    params: serde_json::Value,
    verifier: Option<Arc<dyn ponder_verifiers::Verifier>>,
) -> Outcome {
    let registry = router::registry_with_auto(Arc::clone(router));
    let req = ReasonRequest {
        problem: problem.into(),
        history: Vec::new(),
        shots: Vec::new(),
        strategy: "auto".into(),
        params,
        budget_tokens: 4096,
        deadline_ms: None,
        seed: 11,
    };
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(reason(
            &registry,
            generator,
            verifier,
            &req,
            CancellationToken::new(),
        ))
        .expect("auto")
}

/// On a server with a verifier, `auto` runs a row measured with that verifier scored by it, and
/// a row measured without one with the verifier set aside: each as it was measured.
#[test]
fn auto_scores_with_the_verifier_its_row_was_measured_with() {
    let calc: Arc<dyn ponder_verifiers::Verifier> =
        Arc::new(ponder_verifiers::CalcCheck::default());
    for (measured, calls) in [("calc", 4), ("none", 0)] {
        let row = |difficulty: &str| {
            serde_json::json!({
                "difficulty": difficulty, "strategy": "best_of_n",
                "params": {"n": 4, "max_tokens": 40}, "verifier": measured,
                "n": 4, "max_tokens": 40, "budget": 4096,
                "accuracy": 0.5, "mean_spent": 100.0, "problems": 100, "source": "test"
            })
        };
        let table = router_with_table(serde_json::json!([row("easy"), row("medium"), row("hard")]));
        let out = run_scored(
            &table,
            Arc::new(FakeGenerator::arithmetic()),
            "What is 2+3?",
            serde_json::json!({"load": 0.0, "probe": false}),
            Some(Arc::clone(&calc)),
        );
        let decision = out.router.as_ref().expect("router object").to_json();
        assert_eq!(decision["row"]["verifier"], measured, "{decision}");
        assert_eq!(out.candidates.len(), 4, "{decision}");
        assert_eq!(
            out.usage.verifier_calls, calls,
            "a row measured with `{measured}`: {decision}"
        );
    }
}

/// Never ends on its own and writes no number; asked for an answer (forced), says 7.
fn endless() -> Arc<dyn Generator> {
    Arc::new(FakeGenerator::new(|s| {
        if s.text.ends_with("\\boxed{") {
            FakeChunk::last("7}", -0.05)
        } else {
            FakeChunk::step("thinking it over once more ", -0.2)
        }
    }))
}

/// A table binned by the probe, as `ponder-eval calibrate --bins-from` writes it: prior rows
/// over all 400 calibration problems (self-consistency of 4), a hard bin of 397 (of 6) and an
/// easy bin of 3 whose 2-sample row solved all three.
fn probe_binned_table() -> &'static Arc<Router> {
    static R: OnceLock<Arc<Router>> = OnceLock::new();
    R.get_or_init(|| {
        let row = |difficulty: &str, n: usize, problems: usize, accuracy: f64| {
            serde_json::json!({
                "difficulty": difficulty, "strategy": "self_consistency",
                "params": {"n": n, "max_tokens": 40, "force_answer": false},
                "verifier": "none", "n": n, "max_tokens": 40, "budget": 4096,
                "accuracy": accuracy, "mean_spent": 40.0 * n as f64, "problems": problems,
                "source": "test"
            })
        };
        let ids = |k: usize| (0..k).map(|i| format!("p{i}")).collect::<Vec<_>>();
        router_with(|t| {
            *t = router::CalibrationTable {
                rows: serde_json::from_value(serde_json::json!([
                    row(router::PRIOR_BIN, 4, 400, 0.05),
                    row("hard", 6, 397, 0.04),
                    row("easy", 2, 3, 1.0),
                ]))
                .expect("rows"),
                problems: [
                    (router::PRIOR_BIN.to_string(), ids(400)),
                    ("hard".to_string(), ids(397)),
                    ("easy".to_string(), ids(3)),
                ]
                .into(),
                binned_by: router::BinnedBy::Probe,
                ..router::CalibrationTable::default()
            }
        })
    })
}

#[test]
fn a_probe_binned_table_starts_in_its_prior_rows_and_a_thin_bin_defers_to_them() {
    // Agreeing, confident samples read `easy`, but the easy bin's three problems are too
    // few to choose by: the prior row (N 4) goes on from the probe's two samples.
    let out = run_with(
        probe_binned_table(),
        Arc::new(FakeGenerator::arithmetic()),
        "What is 2+3?",
        serde_json::json!({"load": 0.0}),
    );
    let decision = out.router.as_ref().expect("router object").to_json();
    assert_eq!(decision["probe"]["agree"], true, "{decision}");
    assert_eq!(decision["probe"]["bin"], router::PRIOR_BIN, "{decision}");
    assert_eq!(decision["row"]["difficulty"], router::PRIOR_BIN);
    assert_eq!(decision["row"]["n"], 4);
    assert_eq!(out.candidates.len(), 4, "the probe's two and two more");
    // Disagreeing samples read `hard`, a bin of 397 problems: its row (N 6) runs.
    let out = run_with(
        probe_binned_table(),
        endless(),
        "What is 2+3?",
        serde_json::json!({"load": 0.0}),
    );
    let decision = out.router.as_ref().expect("router object").to_json();
    assert_eq!(decision["probe"]["bin"], "hard", "{decision}");
    assert_eq!(decision["row"]["n"], 6);
    assert_eq!(out.candidates.len(), 6);
}

#[test]
fn auto_runs_the_revision_ratio_its_table_measured_best() {
    // Sequential revision at two sequential/parallel ratios beside self-consistency, as the
    // fit grid measures them: the most accurate row (one chain of four attempts) runs with
    // exactly its parameters; revision draws no independent samples, so no probe runs.
    let row = |strategy: &str, params: serde_json::Value, n: usize, accuracy: f64| {
        serde_json::json!({
            "difficulty": router::PRIOR_BIN, "strategy": strategy, "params": params,
            "verifier": "none", "n": n, "max_tokens": 40, "budget": 4096,
            "accuracy": accuracy, "mean_spent": 160.0, "problems": 400, "source": "test"
        })
    };
    let sequential = serde_json::json!({"chains": 1, "attempts": 4, "max_tokens": 40});
    let table = router_with(|t| {
        *t = router::CalibrationTable {
            rows: serde_json::from_value(serde_json::json!([
                row(
                    "self_consistency",
                    serde_json::json!({"n": 4, "max_tokens": 40}),
                    4,
                    0.05
                ),
                row("revision", sequential.clone(), 1, 0.08),
                row(
                    "revision",
                    serde_json::json!({"chains": 2, "attempts": 2, "max_tokens": 40}),
                    2,
                    0.06
                ),
            ]))
            .expect("rows"),
            problems: [(
                router::PRIOR_BIN.to_string(),
                (0..400).map(|i| format!("p{i}")).collect(),
            )]
            .into(),
            binned_by: router::BinnedBy::Probe,
            ..router::CalibrationTable::default()
        }
    });
    let out = run_with(
        &table,
        Arc::new(FakeGenerator::arithmetic()),
        "What is 2+3?",
        serde_json::json!({"load": 0.0}),
    );
    let decision = out.router.as_ref().expect("router object").to_json();
    assert_eq!(decision["strategy"], "revision", "{decision}");
    assert_eq!(decision["params"], sequential);
    assert_eq!(decision["row"]["difficulty"], router::PRIOR_BIN);
    assert!(decision["probe"].is_null(), "{decision}");
    assert_eq!(out.answer.as_deref(), Some("5"));
    assert!(
        (1..=4).contains(&out.candidates.len()),
        "one chain, at most four attempts"
    );
}

#[test]
fn auto_stops_after_two_agreeing_confident_probe_samples() {
    let out = run_with(
        probe_table(),
        Arc::new(FakeGenerator::arithmetic()),
        "What is 2+3?",
        serde_json::json!({"load": 0.0}),
    );
    let decision = out.router.as_ref().expect("router object").to_json();
    let probe = &decision["probe"];
    assert_eq!(probe["agree"], true, "{decision}");
    assert_eq!(probe["confident"], true, "{decision}");
    assert_eq!(probe["bin"], "easy");
    assert_eq!(probe["answers"], serde_json::json!(["5", "5"]));
    // The easy bin's 2-sample row is non-inferior to its 4-sample row (a paired test over
    // their outcomes) and cheaper: the probe was the whole run.
    assert_eq!(decision["row"]["n"], 2, "{decision}");
    assert_eq!(out.candidates.len(), 2);
    assert_eq!(out.answer.as_deref(), Some("5"));
    let sampled: usize = out.candidates.iter().map(|c| c.tokens).sum();
    assert_eq!(
        out.usage.generated_tokens, sampled as u64,
        "exactly two samples"
    );
    assert_eq!(probe["spent"].as_u64(), Some(out.usage.spent()));
}

#[test]
fn auto_runs_the_hard_row_when_the_probe_disagrees_counting_the_probe_in_its_n() {
    let out = run_with(
        probe_table(),
        endless(),
        "What is 2+3?",
        serde_json::json!({"load": 0.0}),
    );
    let decision = out.router.as_ref().expect("router object").to_json();
    let probe = &decision["probe"];
    assert_eq!(probe["agree"], false, "{decision}");
    assert_eq!(probe["bin"], "hard");
    assert_eq!(probe["cap"], 40);
    // The summary `/metrics` counts (read typed from the outcome) and the harness records
    // (read back from the JSON object a response carries): the same.
    assert_eq!(
        router::Allocated::of_json(&decision),
        router::Allocated::of(&out)
    );
    assert_eq!(
        router::Allocated::of(&out),
        Some(router::Allocated {
            difficulty: "hard".into(),
            strategy: decision["strategy"].as_str().expect("strategy").into(),
            probe: "disagree".into(),
            degraded: false,
        })
    );
    let row = &decision["row"];
    assert_eq!(
        (row["difficulty"].as_str(), row["n"].as_u64()),
        (Some("hard"), Some(6))
    );
    // Six samples in all, the probe's two among them, each at the row's 40-token cap.
    assert_eq!(out.candidates.len(), 6, "{decision}");
    assert!(out.candidates.iter().all(|c| c.tokens == 40 && !c.finished));
    assert_eq!(
        out.usage.generated_tokens,
        6 * 40,
        "no probe token is drawn twice"
    );
    // The row's other parameters reach the strategy too: `force_answer: false` asks no
    // candidate for an answer, so none has one and nothing is charged for probing answers.
    assert!(out.candidates.iter().all(|c| c.answer.is_none()));
    assert_eq!(out.usage.probe_tokens, 0);
    assert_eq!(
        decision["params"],
        serde_json::json!({"n": 6, "max_tokens": 40, "force_answer": false})
    );
}

#[test]
fn a_pinned_load_is_recorded_and_replays_identically() {
    let run = |load: f64| {
        run_with(
            probe_table(),
            endless(),
            "What is 2+3?",
            serde_json::json!({"load": load}),
        )
    };
    let (a, b) = (run(0.6), run(0.6));
    let strip = |o: &Outcome| {
        let mut v = serde_json::to_value(o).expect("serialize");
        v["router"]["route_ms"] = serde_json::Value::Null;
        v["usage"]["wall_ms"] = serde_json::Value::Null;
        v
    };
    assert_eq!(
        strip(&a),
        strip(&b),
        "a seeded run at a pinned load replays"
    );
    let decision = a.router.as_ref().expect("router object").to_json();
    assert_eq!(decision["load"], 0.6);
    assert_eq!(decision["degraded"], true, "{decision}");
    let (n, measured) = (
        decision["n"].as_u64().expect("n"),
        decision["row"]["n"].as_u64().expect("row n"),
    );
    assert!(n < measured, "{decision}");
    assert_eq!(
        decision["params"]["n"].as_u64(),
        Some(n),
        "the shrunk width ran"
    );
    assert_eq!(a.candidates.len() as u64, n);
    assert!(
        decision.get("probe").is_none(),
        "no probe while shrinking: {decision}"
    );
    let idle = run(0.0);
    let idle = idle.routing::<router::Decision>().expect("auto's decision");
    assert!(!idle.allocation.degraded, "{idle:?}");
}
