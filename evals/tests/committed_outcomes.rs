//! The fit grid's committed files: its rows (`evals/examples/fit-calibration/grid-outcomes.jsonl`,
//! written by `ponder-eval redact`) are redacted — no gold answer, answer or candidate text of a
//! public problem is in the repository — and every problem is one anything may be fitted on (the
//! fit role of `ponder::roles`); so is every problem of the calibration table fitted from them
//! (`calibration.json`, `ponder-eval calibrate --bins-from`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use ponder_evals::ResultRow;

#[test]
fn the_committed_grid_rows_are_redacted_fit_problems() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/fit-calibration/grid-outcomes.jsonl");
    let Ok(text) = std::fs::read_to_string(&path) else {
        return; // no grid committed yet
    };
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
        assert!(
            ponder::roles::role_of(&row.problem_id) == Some(ponder::roles::Role::Fit),
            "{at}: not a fit problem"
        );
        rows += 1;
    }
    assert!(rows > 0, "{} is empty", path.display());
}

#[test]
fn the_committed_calibration_table_is_fitted_on_fit_problems_binned_by_the_probe() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/fit-calibration/calibration.json");
    let Ok(text) = std::fs::read_to_string(&path) else {
        return; // no table committed yet
    };
    let table: ponder::router::CalibrationTable = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{}: not a calibration table: {e}", path.display()));
    assert_eq!(table.binned_by, ponder::router::BinnedBy::Probe);
    assert!(table.model.is_some(), "the table records its model");
    assert!(!table.rows.is_empty() && !table.problems.is_empty());
    for (difficulty, ids) in &table.problems {
        for id in ids {
            assert_eq!(
                ponder::roles::role_of(id),
                Some(ponder::roles::Role::Fit),
                "{difficulty}: {id} is not a fit problem"
            );
        }
    }
    for row in &table.rows {
        let bin = table.problems.get(&row.difficulty).map_or(0, Vec::len);
        assert!(
            row.problems <= bin,
            "{} {} @ {}: {} problems, its bin has {bin}",
            row.difficulty,
            row.strategy,
            row.budget,
            row.problems
        );
        if let Some(outcomes) = &row.outcomes {
            assert_eq!(outcomes.len(), bin, "outcomes are over the bin's problems");
        }
    }
}
