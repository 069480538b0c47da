//! The learned outcome verifier end to end with the real default model: a harness run with
//! `--verifier learned` records every candidate's score; the candidates exported from that
//! run (`ponder-eval candidates`) and scored offline by the shipped model give the same
//! scores — what `ponder verifier train` fits on is exactly what the verifier sees at run
//! time.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::path::Path;
use std::process::Command;

use ponder::learned_verifier::{self, read_groups, FeatureSet, Featurizer, OutcomeModel};

const BIN: &str = env!("CARGO_BIN_EXE_ponder-eval");

fn repo(path: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

fn ok(cmd: &mut Command) -> String {
    let out = cmd.output().expect("run ponder-eval");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "ponder-eval failed ({}); is the model installed (bash scripts/setup-models.sh)?\n{stderr}",
        out.status
    );
    stderr
}

#[test]
fn scores_recorded_at_run_time_equal_the_offline_scores_of_the_exported_candidates() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let run = tmp.path().join("run");
    let model_path = repo(learned_verifier::DEFAULT_MODEL);
    ok(Command::new(BIN).args([
        "run",
        "--dataset",
        &repo("evals/data/gsm_gen.jsonl").display().to_string(),
        "--split",
        "train",
        "--limit",
        "2",
        "--strategies",
        "weighted_best_of_n",
        "--params",
        r#"{"weighted_best_of_n": {"n": 4, "max_tokens": 96, "score_by": "orm"}}"#,
        "--budgets",
        "1024",
        "--verifier",
        &format!("learned:{}", model_path.display()),
        "--out",
        &run.display().to_string(),
    ]));
    let rows: Vec<serde_json::Value> = std::fs::read_to_string(run.join("results.jsonl"))
        .expect("results")
        .lines()
        .map(|l| serde_json::from_str(l).expect("row"))
        .collect();
    assert_eq!(rows.len(), 2);
    let exported = tmp.path().join("candidates.jsonl");
    ok(Command::new(BIN).args([
        "candidates",
        &run.display().to_string(),
        "--dataset",
        &repo("evals/data/gsm_gen.jsonl").display().to_string(),
        "--out",
        &exported.display().to_string(),
    ]));
    let groups = read_groups(&exported).expect("groups");
    assert_eq!(groups.len(), 2);
    // `--strategy` / `--budget` keep one configuration's rows (shared draws record the same
    // candidates under each strategy that took them).
    let export = |filter: [&str; 2]| {
        let out = tmp.path().join("filtered.jsonl");
        let run = run.display().to_string();
        let dataset = repo("evals/data/gsm_gen.jsonl").display().to_string();
        let out_arg = out.display().to_string();
        let mut args = vec!["candidates", &run, "--dataset", &dataset, "--out", &out_arg];
        args.extend(filter);
        ok(Command::new(BIN).args(args));
        read_groups(&out).expect("groups").len()
    };
    assert_eq!(export(["--strategy", "weighted_best_of_n"]), 2);
    assert_eq!(export(["--strategy", "self_consistency"]), 0);
    assert_eq!(export(["--budget", "2048"]), 0);
    let model = OutcomeModel::load(&model_path).expect("model");
    assert_eq!(
        model.feature_set,
        FeatureSet::Scalar,
        "the shipped model needs no encoder"
    );
    let featurizer = Featurizer::new(model.feature_set, None);
    let features = learned_verifier::group_features(&featurizer, &groups).expect("features");
    for ((row, group), xs) in rows.iter().zip(&groups).zip(&features) {
        let recorded: Vec<f64> = row["candidate_scores"]
            .as_array()
            .expect("scores")
            .iter()
            .map(|s| s.as_f64().expect("every candidate scored"))
            .collect();
        assert_eq!(recorded.len(), group.candidates.len());
        assert!(
            group
                .candidates
                .iter()
                .all(|c| c.trace_confidence.is_some()),
            "the local generator reports confidences"
        );
        for (r, x) in recorded.iter().zip(xs) {
            let offline = f64::from(model.probability(x));
            assert!(
                (r - offline).abs() < 1e-6,
                "run time {r} vs offline {offline}"
            );
            assert!((0.0..=1.0).contains(r));
        }
    }
}
