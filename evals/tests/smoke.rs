//! The harness end to end with the real default model (SmolLM2-135M, installed by
//! `scripts/setup-models.sh`): the CI smoke eval — 2 strategies × 2 budgets on 4 problems of
//! the project's set → a Markdown table and a readable PNG plot — and, on the same grid, resume
//! after a kill, determinism across runs (the second drawing each problem's samples once for
//! both strategies, `--share-draws`), and the Pareto table of that run; and `--shots`
//! (worked train examples before each question) on the project's dev set.

// Test helpers state expectations with `expect` as the tests do (clippy.toml allows that in
// `#[test]` functions only; library and binary code may not).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_ponder-eval");
const STRATEGIES: &str = "self_consistency,best_of_n";
const BUDGETS: &str = "256,512";
const PROBLEMS: usize = 4;

fn dataset() -> String {
    format!("{}/data/ponder-150.jsonl", env!("CARGO_MANIFEST_DIR"))
}

/// `ponder-eval run ARGS --out OUT`, its output captured.
fn eval_run(args: &[&str], out: &Path) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.arg("run")
        .args(args)
        .arg("--out")
        .arg(out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// The smoke grid. Self-consistency draws as many samples as best-of-N (4), so with
/// `--share-draws` the two share each problem's draw.
fn run_cmd(out: &Path, concurrency: usize, extra: &[&str]) -> Command {
    let (dataset, limit, concurrency) = (dataset(), PROBLEMS.to_string(), concurrency.to_string());
    eval_run(
        &[
            "--dataset",
            &dataset,
            "--level",
            "1",
            "--limit",
            &limit,
            "--strategies",
            STRATEGIES,
            "--budgets",
            BUDGETS,
            "--seeds",
            "7",
            "--concurrency",
            &concurrency,
            "--params",
            r#"{"self_consistency":{"n":4}}"#,
        ]
        .iter()
        .chain(extra)
        .copied()
        .collect::<Vec<_>>(),
        out,
    )
}

fn ok(cmd: &mut Command) -> String {
    let out = cmd.output().expect("run ponder-eval");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "ponder-eval failed ({}); is the model installed (bash scripts/setup-models.sh)?\n{stderr}",
        out.status
    );
    String::from_utf8_lossy(&out.stdout).into_owned() + &stderr
}

/// The results file's rows, keyed by item, without the one field allowed to differ (wall time).
fn rows(dir: &Path) -> BTreeMap<String, Value> {
    let text = std::fs::read_to_string(dir.join("results.jsonl")).expect("results.jsonl");
    text.lines()
        .map(|line| {
            let mut v: Value = serde_json::from_str(line).expect("a results row is JSON");
            let key = format!(
                "{}|{}|{}|{}",
                v["problem_id"], v["strategy"], v["budget"], v["seed"]
            );
            v.as_object_mut().expect("object").remove("wall_ms");
            (key, v)
        })
        .collect()
}

fn lines(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("results.jsonl")).map_or(0, |t| t.lines().count())
}

fn kill_after_rows(mut child: Child, dir: &Path, rows: usize) {
    let start = Instant::now();
    while lines(dir) < rows {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("ponder-eval ended ({status}) before writing {rows} rows");
        }
        assert!(
            start.elapsed() < Duration::from_secs(600),
            "no {rows} rows after 10 minutes"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().expect("kill");
    let _ = child.wait();
}

#[test]
fn smoke_eval_resumes_after_a_kill_and_replays_identically() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let items = PROBLEMS * 2 * 2;

    // Run A: four items at a time, killed after a few rows, then resumed to the end.
    let child = run_cmd(&a, 4, &[]).spawn().expect("spawn ponder-eval");
    kill_after_rows(child, &a, 5);
    let before = rows(&a);
    assert!(before.len() >= 5, "{} rows before the kill", before.len());
    let resumed = ok(&mut run_cmd(&a, 4, &[]));
    assert!(
        resumed.contains(&format!("{} already done", before.len())),
        "{resumed}"
    );
    let after = rows(&a);
    assert_eq!(
        lines(&a),
        items,
        "every item once: nothing redone, nothing lost"
    );
    assert_eq!(after.len(), items);
    for (key, row) in &before {
        assert_eq!(
            after.get(key),
            Some(row),
            "row {key} written before the kill changed"
        );
    }

    // Run B: the same grid in one go, one item at a time, each problem's samples drawn once for
    // both strategies (`--share-draws`) — identical results but wall time.
    let said = ok(&mut run_cmd(&b, 1, &["--share-draws"]));
    let groups = PROBLEMS * 2;
    assert!(
        said.contains(&format!(
            "--share-draws: {items} items chose among {groups} shared draws"
        )),
        "{said}"
    );
    let replay = rows(&b);
    let differing: Vec<String> = after
        .iter()
        .filter(|(k, v)| replay.get(*k) != Some(*v))
        .map(|(k, v)| {
            format!(
                "{k}:\n  run A {v}\n  run B {}",
                replay.get(k).map_or("(missing)".into(), Value::to_string)
            )
        })
        .collect();
    assert!(
        differing.is_empty(),
        "{} of {items} rows differ between runs with the same seeds (run B shared draws); \
         first:\n{}",
        differing.len(),
        differing[0]
    );

    // The report: a Markdown table with every cell, and a plot with axes and a legend.
    let report = ok(Command::new(BIN).arg("report").arg(&a));
    for s in STRATEGIES.split(',') {
        for budget in BUDGETS.split(',') {
            assert!(
                report
                    .lines()
                    .any(|l| l.starts_with('|') && l.contains(s) && l.contains(budget)),
                "no table row for {s} @ {budget}:\n{report}"
            );
        }
    }
    let md = std::fs::read_to_string(a.join("report.md")).expect("report.md");
    assert!(md.contains("accuracy") || md.contains("Accuracy"), "{md}");
    let svg = std::fs::read_to_string(a.join("accuracy_vs_spend.svg")).expect("svg");
    for label in [
        "mean tokens spent per problem",
        "accuracy",
        "self_consistency",
        "best_of_n",
    ] {
        assert!(svg.contains(label), "the plot lacks `{label}`");
    }
    let png = image::open(a.join("accuracy_vs_spend.png"))
        .expect("a PNG")
        .to_rgb8();
    // 1,340 px wide (the chart and the legend's column beside it), 600 high for two lines.
    assert_eq!(png.dimensions(), (1340, 600));
    let colours: std::collections::HashSet<[u8; 3]> = png.pixels().map(|p| p.0).collect();
    let ink = png.pixels().filter(|p| p.0 != [255, 255, 255]).count();
    assert!(
        colours.len() >= 8,
        "a plot with {} colours is blank or flat",
        colours.len()
    );
    assert!(
        ink > 1340 * 600 / 100,
        "only {ink} non-white pixels: axes, labels and series are missing"
    );
    // The Pareto table over the same run: one row per strategy and budget, JSON alongside.
    let json_out = a.join("pareto.json");
    let pareto = ok(Command::new(BIN)
        .arg("pareto")
        .arg(&a)
        .arg("--out")
        .arg(&json_out));
    let cells: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(&json_out).expect("pareto.json"))
            .expect("pareto.json is a JSON list");
    assert_eq!(cells.len(), 4, "{pareto}");
    for budget in BUDGETS.split(',') {
        let budget: u64 = budget.parse().expect("budget");
        let at: Vec<&Value> = cells.iter().filter(|c| c["budget"] == budget).collect();
        assert!(
            at.iter().any(|c| c["on_front"] == true),
            "every budget has a front: {pareto}"
        );
    }
    let artifacts = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/artifacts");
    if std::fs::create_dir_all(&artifacts).is_ok() {
        let _ = std::fs::copy(
            a.join("accuracy_vs_spend.png"),
            artifacts.join("smoke_eval.png"),
        );
        let _ = std::fs::copy(a.join("report.md"), artifacts.join("smoke_eval.md"));
    }
}

/// `--shots`: each question is first shown worked solutions of the train split; the rows
/// record how many, the examples reach the model (its candidates write the examples' equalities
/// instead of prose), and over `--url` `--shots-from` is refused (the server's router chooses
/// from its own pool).
#[test]
fn shots_show_train_solutions_and_are_recorded() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let gsm = format!("{}/data/gsm_gen.jsonl", env!("CARGO_MANIFEST_DIR"));
    let run = |dir: &Path, shots: &str| {
        eval_run(
            &[
                "--dataset",
                &gsm,
                "--split",
                "held-out",
                "--limit",
                "4",
                "--strategies",
                "best_of_n",
                "--budgets",
                "512",
                "--seeds",
                "0",
                "--params",
                r#"{"best_of_n":{"n":4}}"#,
                "--shots",
                shots,
            ],
            dir,
        )
    };
    let (with, without) = (tmp.path().join("with"), tmp.path().join("without"));
    let said = ok(&mut run(&with, "2"));
    assert!(said.contains("--shots: examples from"), "{said}");
    ok(&mut run(&without, "0"));
    let equalities = |dir: &Path| -> usize {
        rows(dir)
            .values()
            .flat_map(|r| r["candidates"].as_array().cloned().unwrap_or_default())
            .filter(|c| {
                let text = c["text"].as_str().unwrap_or_default();
                text.contains('×') && text.contains('=')
            })
            .count()
    };
    let shown = rows(&with);
    assert_eq!(shown.len(), 4);
    assert!(shown.values().all(|r| r["shots"] == 2), "{shown:?}");
    // Each row names its two examples, all from the train split.
    assert!(
        shown.values().all(|r| {
            let ids = r["shown"].as_array().cloned().unwrap_or_default();
            ids.len() == 2
                && ids.iter().all(|id| {
                    ponder::split::split_of(id.as_str().unwrap_or_default())
                        == ponder::split::Split::Train
                })
        }),
        "{shown:?}"
    );
    assert!(rows(&without).values().all(|r| r.get("shots").is_none()));
    // The worked examples write `a × b = c`; zero-shot SmolLM2 writes prose.
    assert!(
        equalities(&with) > equalities(&without),
        "with examples {} candidates compute as the examples do, without {}",
        equalities(&with),
        equalities(&without)
    );
    // Refused before anything runs, naming what is wrong.
    let refusal = |extra: &[&str], dir: &str| -> String {
        let mut args = vec![
            "--dataset",
            gsm.as_str(),
            "--strategies",
            "best_of_n",
            "--budgets",
            "64",
        ];
        args.extend_from_slice(extra);
        let out = eval_run(&args, &tmp.path().join(dir))
            .output()
            .expect("run ponder-eval");
        assert!(!out.status.success(), "{extra:?} must be refused");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let over_url = [
        "--url",
        "http://127.0.0.1:9",
        "--shots",
        "1",
        "--shots-from",
        &gsm,
    ];
    assert!(refusal(&over_url, "url").contains("--shots-from applies in-process only"));
    assert!(
        refusal(&["--shots", "9"], "over").contains("0..=8"),
        "the server's limit"
    );
    // A set without worked solutions (ponder-150) takes its examples from another file.
    let own = |dir: &str| {
        eval_run(
            &[
                "--dataset",
                &dataset(),
                "--level",
                "2",
                "--limit",
                "1",
                "--strategies",
                "best_of_n",
                "--budgets",
                "256",
                "--shots",
                "1",
                "--params",
                r#"{"best_of_n":{"n":1}}"#,
            ],
            &tmp.path().join(dir),
        )
    };
    let none = own("none").output().expect("run ponder-eval");
    assert!(!none.status.success());
    assert!(String::from_utf8_lossy(&none.stderr).contains("--shots-from"));
    ok(own("from").args(["--shots-from", &gsm]));
    assert!(rows(&tmp.path().join("from"))
        .values()
        .all(|r| r["shots"] == 1));
}
