//! The fit grid's committed rows (`evals/examples/fit-calibration/grid-outcomes.jsonl`, written
//! by `ponder-eval redact`): every row is redacted — no gold answer, answer or candidate text
//! of a public problem is in the repository — and every problem is one anything may be fitted
//! on (the fit role of `ponder::roles`).

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
