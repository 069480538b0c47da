//! `ponder-eval calibrate`: the router's calibration table from a run, in the router's own
//! schema ([`ponder::router::CalibrationTable`], the one calibration schema): accuracy and
//! mean spend per (difficulty, strategy, parameters, verifier, worked examples, budget). Dataset levels map to
//! the router's difficulties with [`difficulty_of_level`]; each row keeps the parameters the
//! run gave its strategy (`null`: its registered defaults) and the verifier it scored with,
//! and states the width and cap those parameters mean ([`shape`]), so `auto` runs exactly the
//! configuration that was measured. Rows of `auto` itself are not calibrated (the table is
//! what `auto` chooses from). `ponder router calibrate --harness FILE` merges the file into
//! the router's table.

use std::collections::BTreeMap;

use ponder::router::calibrate::{difficulty_of_level, shape};
use ponder::router::{CalibrationRow, CalibrationTable};
use ponder_strategies::Registry;

use crate::results::ResultRow;
use crate::stats::mean;

/// Builds the table from a run's graded rows (rows a server refused to run are skipped):
/// levels up to `easy_max` are easy, from `hard_min` hard, between them medium (no level:
/// easy).
pub fn calibrate(
    rows: &[ResultRow],
    source: &str,
    easy_max: u32,
    hard_min: u32,
) -> CalibrationTable {
    calibrate_binned(rows, source, |r| {
        difficulty_of_level(r.level.unwrap_or(0), easy_max, hard_min).to_string()
    })
}

/// Each problem's difficulty bin by what a two-sample probe saw on it
/// ([`ponder::router::ProbeBin::read`], the rule `auto`'s probe applies): the rows of a probe
/// run (`self_consistency` of 2 with whole candidates recorded), keyed like the outcomes
/// (problem id, and the seed when not 0). A row without two recorded candidates bins nothing.
pub fn probe_bins(probe_rows: &[ResultRow], threshold: f32) -> BTreeMap<String, String> {
    probe_rows
        .iter()
        .filter(|r| r.http_status.is_none() && r.candidates.len() == ponder::router::PROBE_SAMPLES)
        .map(|r| {
            let answers: Vec<Option<String>> =
                r.candidates.iter().map(|c| c.answer.clone()).collect();
            let finished: Vec<bool> = r.candidates.iter().map(|c| c.finished).collect();
            let lowest: Vec<Option<f32>> = r
                .candidates
                .iter()
                .map(|c| c.trace_confidence.as_ref().map(|t| t.lowest_group))
                .collect();
            let read = ponder::router::ProbeBin::read(&answers, &finished, &lowest, threshold);
            (outcome_key(r), read.bin.name().to_string())
        })
        .collect()
}

/// [`calibrate_binned`] with each problem in the bin its probe row gives ([`probe_bins`]),
/// and beside those bins the same rows over every binned problem ([`ponder::router::PRIOR_BIN`]);
/// problems the probe run has no row for are left out. The table says it is binned by the
/// probe, so `auto` starts a query in the prior rows and lets its probe move it.
pub fn calibrate_by_probe(
    rows: &[ResultRow],
    source: &str,
    bins: &BTreeMap<String, String>,
) -> CalibrationTable {
    let binned: Vec<ResultRow> = rows
        .iter()
        .filter(|r| bins.contains_key(&outcome_key(r)))
        .cloned()
        .collect();
    let mut table = calibrate_binned(&binned, source, |r| {
        bins.get(&outcome_key(r)).cloned().unwrap_or_default()
    });
    let prior = calibrate_binned(&binned, source, |_| ponder::router::PRIOR_BIN.to_string());
    table.rows.extend(prior.rows);
    table.problems.extend(prior.problems);
    table.binned_by = ponder::router::BinnedBy::Probe;
    table
}

/// The key a row's outcome is listed under: the problem id, and the seed when it is not 0.
fn outcome_key(r: &ResultRow) -> String {
    if r.seed == 0 {
        r.problem_id.clone()
    } else {
        format!("{}@{}", r.problem_id, r.seed)
    }
}

/// Builds the table from a run's graded rows, each problem in the difficulty bin `bin_of`
/// gives its row (by level, [`calibrate`]; or by what a probe saw on it). Each row records its
/// per-problem outcomes over its bin's problem list (the table's `problems`) when it has
/// every problem of the list, so the allocator can pair two rows over the same problems.
pub fn calibrate_binned(
    rows: &[ResultRow],
    source: &str,
    bin_of: impl Fn(&ResultRow) -> String,
) -> CalibrationTable {
    let model = common_model(rows);
    let registry = Registry::with_builtins();
    // The parameters' JSON text keys the cell (serde_json writes an object's keys sorted).
    type Key = (String, String, String, String, usize, u64);
    let mut cells: BTreeMap<Key, Vec<&ResultRow>> = BTreeMap::new();
    let mut problems: BTreeMap<String, std::collections::BTreeSet<String>> = BTreeMap::new();
    for r in rows
        .iter()
        .filter(|r| r.http_status.is_none() && r.budget > 0 && r.strategy != "auto")
    {
        let difficulty = bin_of(r);
        problems
            .entry(difficulty.clone())
            .or_default()
            .insert(outcome_key(r));
        let key = (
            difficulty,
            r.strategy.clone(),
            r.params.to_string(),
            r.verifier.clone(),
            r.shots,
            r.budget,
        );
        cells.entry(key).or_default().push(r);
    }
    let problems: BTreeMap<String, Vec<String>> = problems
        .into_iter()
        .map(|(d, ids)| (d, ids.into_iter().collect()))
        .collect();
    let rows = cells
        .into_iter()
        .map(|((difficulty, strategy, _, verifier, shots, budget), rs)| {
            let params = rs
                .first()
                .map_or(serde_json::Value::Null, |r| r.params.clone());
            let (n, max_tokens) = shape(&registry, &strategy, &params);
            let correct: Vec<f64> = rs.iter().map(|r| f64::from(u8::from(r.correct))).collect();
            let by_key: BTreeMap<String, bool> =
                rs.iter().map(|r| (outcome_key(r), r.correct)).collect();
            let outcomes = problems.get(&difficulty).and_then(|ids| {
                ids.iter()
                    .map(|id| by_key.get(id).map(|c| if *c { '1' } else { '0' }))
                    .collect::<Option<String>>()
            });
            CalibrationRow {
                difficulty,
                strategy,
                params,
                verifier,
                shots,
                n,
                max_tokens,
                budget,
                accuracy: mean(&correct),
                accuracy_ci: Some(accuracy_ci(&correct)),
                mean_spent: mean(&rs.iter().map(|r| r.spend.spent as f64).collect::<Vec<_>>()),
                problems: rs.len(),
                source: source.into(),
                outcomes,
            }
        })
        .collect();
    CalibrationTable {
        rows,
        problems,
        model,
        binned_by: ponder::router::BinnedBy::Level,
    }
}

/// The model every row was measured with, when they record one and agree.
fn common_model(rows: &[ResultRow]) -> Option<ponder::models::FittedModel> {
    let mut models = rows
        .iter()
        .map(|r| r.run.as_ref().and_then(|x| x.model.clone()));
    let first = models.next()??;
    models.all(|m| m.as_ref() == Some(&first)).then_some(first)
}

/// 95% bootstrap interval of a row's accuracy (2,000 resamples, seed 0: the same rows give
/// the same interval), rounded to three places.
fn accuracy_ci(correct: &[f64]) -> [f64; 2] {
    let (lo, hi) = ponder_verifiers::metrics::bootstrap_ci(correct, 0.95, 2000, 0);
    let round = |x: f64| (x * 1000.0).round() / 1000.0;
    [round(lo), round(hi)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::Spend;

    fn row(
        level: u32,
        strategy: &str,
        params: serde_json::Value,
        correct: bool,
        spent: u64,
    ) -> ResultRow {
        ResultRow {
            strategy: strategy.into(),
            budget: 512,
            level: Some(level),
            params,
            correct,
            spend: Spend {
                spent,
                ..Spend::default()
            },
            ..crate::results::test_row("p")
        }
    }

    #[test]
    fn levels_pool_into_difficulties_and_each_configuration_is_its_own_row() {
        let null = serde_json::Value::Null;
        let n8 = serde_json::json!({"n": 8, "max_tokens": 64});
        let rows = vec![
            row(1, "best_of_n", null.clone(), true, 100),
            row(2, "best_of_n", null.clone(), false, 300),
            row(5, "best_of_n", null.clone(), false, 500),
            row(1, "best_of_n", n8.clone(), true, 400),
            ResultRow {
                verifier: "calculation".into(),
                ..row(1, "best_of_n", null.clone(), false, 100)
            },
            ResultRow {
                shots: 2,
                ..row(1, "best_of_n", null.clone(), true, 300)
            },
            row(1, "auto", serde_json::json!({"load": 0.0}), true, 50),
            ResultRow {
                http_status: Some(503),
                ..row(1, "best_of_n", null, true, 0)
            },
        ];
        let table = calibrate(&rows, "runs/x", 2, 4);
        let find = |d: &str, n: usize| {
            table
                .rows
                .iter()
                .find(|r| r.difficulty == d && r.n == n && r.verifier == "none" && r.shots == 0)
                .expect("row")
        };
        let defaults = find("easy", 4);
        assert_eq!((defaults.problems, defaults.max_tokens), (2, 1024));
        assert!(
            (defaults.accuracy - 0.5).abs() < 1e-12 && (defaults.mean_spent - 200.0).abs() < 1e-9
        );
        assert!(defaults.params.is_null());
        // One right of two: the interval spans what resampling two problems can give.
        assert_eq!(defaults.accuracy_ci, Some([0.0, 1.0]));
        let wide = find("easy", 8);
        assert_eq!((wide.problems, wide.max_tokens, wide.budget), (1, 64, 512));
        assert_eq!(wide.params, n8, "the row keeps the parameters the run gave");
        assert_eq!(find("hard", 4).problems, 1);
        let verified: Vec<_> = table
            .rows
            .iter()
            .filter(|r| r.verifier == "calculation")
            .collect();
        assert_eq!(
            verified.len(),
            1,
            "another verifier is another configuration"
        );
        assert!((verified[0].accuracy - 0.0).abs() < 1e-12);
        let shown: Vec<_> = table.rows.iter().filter(|r| r.shots == 2).collect();
        assert_eq!(
            (shown.len(), shown[0].problems),
            (1, 1),
            "other worked examples are another configuration"
        );
        assert!(
            table.rows.iter().all(|r| r.strategy != "auto"),
            "auto is not a row"
        );
        assert_eq!(table.rows.len(), 5, "the refused row is not counted");
        assert!(table.rows.iter().all(|r| r.source == "runs/x"));
    }

    fn candidate(
        answer: &str,
        finished: bool,
        lowest: f32,
    ) -> ponder::learned_verifier::LabelledCandidate {
        ponder::learned_verifier::LabelledCandidate {
            text: format!("so it is \\boxed{{{answer}}}"),
            answer: Some(answer.into()),
            correct: false,
            tokens: 10,
            finished,
            trace_confidence: Some(ponder_verifiers::TraceConfidence {
                mean: lowest,
                lowest_group: lowest,
                bottom_10: lowest,
                tail: lowest,
            }),
        }
    }

    #[test]
    fn a_probe_run_bins_problems_by_agreement_and_confidence() {
        let probe = |id: &str, a: (&str, bool, f32), b: (&str, bool, f32)| ResultRow {
            candidates: vec![candidate(a.0, a.1, a.2), candidate(b.0, b.1, b.2)],
            ..crate::results::test_row(id)
        };
        let rows = [
            probe("p-easy", ("4", true, 3.0), ("4.0", true, 3.1)),
            probe("p-medium", ("4", true, 3.0), ("4", true, 1.0)),
            probe("p-cut", ("4", false, 3.0), ("4", true, 3.0)),
            probe("p-hard", ("4", true, 3.0), ("5", true, 3.0)),
            // Slim rows (no candidates) bin nothing.
            crate::results::test_row("p-slim"),
        ];
        let bins = probe_bins(&rows, 2.75);
        let bin = |id: &str| bins.get(id).map(String::as_str);
        assert_eq!(bin("p-easy"), Some("easy"));
        assert_eq!(bin("p-medium"), Some("medium"), "agree, one unsure");
        assert_eq!(bin("p-cut"), Some("medium"), "agree, one cut at its cap");
        assert_eq!(bin("p-hard"), Some("hard"));
        assert_eq!(bin("p-slim"), None);
        // The grid's rows of binned problems land in their bins, with outcomes over each
        // bin's problems; a problem the probe never saw is left out.
        let grid: Vec<ResultRow> = ["p-easy", "p-hard", "p-medium", "p-unseen"]
            .iter()
            .map(|id| ResultRow {
                correct: *id != "p-hard",
                ..crate::results::test_row(id)
            })
            .collect();
        let table = calibrate_by_probe(&grid, "test", &bins);
        assert_eq!(table.binned_by, ponder::router::BinnedBy::Probe);
        let difficulties: Vec<&str> = table.rows.iter().map(|r| r.difficulty.as_str()).collect();
        assert_eq!(difficulties, ["easy", "hard", "medium", "any"]);
        assert_eq!(table.rows[1].outcomes.as_deref(), Some("0"));
        assert_eq!(
            table.problems.get("easy"),
            Some(&vec!["p-easy".to_string()])
        );
        // The prior rows are over every binned problem: 2 of 3 right, outcomes in id order.
        let prior = &table.rows[3];
        assert_eq!((prior.problems, prior.accuracy), (3, 2.0 / 3.0));
        assert_eq!(prior.outcomes.as_deref(), Some("101"));
        assert_eq!(
            table.problems.get(ponder::router::PRIOR_BIN).map(Vec::len),
            Some(3)
        );
    }

    #[test]
    fn outcomes_follow_the_bins_problem_list_and_only_complete_rows_have_them() {
        let r = |id: &str, strategy: &str, correct: bool| ResultRow {
            strategy: strategy.into(),
            correct,
            ..crate::results::test_row(id)
        };
        let rows = [
            r("b", "x", true),
            r("a", "x", false),
            r("c", "x", true),
            r("a", "y", true),
        ];
        let table = calibrate(&rows, "test", 2, 4);
        assert_eq!(
            table.problems.get("easy"),
            Some(&vec!["a".to_string(), "b".to_string(), "c".to_string()])
        );
        let x = table.rows.iter().find(|r| r.strategy == "x");
        assert_eq!(x.and_then(|r| r.outcomes.as_deref()), Some("011"));
        let y = table.rows.iter().find(|r| r.strategy == "y");
        assert_eq!(y.and_then(|r| r.outcomes.clone()), None, "y misses b and c");
    }
}
