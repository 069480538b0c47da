//! `ponder-eval candidates`: a run's candidates as labelled candidate sets — one group per
//! result row, with the question from the dataset and the split from the problem id — the
//! data `ponder verifier train` fits on (train split) and `ponder verifier eval` reports on
//! (held-out split).
//!
//! Rows written before candidates were recorded, rows that failed and rows whose problem is
//! not in the dataset are skipped and counted.

use std::collections::HashMap;

use ponder::learned_verifier::CandidateGroup;
use ponder::split::Split;

use crate::dataset::EvalProblem;
use crate::results::ResultRow;

/// What an export kept and skipped.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Export {
    /// The groups, in row order.
    pub groups: Vec<CandidateGroup>,
    /// Rows without recorded candidates (older runs, failed searches).
    pub without_candidates: usize,
    /// Rows whose problem id is not in the dataset.
    pub unknown_problem: usize,
}

/// Builds candidate groups from `rows`, keeping only problems on `split` (all with `None`).
/// A public benchmark problem is on the train side only in the fit role
/// ([`ponder::roles::may_fit`]); validation and report problems are held out.
pub fn export(rows: &[ResultRow], problems: &[EvalProblem], split: Option<Split>) -> Export {
    let questions: HashMap<&str, &str> = problems
        .iter()
        .map(|p| (p.id.as_str(), p.problem.as_str()))
        .collect();
    let mut out = Export::default();
    for row in rows {
        let side = if ponder::roles::may_fit(&row.problem_id) {
            Split::Train
        } else {
            Split::HeldOut
        };
        if split.is_some_and(|s| s != side) {
            continue;
        }
        if row.candidates.is_empty() {
            out.without_candidates += 1;
            continue;
        }
        let Some(question) = questions.get(row.problem_id.as_str()) else {
            out.unknown_problem += 1;
            continue;
        };
        out.groups.push(CandidateGroup {
            problem_id: row.problem_id.clone(),
            question: (*question).to_string(),
            gold: row.gold.clone(),
            split: side,
            candidates: row.candidates.clone(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ponder::learned_verifier::LabelledCandidate;

    fn problem(id: &str) -> EvalProblem {
        EvalProblem {
            id: id.into(),
            problem: format!("question {id}"),
            answer: "1".into(),
            level: None,
            subject: None,
            solution: None,
        }
    }

    fn row(id: &str, candidates: usize) -> ResultRow {
        ResultRow {
            strategy: "weighted_best_of_n".into(),
            budget: 2048,
            verifier: "calc".into(),
            candidate_answers: vec![Some("1".into()); candidates],
            candidate_scores: vec![None; candidates],
            candidates: (0..candidates)
                .map(|i| LabelledCandidate {
                    text: format!("The answer is {i}."),
                    answer: Some(i.to_string()),
                    correct: i == 1,
                    tokens: 5,
                    finished: true,
                    trace_confidence: None,
                })
                .collect(),
            candidates_correct: usize::from(candidates > 1),
            ..crate::results::test_row(id)
        }
    }

    #[test]
    fn groups_carry_the_question_the_labels_and_the_split_of_the_id() {
        // Ids of no public set split by their hash: p0 is train (bucket 73), p4 held out
        // (29); a public problem is train only in the fit role.
        let (train_id, held_id) = ("p0", "p4");
        let rows = vec![
            row(train_id, 3),
            row(held_id, 2),
            row("missing", 2),
            row(train_id, 0),
        ];
        let problems = vec![problem(train_id), problem(held_id)];
        let all = export(&rows, &problems, None);
        assert_eq!(all.groups.len(), 2);
        assert_eq!((all.without_candidates, all.unknown_problem), (1, 1));
        let g = &all.groups[0];
        assert_eq!(g.question, format!("question {train_id}"));
        assert_eq!(g.split, Split::Train);
        assert_eq!(g.candidates.len(), 3);
        assert_eq!(
            g.candidates.iter().map(|c| c.correct).collect::<Vec<_>>(),
            vec![false, true, false]
        );
        assert_eq!(all.groups[1].split, Split::HeldOut);
        let held = export(&rows, &problems, Some(Split::HeldOut));
        assert_eq!(held.groups.len(), 1);
        assert_eq!(held.groups[0].problem_id, held_id);
        // MATH-500's train/held-out bucket says nothing: it is a report set.
        let math = "test/algebra/1265.json";
        let public = export(&[row(math, 2)], &[problem(math)], None);
        assert_eq!(public.groups[0].split, Split::HeldOut);
    }
}
