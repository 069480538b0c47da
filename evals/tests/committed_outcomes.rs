//! The committed result rows: the fit grid's (`evals/examples/fit-calibration/grid-outcomes.jsonl`)
//! and the public report's (`evals/examples/public-report/outcomes/`), both written by
//! `ponder-eval redact`, are redacted — no gold answer, answer or candidate text of a public
//! problem is in the repository — and every problem has the role its file claims (the grid's are
//! fit problems, a `validation-*` run's validation ones, a `report-*` run's report ones; the
//! roles of `ponder::roles`); every problem of the calibration table fitted from the grid
//! (`calibration.json`, `ponder-eval calibrate --bins-from`) is a fit problem.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use ponder::roles::Role;
use ponder_evals::ResultRow;

/// Checks every row of `path` is redacted and of a problem in `role`; returns how many rows.
fn assert_redacted_rows_of(path: &Path, role: Role) -> usize {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: unreadable: {e}", path.display()));
    let mut rows = 0;
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let row: ResultRow = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("{}:{}: not a result row: {e}", path.display(), i + 1));
        let at = format!("{}:{} ({})", path.display(), i + 1, row.problem_id);
        assert!(row.redacted, "{at}: not redacted");
        assert!(
            row.gold.is_empty() && row.answer.is_none(),
            "{at}: holds an answer"
        );
        assert!(
            row.candidate_answers.iter().all(Option::is_none) && row.candidates.is_empty(),
            "{at}: holds a candidate's answer or text"
        );
        assert_eq!(
            ponder::roles::role_of(&row.problem_id),
            Some(role),
            "{at}: not a {role:?} problem"
        );
        rows += 1;
    }
    rows
}

#[test]
fn the_committed_grid_rows_are_redacted_fit_problems() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/fit-calibration/grid-outcomes.jsonl");
    if !path.is_file() {
        return; // no grid committed yet
    }
    assert!(
        assert_redacted_rows_of(&path, Role::Fit) > 0,
        "{} is empty",
        path.display()
    );
}

#[test]
fn the_committed_report_rows_are_redacted_and_of_their_runs_role() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/public-report/outcomes");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return; // no report rows committed yet
    };
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let role = if name.starts_with("validation-") {
            Role::Validation
        } else if name.starts_with("report-") {
            Role::Report
        } else {
            panic!(
                "{}: neither a validation- nor a report- run",
                path.display()
            )
        };
        assert_redacted_rows_of(&path, role);
    }
}

#[test]
fn the_committed_calibration_table_is_fitted_on_fit_problems_binned_by_the_probe() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/fit-calibration/calibration.json");
    let Ok(text) = std::fs::read_to_string(&path) else {
        return; // no table committed yet
    };
    let table: ponder::router::CalibrationTable = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{}: not a calibration table: {e}", path.display()));
    assert_eq!(table.binned_by, ponder::router::BinnedBy::Probe);
    assert!(table.model.is_some(), "the table records its model");
    assert!(!table.rows.is_empty() && !table.problems.is_empty());
    assert_eq!(
        table.faults(),
        vec![],
        "fitted on fit problems, rows over their bins"
    );
}
