//! `ponder generate` and `ponder reason` as a user runs them: the real binary, the real
//! default model.

use std::process::Command;

use crate::util::smollm2_path;

fn ponder(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_ponder"))
        .args(args)
        .arg("--model")
        .arg(smollm2_path())
        .output()
        .expect("run ponder")
}

#[test]
fn generate_answers_a_sum_and_reports_usage() {
    let out = ponder(&[
        "generate",
        "--prompt",
        "What is 2+3?",
        "--temperature",
        "0",
        "--max-tokens",
        "40",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains('5'), "expected the answer 5 in {stdout:?}");
    let usage = stderr.lines().last().unwrap_or_default();
    assert!(usage.starts_with("[usage] prompt_tokens="), "{stderr}");
    assert!(
        usage.contains("generated_tokens=") && usage.contains("tokens/s="),
        "{usage}"
    );
}

#[test]
fn same_seed_same_text_different_seed_different_text() {
    let run = |seed: &str| {
        let out = ponder(&[
            "generate",
            "--prompt",
            "Tell me a short story about a cat.",
            "--temperature",
            "1.0",
            "--seed",
            seed,
            "--max-tokens",
            "24",
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let a = run("11");
    assert_eq!(a, run("11"));
    assert_ne!(a, run("12"));
}

#[test]
fn empty_prompt_fails_cleanly() {
    let out = ponder(&["generate", "--prompt", " "]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("prompt") && stderr.contains("empty"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// `ponder reason --shots 1`: the nearest worked example of the pool (the generated
/// grade-school fixture) is shown first and named in the outcome; 9 is over the limit and refused naming the flag, as is `--exemplars`
/// for a strategy that would be shown none.
#[test]
fn reason_shows_a_worked_example_and_names_it() {
    let out = ponder(&[
        "reason",
        "--problem",
        "A train travels at 30 miles per hour for 4 hours. How many miles does it travel?",
        "--strategy",
        "best_of_n",
        "--params",
        r#"{"n": 1, "max_tokens": 16}"#,
        "--budget",
        "2048",
        "--shots",
        "1",
        "--exemplars",
        "evals/data/gsm_gen.jsonl",
        "--json",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let outcome: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("the outcome as JSON");
    let shown = outcome["shots"].as_array().cloned().unwrap_or_default();
    assert_eq!(shown.len(), 1, "{outcome}");
    assert!(
        shown[0]
            .as_str()
            .is_some_and(|id| id.ends_with("-distance")),
        "a travel question is shown a travel example: {shown:?}"
    );
    let over = ponder(&["reason", "--problem", "q", "--shots", "9"]);
    assert!(!over.status.success());
    assert!(String::from_utf8_lossy(&over.stderr).contains("--shots"));
    let unused = ponder(&[
        "reason",
        "--problem",
        "q",
        "--strategy",
        "best_of_n",
        "--exemplars",
        "evals/data/gsm_gen.jsonl",
    ]);
    assert!(!unused.status.success());
    let stderr = String::from_utf8_lossy(&unused.stderr);
    assert!(
        stderr.contains("--exemplars") && stderr.contains("--shots"),
        "{stderr}"
    );
}

/// Without `--strategy`, `ponder reason` runs what `ponder serve` runs for a request that names
/// none: the shipped measured default of its budget, with the parameters it was measured with
/// (else the built-in self-consistency).
#[test]
fn reason_without_a_strategy_runs_the_measured_default_of_its_budget() {
    let out = ponder(&[
        "reason",
        "--problem",
        "What is 2 + 3?",
        "--budget",
        "1500",
        "--shots",
        "0",
        "--json",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let outcome: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("the outcome as JSON");
    let shipped = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(ponder::router::defaults::DEFAULT_DEFAULTS);
    let (strategy, n) = if shipped.exists() {
        let file = ponder::router::MeasuredDefaults::load(&shipped).expect("the shipped defaults");
        let entry = file.for_budget(1500).expect("an entry").clone();
        (entry.strategy, entry.params["n"].as_u64())
    } else {
        ("self_consistency".to_string(), None)
    };
    assert_eq!(outcome["strategy"], strategy.as_str(), "{outcome}");
    if let Some(n) = n {
        let candidates = outcome["candidates"].as_array().map_or(0, Vec::len);
        assert_eq!(candidates as u64, n, "the measured N: {outcome}");
    }
}
