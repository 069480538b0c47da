//! `ponder-eval report`: per (strategy, verifier, budget), accuracy with a bootstrap 95% CI,
//! pass@k (unbiased), and — over the same candidates — the majority vote (maj@k), the
//! verifier-weighted vote (each candidate's answer weighted by its score), the oracle (some
//! candidate right: pass@N), the AUROC of candidates' scores separating right from wrong
//! answers, and a paired bootstrap CI of (selection − majority); tokens by kind, latency and
//! verifier calls — as a Markdown table, a JSON summary, and plots of accuracy against spend
//! (see [`crate::plot`]).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::results::ResultRow;
use crate::stats::{auroc, bootstrap_ci, mean, pass_at_k, quantile};

/// One (strategy, budget) cell.
#[derive(Debug, Clone, Serialize)]
pub struct CellReport {
    /// Strategy.
    pub strategy: String,
    /// Verifier.
    pub verifier: String,
    /// The strategy's parameters (`null`, and absent from the JSON: its defaults).
    #[serde(skip_serializing_if = "serde_json::Value::is_null")]
    pub params: serde_json::Value,
    /// Worked examples each question was shown (`--shots`; 0, and absent from the JSON: none).
    #[serde(skip_serializing_if = "crate::results::is_zero")]
    pub shots: usize,
    /// Budget.
    pub budget: u64,
    /// Items (problems × seeds).
    pub n: usize,
    /// Fraction answered correctly.
    pub accuracy: f64,
    /// 95% bootstrap CI of the accuracy.
    pub ci95: (f64, f64),
    /// pass@k over the candidates, for k = 1, 2, 4, … up to the smallest candidate count.
    pub pass_at_k: BTreeMap<usize, f64>,
    /// Majority vote over all candidates' answers, graded.
    pub maj_at_k: f64,
    /// 95% bootstrap CI of `maj_at_k`.
    pub maj_ci95: (f64, f64),
    /// Vote over the candidates weighted by their scores, graded; `None` when no candidate
    /// has a score.
    pub weighted_at_k: Option<f64>,
    /// The oracle: some candidate is right (pass@N).
    pub oracle: f64,
    /// 95% bootstrap CI of `oracle`.
    pub oracle_ci95: (f64, f64),
    /// AUROC of the candidates' scores for right vs wrong answers (pooled over the cell);
    /// `None` without scores or without both right and wrong candidates.
    pub auroc: Option<f64>,
    /// Mean of (selected answer right − majority right) per item, with its paired 95%
    /// bootstrap CI.
    pub selection_minus_majority: (f64, (f64, f64)),
    /// Mean tokens charged.
    pub mean_spent: f64,
    /// Mean tokens generated.
    pub mean_generated: f64,
    /// Mean prefill computed.
    pub mean_prefill_computed: f64,
    /// Mean prefill served from cache.
    pub mean_prefill_reused: f64,
    /// Mean verifier calls.
    pub mean_verifier_calls: f64,
    /// Median latency, ms.
    pub p50_ms: f64,
    /// 90th-percentile latency, ms.
    pub p90_ms: f64,
    /// Items stopped by the budget.
    pub budget_stops: usize,
    /// Items that failed (no answer).
    pub errors: usize,
    /// What `auto` ran, one entry per (bin, strategy, probe, narrowed by load) in the cell's
    /// rows (empty, and absent from the JSON, for other strategies and rows that did not
    /// record it).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allocations: Vec<AllocationReport>,
}

/// The items of an `auto` cell that ran one kind of allocation, and how they did.
#[derive(Debug, Clone, Serialize)]
pub struct AllocationReport {
    /// What ran (bin, strategy, probe).
    #[serde(flatten)]
    pub allocated: ponder::router::Allocated,
    /// Items.
    pub n: usize,
    /// Fraction answered correctly.
    pub accuracy: f64,
    /// Mean tokens charged.
    pub mean_spent: f64,
}

/// Groups the rows that recorded what `auto` ran by that, in (bin, strategy, probe, narrowed)
/// order.
fn allocations(rows: &[&ResultRow]) -> Vec<AllocationReport> {
    type Key = (String, String, String, bool);
    let mut groups: BTreeMap<Key, Vec<&ResultRow>> = BTreeMap::new();
    for r in rows {
        if let Some(a) = &r.allocated {
            let key = (
                a.difficulty.clone(),
                a.strategy.clone(),
                a.probe.clone(),
                a.degraded,
            );
            groups.entry(key).or_default().push(r);
        }
    }
    groups
        .into_values()
        .filter_map(|rs| {
            let allocated = rs.first()?.allocated.clone()?;
            let correct = bits(rs.iter().map(|r| r.correct));
            let spent: Vec<f64> = rs.iter().map(|r| r.spend.spent as f64).collect();
            Some(AllocationReport {
                allocated,
                n: rs.len(),
                accuracy: mean(&correct),
                mean_spent: mean(&spent),
            })
        })
        .collect()
}

fn maj_correct(row: &ResultRow) -> bool {
    let answers = row.candidate_answers.iter().filter_map(|a| a.as_deref());
    ponder_verifiers::majority_vote(answers)
        .is_some_and(|v| ponder_verifiers::equivalent(&row.gold, &v.answer))
}

/// Whether the score-weighted vote over the row's candidates is right; `None` when no
/// candidate has a score (an unscored candidate among scored ones weighs 0).
fn weighted_correct(row: &ResultRow) -> Option<bool> {
    if row.candidate_scores.iter().all(Option::is_none) {
        return None;
    }
    let votes = row
        .candidate_answers
        .iter()
        .zip(&row.candidate_scores)
        .filter_map(|(a, s)| Some((a.as_deref()?, f64::from(s.unwrap_or(0.0)))));
    Some(
        ponder_verifiers::weighted_vote(votes)
            .is_some_and(|v| ponder_verifiers::equivalent(&row.gold, &v.answer)),
    )
}

/// Every scored candidate of the rows: (score, right?).
fn scored_candidates(rows: &[&ResultRow]) -> Vec<(f64, bool)> {
    rows.iter()
        .flat_map(|r| {
            r.candidate_answers
                .iter()
                .zip(&r.candidate_scores)
                .filter_map(|(a, s)| {
                    let right = a
                        .as_deref()
                        .is_some_and(|a| ponder_verifiers::equivalent(&r.gold, a));
                    s.map(|s| (f64::from(s), right))
                })
        })
        .collect()
}

fn bits(xs: impl Iterator<Item = bool>) -> Vec<f64> {
    xs.map(|b| f64::from(u8::from(b))).collect()
}

/// A configuration's name: the strategy, then its parameters unless defaults, then the worked
/// examples unless none (`self_consistency {"n":2} 2-shot`).
pub fn configuration(strategy: &str, params: &serde_json::Value, shots: usize) -> String {
    let mut name = strategy.to_string();
    if !params.is_null() {
        name = format!("{name} {params}");
    }
    if shots > 0 {
        name = format!("{name} {shots}-shot");
    }
    name
}

impl CellReport {
    /// The configuration's name ([`configuration`]).
    pub fn configuration(&self) -> String {
        configuration(&self.strategy, &self.params, self.shots)
    }
}

/// Aggregates rows per (strategy, parameters, worked examples, verifier, budget), sorted in
/// that order.
pub fn summarize(rows: &[ResultRow]) -> Vec<CellReport> {
    type Key = (String, String, usize, String, u64);
    let mut cells: BTreeMap<Key, Vec<&ResultRow>> = BTreeMap::new();
    for r in rows {
        cells
            .entry((
                r.strategy.clone(),
                r.params.to_string(),
                r.shots,
                r.verifier.clone(),
                r.budget,
            ))
            .or_default()
            .push(r);
    }
    cells
        .into_iter()
        .map(|((strategy, _, shots, verifier, budget), rs)| {
            let params = rs
                .first()
                .map_or(serde_json::Value::Null, |r| r.params.clone());
            let correct: Vec<f64> = rs.iter().map(|r| f64::from(u8::from(r.correct))).collect();
            let min_candidates = rs
                .iter()
                .map(|r| r.candidate_answers.len())
                .min()
                .unwrap_or(0);
            let mut pass = BTreeMap::new();
            let mut k = 1;
            while k <= min_candidates {
                let vals: Vec<f64> = rs
                    .iter()
                    .filter_map(|r| pass_at_k(r.candidate_answers.len(), r.candidates_correct, k))
                    .collect();
                pass.insert(k, mean(&vals));
                k *= 2;
            }
            let mut lat: Vec<f64> = rs.iter().map(|r| r.wall_ms as f64).collect();
            lat.sort_by(f64::total_cmp);
            let m =
                |f: &dyn Fn(&ResultRow) -> f64| mean(&rs.iter().map(|r| f(r)).collect::<Vec<_>>());
            let maj = bits(rs.iter().map(|r| maj_correct(r)));
            let weighted: Vec<Option<bool>> = rs.iter().map(|r| weighted_correct(r)).collect();
            let oracle = bits(rs.iter().map(|r| r.candidates_correct > 0));
            let diff: Vec<f64> = correct.iter().zip(&maj).map(|(c, m)| c - m).collect();
            CellReport {
                n: rs.len(),
                accuracy: mean(&correct),
                ci95: bootstrap_ci(&correct, 0.95, 2000, 0x5eed),
                pass_at_k: pass,
                maj_at_k: mean(&maj),
                maj_ci95: bootstrap_ci(&maj, 0.95, 2000, 0x5eed),
                weighted_at_k: weighted
                    .iter()
                    .any(Option::is_some)
                    .then(|| mean(&bits(weighted.iter().map(|w| w.unwrap_or(false))))),
                oracle: mean(&oracle),
                oracle_ci95: bootstrap_ci(&oracle, 0.95, 2000, 0x5eed),
                auroc: auroc(&scored_candidates(&rs)),
                selection_minus_majority: (mean(&diff), bootstrap_ci(&diff, 0.95, 2000, 0x5eed)),
                mean_spent: m(&|r| r.spend.spent as f64),
                mean_generated: m(&|r| r.spend.generated_tokens as f64),
                mean_prefill_computed: m(&|r| r.spend.prefill_tokens_computed as f64),
                mean_prefill_reused: m(&|r| r.spend.prefill_tokens_reused as f64),
                mean_verifier_calls: m(&|r| r.spend.verifier_calls as f64),
                p50_ms: quantile(&lat, 0.5),
                p90_ms: quantile(&lat, 0.9),
                budget_stops: rs
                    .iter()
                    .filter(|r| r.finish_reason.as_deref() == Some("budget"))
                    .count(),
                errors: rs.iter().filter(|r| r.error.is_some()).count(),
                allocations: allocations(&rs),
                strategy,
                verifier,
                params,
                shots,
                budget,
            }
        })
        .collect()
}

/// The cells as Markdown tables: accuracy and spend, then selection against the majority vote
/// and the oracle over the same candidates, then — when `auto` recorded them — what `auto` ran
/// per bin and how those items did.
pub fn markdown(cells: &[CellReport]) -> String {
    let mut out = String::from(
        "| strategy | verifier | budget | n | accuracy | 95% CI | pass@1 | maj@k | tokens spent | generated | prefill computed | prefill reused | verifier calls | p50 ms | p90 ms | budget stops | errors |\n",
    );
    out.push_str(
        "|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for c in cells {
        let pass1 = c
            .pass_at_k
            .get(&1)
            .map_or("–".to_string(), |p| format!("{p:.2}"));
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {:.2} | {:.2}–{:.2} | {} | {:.2} | {:.0} | {:.0} | {:.0} | {:.0} | {:.1} | {:.0} | {:.0} | {} | {} |\n",
            c.configuration(),
            c.verifier,
            c.budget,
            c.n,
            c.accuracy,
            c.ci95.0,
            c.ci95.1,
            pass1,
            c.maj_at_k,
            c.mean_spent,
            c.mean_generated,
            c.mean_prefill_computed,
            c.mean_prefill_reused,
            c.mean_verifier_calls,
            c.p50_ms,
            c.p90_ms,
            c.budget_stops,
            c.errors
        ));
    }
    out.push_str(
        "\n| strategy | verifier | budget | selection (95% CI) | majority (95% CI) | weighted vote | oracle (95% CI) | selection − majority (paired 95% CI) | AUROC |\n",
    );
    out.push_str("|---|---|---:|---|---|---:|---|---|---:|\n");
    let opt = |x: Option<f64>| x.map_or("–".to_string(), |x| format!("{x:.3}"));
    for c in cells {
        let (d, (dlo, dhi)) = c.selection_minus_majority;
        out.push_str(&format!(
            "| `{}` | {} | {} | {:.3} ({:.3}–{:.3}) | {:.3} ({:.3}–{:.3}) | {} | {:.3} ({:.3}–{:.3}) | {:+.3} ({:+.3}–{:+.3}) | {} |\n",
            c.configuration(),
            c.verifier,
            c.budget,
            c.accuracy,
            c.ci95.0,
            c.ci95.1,
            c.maj_at_k,
            c.maj_ci95.0,
            c.maj_ci95.1,
            opt(c.weighted_at_k),
            c.oracle,
            c.oracle_ci95.0,
            c.oracle_ci95.1,
            d,
            dlo,
            dhi,
            opt(c.auroc),
        ));
    }
    if cells.iter().any(|c| !c.allocations.is_empty()) {
        out.push_str(
            "\n| strategy | verifier | budget | bin | ran | probe | items | accuracy | tokens spent |\n",
        );
        out.push_str("|---|---|---:|---|---|---|---:|---:|---:|\n");
        for c in cells {
            for a in &c.allocations {
                out.push_str(&format!(
                    "| `{}` | {} | {} | {} | `{}`{} | {} | {} | {:.3} | {:.0} |\n",
                    c.configuration(),
                    c.verifier,
                    c.budget,
                    a.allocated.difficulty,
                    a.allocated.strategy,
                    if a.allocated.degraded {
                        " (narrowed by load)"
                    } else {
                        ""
                    },
                    a.allocated.probe,
                    a.n,
                    a.accuracy,
                    a.mean_spent,
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, answers: &[&str], scores: &[f32], picked: &str) -> ResultRow {
        let gold = "12";
        let is = |a: &str| ponder_verifiers::equivalent(gold, a);
        ResultRow {
            strategy: "weighted_best_of_n".into(),
            budget: 100,
            verifier: "calc".into(),
            gold: gold.into(),
            answer: Some(picked.into()),
            correct: is(picked),
            candidate_answers: answers.iter().map(|a| Some(a.to_string())).collect(),
            candidate_scores: scores.iter().map(|s| Some(*s)).collect(),
            candidates_correct: answers.iter().filter(|a| is(a)).count(),
            wall_ms: 1,
            ..crate::results::test_row(id)
        }
    }

    #[test]
    fn selection_majority_weighted_oracle_and_auroc_from_the_same_candidates() {
        // p1: majority wrong (13 ×2), the verifier favours 12 → weighted right.
        // p2: nobody right. p3: everyone right.
        let rows = vec![
            row("p1", &["13", "13", "12"], &[0.25, 0.25, 1.0], "12"),
            row("p2", &["7", "8", "7"], &[0.5, 1.0, 0.5], "7"),
            row("p3", &["12", "12", "12"], &[1.0, 1.0, 1.0], "12"),
        ];
        let cells = summarize(&rows);
        assert_eq!(cells.len(), 1);
        let c = &cells[0];
        assert!((c.accuracy - 2.0 / 3.0).abs() < 1e-12);
        assert!((c.maj_at_k - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(c.weighted_at_k.map(|w| (w * 3.0).round()), Some(2.0));
        assert!((c.oracle - 2.0 / 3.0).abs() < 1e-12);
        assert!((c.selection_minus_majority.0 - 1.0 / 3.0).abs() < 1e-12);
        // Right candidates: 1.0 ×4; wrong: 0.25, 0.25, 0.5, 1.0, 0.5.
        // Each right one beats 4 wrong and ties 1: (4 × 4.5) / (4 × 5).
        assert!((c.auroc.unwrap_or(0.0) - 0.9).abs() < 1e-12);
        let md = markdown(&cells);
        assert!(md.contains("| `weighted_best_of_n` | calc | 100 |"), "{md}");
        assert!(md.contains("0.900"), "{md}");
    }

    #[test]
    fn each_parameter_set_of_a_strategy_is_its_own_cell() {
        let mut n2 = row("p1", &["12", "12"], &[1.0, 1.0], "12");
        n2.params = serde_json::json!({"n": 2});
        let rows = vec![row("p1", &["13", "12", "13"], &[0.5, 1.0, 0.5], "13"), n2];
        let cells = summarize(&rows);
        assert_eq!(cells.len(), 2);
        assert_eq!(cells[0].configuration(), "weighted_best_of_n");
        assert_eq!(cells[1].configuration(), "weighted_best_of_n {\"n\":2}");
        assert_eq!((cells[0].accuracy, cells[1].accuracy), (0.0, 1.0));
        let md = markdown(&cells);
        assert!(
            md.contains("| `weighted_best_of_n {\"n\":2}` | calc | 100 |"),
            "{md}"
        );
        let json = serde_json::to_value(&cells).unwrap_or_default();
        assert!(json[0].get("params").is_none(), "defaults: no params key");
        assert_eq!(json[1]["params"]["n"], 2);
    }

    #[test]
    fn runs_with_other_worked_examples_are_other_cells() {
        let mut shown = row("p1", &["12", "12"], &[1.0, 1.0], "12");
        shown.shots = 2;
        let rows = vec![
            row("p1", &["13", "12", "13"], &[0.5, 1.0, 0.5], "13"),
            shown,
        ];
        let cells = summarize(&rows);
        assert_eq!(cells.len(), 2, "zero-shot and 2-shot are not pooled");
        assert_eq!(cells[0].configuration(), "weighted_best_of_n");
        assert_eq!(cells[1].configuration(), "weighted_best_of_n 2-shot");
        assert_eq!((cells[0].accuracy, cells[1].accuracy), (0.0, 1.0));
        let json = serde_json::to_value(&cells).unwrap_or_default();
        assert!(json[0].get("shots").is_none());
        assert_eq!(json[1]["shots"], 2);
        let front = crate::pareto::pareto(&rows);
        assert_eq!(front.len(), 2, "{front:?}");
        assert!(front
            .iter()
            .any(|c| c.label == "weighted_best_of_n 2-shot + calc"));
    }

    #[test]
    fn what_auto_ran_is_reported_per_bin_strategy_and_probe() {
        let ran = |id: &str, right: bool, difficulty: &str, strategy: &str, probe: &str| {
            let mut r = row(id, &["12"], &[1.0], if right { "12" } else { "7" });
            r.strategy = "auto".into();
            r.spend.spent = if probe == "agree" { 100 } else { 300 };
            r.allocated = Some(ponder::router::Allocated {
                difficulty: difficulty.into(),
                strategy: strategy.into(),
                probe: probe.into(),
                degraded: false,
            });
            r
        };
        let rows = vec![
            ran("p1", true, "easy", "weighted_best_of_n", "agree"),
            ran("p2", true, "hard", "answer_convergence", "disagree"),
            ran("p3", false, "hard", "answer_convergence", "disagree"),
            ran("p4", true, "easy", "weighted_best_of_n", "agree"),
            // A row written before `allocated` was recorded counts in the cell, not here.
            ResultRow {
                allocated: None,
                ..ran("p5", false, "easy", "x", "none")
            },
        ];
        let cells = summarize(&rows);
        assert_eq!(cells.len(), 1);
        let a = &cells[0].allocations;
        let seen: Vec<(&str, &str, usize, f64, f64)> = a
            .iter()
            .map(|a| {
                (
                    a.allocated.difficulty.as_str(),
                    a.allocated.probe.as_str(),
                    a.n,
                    a.accuracy,
                    a.mean_spent,
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                ("easy", "agree", 2, 1.0, 100.0),
                ("hard", "disagree", 2, 0.5, 300.0)
            ]
        );
        let md = markdown(&cells);
        assert!(
            md.contains("| `auto` | calc | 100 | hard | `answer_convergence` | disagree | 2 | 0.500 | 300 |"),
            "{md}"
        );
        // Other strategies' cells carry no allocation table.
        assert!(!markdown(&summarize(&[row("p1", &["12"], &[1.0], "12")])).contains("| bin |"));
    }
}
