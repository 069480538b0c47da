//! `ponder serve --defaults`, as an operator runs it: a search that names no strategy runs the
//! measured default of its budget; a file measured with another model is not applied (the
//! built-in default runs, and `/v1/strategies` says which); a file naming a strategy the server
//! cannot run stops the start, naming it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use ponder::models::FittedModel;
use ponder::router::defaults::DEFAULTS_FORMAT;
use ponder::router::{MeasuredDefault, MeasuredDefaults};
use serde_json::{json, Value};

use crate::server_remote::Process;
use crate::util::{post_json, runtime, smollm2_path};

/// Below 4,096 tokens best-of-2, from 4,096 (the server's default budget) self-consistency of
/// 3, each at 8 tokens a sample, measured with `model`.
fn write_defaults(dir: &Path, model: FittedModel, first: &str) -> PathBuf {
    let entry = |budget: u64, strategy: &str, n: u64| MeasuredDefault {
        budget,
        strategy: strategy.into(),
        params: json!({"n": n, "max_tokens": 8}),
        shots: None,
        accuracy: 0.1,
        mean_spent: 100.0,
    };
    let file = MeasuredDefaults {
        format: DEFAULTS_FORMAT,
        model,
        command: "tests/server_defaults.rs".into(),
        problems: vec!["gsm8k-train-1".into()],
        by_budget: vec![entry(64, first, 2), entry(4096, "self_consistency", 3)],
    };
    let path = dir.join("defaults.json");
    file.save(&path).expect("write the defaults");
    path
}

fn served_model() -> FittedModel {
    FittedModel::of_file(&smollm2_path()).expect("the default model")
}

/// (`/v1/strategies`, then `/v1/reason` without a strategy at `budget` (None: the server's
/// default budget): the strategy that ran and its candidates).
fn ask(server: &Process, budgets: &[Option<u64>]) -> (Value, Vec<(String, usize)>) {
    let rt = runtime(1);
    let client = reqwest::Client::new();
    let listing = rt.block_on(async {
        let r = client
            .get(format!("{}/v1/strategies", server.url))
            .send()
            .await
            .expect("GET /v1/strategies");
        r.json::<Value>().await.expect("json")
    });
    let ran = budgets
        .iter()
        .map(|budget| {
            let mut body = json!({"problem": "What is 2 + 3?", "seed": 1});
            if let Some(b) = budget {
                body["budget_tokens"] = json!(b);
            }
            let (status, out) =
                post_json(&rt, &client, &format!("{}/v1/reason", server.url), &body);
            assert_eq!(status, 200, "{out}");
            let strategy = out["strategy"].as_str().unwrap_or_default().to_string();
            let candidates = out["candidates"].as_array().map_or(0, Vec::len);
            (strategy, candidates)
        })
        .collect();
    (listing, ran)
}

#[test]
fn a_search_without_a_strategy_runs_the_measured_default_of_its_budget() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write_defaults(dir.path(), served_model(), "best_of_n");
    let path = path.to_string_lossy();
    let server = Process::start_with(&["--router", "none", "--defaults", &path]);
    let (listing, ran) = ask(&server, &[Some(500), None]);
    assert_eq!(listing["default"], "self_consistency", "{listing}");
    let listed: Vec<(u64, &str)> = listing["default_by_budget"]
        .as_array()
        .expect("the measured defaults are listed")
        .iter()
        .filter_map(|e| Some((e["budget"].as_u64()?, e["strategy"].as_str()?)))
        .collect();
    assert_eq!(listed, [(64, "best_of_n"), (4096, "self_consistency")]);
    assert_eq!(
        ran,
        [
            ("best_of_n".to_string(), 2),
            ("self_consistency".to_string(), 3)
        ],
        "each budget runs its entry with the parameters it was measured with"
    );
}

#[test]
fn defaults_measured_with_another_model_are_not_applied() {
    let dir = tempfile::tempdir().expect("tempdir");
    let other = FittedModel {
        sha256: Some("0".repeat(64)),
        ..served_model()
    };
    let path = write_defaults(dir.path(), other, "best_of_n");
    let path = path.to_string_lossy();
    let server = Process::start_with(&["--router", "none", "--defaults", &path]);
    let (listing, ran) = ask(&server, &[Some(500)]);
    assert_eq!(listing["default"], "self_consistency", "{listing}");
    assert!(listing.get("default_by_budget").is_none(), "{listing}");
    assert_eq!(
        ran.first().map(|(s, _)| s.as_str()),
        Some("self_consistency"),
        "the built-in default, not the file's best_of_n"
    );
}

#[test]
fn a_defaults_file_naming_a_strategy_the_server_cannot_run_stops_the_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    // An unknown name, and `auto` on a server without a router.
    for (strategy, said) in [
        ("no_such_strategy", "unknown strategy"),
        ("auto", "no router"),
    ] {
        let path = write_defaults(dir.path(), served_model(), strategy);
        let out = Command::new(env!("CARGO_BIN_EXE_ponder"))
            .args([
                "serve",
                "--port",
                "0",
                "--exemplars",
                "none",
                "--router",
                "none",
            ])
            .arg("--model")
            .arg(smollm2_path())
            .arg("--defaults")
            .arg(&path)
            .stdout(Stdio::null())
            .output()
            .expect("run ponder serve");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{strategy}: the start must fail");
        assert!(
            stderr.contains("defaults.json")
                && stderr.contains("budget 64")
                && stderr.contains(said),
            "{strategy}: {stderr}"
        );
    }
}

#[test]
fn the_shipped_defaults_were_chosen_on_validation_problems_with_the_default_model() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join(ponder::router::defaults::DEFAULT_DEFAULTS);
    if !path.exists() {
        eprintln!(
            "no measured defaults ship yet ({}): the built-in default runs",
            path.display()
        );
        return;
    }
    let shipped = MeasuredDefaults::load(&path).expect("the shipped defaults load");
    assert_eq!(
        shipped.foreign_to(&served_model()),
        None,
        "measured with the default model"
    );
    assert!(!shipped.problems.is_empty());
    for id in &shipped.problems {
        assert_eq!(
            ponder::roles::role_of(id),
            Some(ponder::roles::Role::Validation),
            "{id}: a default is chosen on validation problems only"
        );
    }
}
