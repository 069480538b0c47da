//! `ponder-eval report`: per (strategy, budget), accuracy with a bootstrap 95% CI, pass@k
//! (unbiased), maj@k over the candidates, tokens by kind, latency and verifier calls — as a
//! Markdown table, a JSON summary, and plots of accuracy against spend (see [`crate::plot`]).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::results::ResultRow;
use crate::stats::{bootstrap_ci, mean, pass_at_k, quantile};

/// One (strategy, budget) cell.
#[derive(Debug, Clone, Serialize)]
pub struct CellReport {
    /// Strategy.
    pub strategy: String,
    /// Budget.
    pub budget: i64,
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
}

fn maj_correct(row: &ResultRow) -> bool {
    let answers = row.candidate_answers.iter().filter_map(|a| a.as_deref());
    ponder_verifiers::majority_vote(answers)
        .is_some_and(|v| ponder_verifiers::equivalent(&row.gold, &v.answer))
}

/// Aggregates rows per (strategy, budget), sorted by strategy then budget.
pub fn summarize(rows: &[ResultRow]) -> Vec<CellReport> {
    let mut cells: BTreeMap<(String, i64), Vec<&ResultRow>> = BTreeMap::new();
    for r in rows {
        cells
            .entry((r.strategy.clone(), r.budget))
            .or_default()
            .push(r);
    }
    cells
        .into_iter()
        .map(|((strategy, budget), rs)| {
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
            CellReport {
                n: rs.len(),
                accuracy: mean(&correct),
                ci95: bootstrap_ci(&correct, 0.95, 2000, 0x5eed),
                pass_at_k: pass,
                maj_at_k: mean(
                    &rs.iter()
                        .map(|r| f64::from(u8::from(maj_correct(r))))
                        .collect::<Vec<_>>(),
                ),
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
                strategy,
                budget,
            }
        })
        .collect()
}

/// The cells as a Markdown table.
pub fn markdown(cells: &[CellReport]) -> String {
    let mut out = String::from(
        "| strategy | budget | n | accuracy | 95% CI | pass@1 | maj@k | tokens spent | generated | prefill computed | prefill reused | verifier calls | p50 ms | p90 ms | budget stops | errors |\n",
    );
    out.push_str(
        "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for c in cells {
        let pass1 = c
            .pass_at_k
            .get(&1)
            .map_or("–".to_string(), |p| format!("{p:.2}"));
        out.push_str(&format!(
            "| `{}` | {} | {} | {:.2} | {:.2}–{:.2} | {} | {:.2} | {:.0} | {:.0} | {:.0} | {:.0} | {:.1} | {:.0} | {:.0} | {} | {} |\n",
            c.strategy,
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
    out
}
