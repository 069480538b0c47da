//! `ponder-eval pareto`: at each budget, which configurations are on the accuracy-vs-spend
//! Pareto front, and which are dominated by another *beyond the CIs*.
//!
//! A configuration is a (strategy, parameters, worked examples, verifier) cell of one budget. Cells are
//! compared only on the items both answered (same problem and seed), so every difference is
//! paired: `A` dominates `B` beyond the CIs when the paired 95% bootstrap CI of
//! (accuracy A − accuracy B) lies wholly above 0 *and* that of (tokens spent A − tokens spent
//! B) lies wholly below 0 — more accurate and cheaper, both more than noise. The point front
//! is the usual one: no other cell is at least as accurate and at least as cheap with one of
//! the two strictly better.
//!
//! It compares within a budget only (the budget is the question asked) and never pools seeds
//! into one item. It reads graded rows; it grades nothing and runs nothing.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::results::ResultRow;
use crate::stats::{bootstrap_ci, mean};

/// Bootstrap resamples and seed of every CI here (the same as `ponder-eval report`'s).
const RESAMPLES: usize = 2000;
const SEED: u64 = 0x5eed;

/// A mean difference with its paired 95% bootstrap CI.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PairedDiff {
    /// Mean of the per-item differences.
    pub mean: f64,
    /// 95% CI of that mean.
    pub ci95: (f64, f64),
}

impl PairedDiff {
    fn of(diffs: &[f64]) -> Self {
        Self {
            mean: mean(diffs),
            ci95: bootstrap_ci(diffs, 0.95, RESAMPLES, SEED),
        }
    }
}

/// Another cell that dominates this one beyond the CIs, and by how much.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Domination {
    /// The dominating cell's label.
    pub by: String,
    /// Items both cells answered.
    pub items: usize,
    /// Its accuracy minus this cell's (CI above 0).
    pub accuracy: PairedDiff,
    /// Its mean tokens spent minus this cell's (CI below 0).
    pub spent: PairedDiff,
}

/// One configuration at one budget.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ParetoCell {
    /// Budget.
    pub budget: u64,
    /// The strategy, its parameters unless defaults, its worked examples unless none, then
    /// ` + verifier` unless `none`.
    pub label: String,
    /// Items.
    pub n: usize,
    /// Fraction answered correctly.
    pub accuracy: f64,
    /// 95% bootstrap CI of the accuracy.
    pub ci95: (f64, f64),
    /// Mean tokens charged.
    pub mean_spent: f64,
    /// On the point-estimate front.
    pub on_front: bool,
    /// Cells that dominate this one beyond the CIs (empty: none does).
    pub dominated_by: Vec<Domination>,
}

/// The label of a row's configuration, as the report's plot names it:
/// `strategy {params} k-shot`, then ` + verifier` unless `none`.
fn label(r: &ResultRow) -> String {
    let name = crate::report::configuration(&r.strategy, &r.params, r.shots);
    if r.verifier == "none" {
        name
    } else {
        format!("{name} + {}", r.verifier)
    }
}

/// Every cell of every budget, budgets ascending, labels sorted within a budget.
pub fn pareto(rows: &[ResultRow]) -> Vec<ParetoCell> {
    // budget → label → (problem, seed) → (right, spent)
    type Items = BTreeMap<(String, u64), (f64, f64)>;
    let mut grid: BTreeMap<u64, BTreeMap<String, Items>> = BTreeMap::new();
    for r in rows {
        grid.entry(r.budget)
            .or_default()
            .entry(label(r))
            .or_default()
            .insert(
                (r.problem_id.clone(), r.seed),
                (f64::from(u8::from(r.correct)), r.spend.spent as f64),
            );
    }
    let mut out = Vec::new();
    for (budget, cells) in &grid {
        let point = |items: &Items| {
            let right: Vec<f64> = items.values().map(|v| v.0).collect();
            let spent: Vec<f64> = items.values().map(|v| v.1).collect();
            (right, mean(&spent))
        };
        let points: BTreeMap<&String, (f64, f64)> = cells
            .iter()
            .map(|(l, items)| {
                let (right, spent) = point(items);
                (l, (mean(&right), spent))
            })
            .collect();
        for (l, items) in cells {
            let (right, spent) = point(items);
            let (acc, cost) = (mean(&right), spent);
            let on_front = !points.iter().any(|(other, &(a, c))| {
                *other != l && a >= acc && c <= cost && (a > acc || c < cost)
            });
            let dominated_by = cells
                .iter()
                .filter(|(other, _)| *other != l)
                .filter_map(|(other, theirs)| {
                    let (da, ds): (Vec<f64>, Vec<f64>) = items
                        .iter()
                        .filter_map(|(k, mine)| theirs.get(k).map(|t| (t.0 - mine.0, t.1 - mine.1)))
                        .unzip();
                    let accuracy = PairedDiff::of(&da);
                    let spent = PairedDiff::of(&ds);
                    (da.len() >= 2 && accuracy.ci95.0 > 0.0 && spent.ci95.1 < 0.0).then(|| {
                        Domination {
                            by: other.clone(),
                            items: da.len(),
                            accuracy,
                            spent,
                        }
                    })
                })
                .collect();
            out.push(ParetoCell {
                budget: *budget,
                label: l.clone(),
                n: items.len(),
                accuracy: acc,
                ci95: bootstrap_ci(&right, 0.95, RESAMPLES, SEED),
                mean_spent: cost,
                on_front,
                dominated_by,
            });
        }
    }
    out
}

/// The cells as one Markdown table.
pub fn markdown(cells: &[ParetoCell]) -> String {
    let mut out = String::from(
        "| budget | configuration | n | accuracy | 95% CI | tokens spent | point front | dominated beyond the CIs by (Δ accuracy, Δ tokens) |\n|---:|---|---:|---:|---|---:|:---:|---|\n",
    );
    for c in cells {
        let by = if c.dominated_by.is_empty() {
            "none".to_string()
        } else {
            c.dominated_by
                .iter()
                .map(|d| {
                    format!(
                        "`{}` ({:+.3} [{:+.3}, {:+.3}], {:+.0} [{:+.0}, {:+.0}])",
                        d.by,
                        d.accuracy.mean,
                        d.accuracy.ci95.0,
                        d.accuracy.ci95.1,
                        d.spent.mean,
                        d.spent.ci95.0,
                        d.spent.ci95.1
                    )
                })
                .collect::<Vec<_>>()
                .join("; ")
        };
        out.push_str(&format!(
            "| {} | `{}` | {} | {:.3} | {:.3}–{:.3} | {:.0} | {} | {} |\n",
            c.budget,
            c.label,
            c.n,
            c.accuracy,
            c.ci95.0,
            c.ci95.1,
            c.mean_spent,
            if c.on_front { "yes" } else { "" },
            by
        ));
    }
    out
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn row(strategy: &str, id: usize, correct: bool, spent: u64) -> ResultRow {
        let mut r = crate::results::test_row(&format!("p{id}"));
        r.strategy = strategy.into();
        r.budget = 1024;
        r.correct = correct;
        r.spend.spent = spent;
        r
    }

    fn cell<'a>(cells: &'a [ParetoCell], label: &str) -> &'a ParetoCell {
        cells
            .iter()
            .find(|c| c.label == label)
            .unwrap_or_else(|| panic!("no cell {label}"))
    }

    #[test]
    fn a_clearly_better_and_cheaper_cell_dominates_beyond_the_cis() {
        // `good` is right on 30 of 40 and spends 100; `bad` right on 5 and spends 500.
        let mut rows = Vec::new();
        for i in 0..40 {
            rows.push(row("good", i, i < 30, 100 + (i % 3) as u64));
            rows.push(row("bad", i, i < 5, 500 + (i % 7) as u64));
        }
        let cells = pareto(&rows);
        let (good, bad) = (cell(&cells, "good"), cell(&cells, "bad"));
        assert!(good.on_front && good.dominated_by.is_empty());
        assert!(!bad.on_front);
        assert_eq!(bad.dominated_by.len(), 1);
        let d = &bad.dominated_by[0];
        assert_eq!((d.by.as_str(), d.items), ("good", 40));
        assert!((d.accuracy.mean - 25.0 / 40.0).abs() < 1e-12);
        assert!(d.accuracy.ci95.0 > 0.0 && d.spent.ci95.1 < 0.0);
    }

    #[test]
    fn a_difference_inside_the_noise_dominates_nothing() {
        // `a` is one problem better and a little cheaper: on the point front alone.
        let mut rows = Vec::new();
        for i in 0..40 {
            rows.push(row("a", i, i < 9, 300 + (i % 5) as u64 * 40));
            rows.push(row("b", i, i < 8 || i == 20, 310 + (i % 4) as u64 * 50));
        }
        let cells = pareto(&rows);
        assert!(cells.iter().all(|c| c.dominated_by.is_empty()), "{cells:?}");
        assert!(cell(&cells, "a").on_front);
    }

    #[test]
    fn only_shared_items_are_paired_and_budgets_and_parameters_are_kept_apart() {
        let mut rows = Vec::new();
        for i in 0..20 {
            rows.push(row("x", i, true, 10));
            let mut y = row("x", i, false, 1000);
            y.params = serde_json::json!({"n": 2});
            rows.push(y);
            let mut z = row("x", i, false, 1000);
            z.budget = 2048;
            rows.push(z);
        }
        // Items of `x` the other cell never ran are not paired.
        rows.push(row("x", 99, false, 5000));
        let cells = pareto(&rows);
        assert_eq!(cells.len(), 3);
        let slow = cell(&cells, "x {\"n\":2}");
        assert_eq!(slow.dominated_by.len(), 1);
        assert_eq!(slow.dominated_by[0].items, 20);
        let alone = cells.iter().find(|c| c.budget == 2048).map(|c| c.on_front);
        assert_eq!(alone, Some(true), "a budget's only cell is its front");
        let md = markdown(&cells);
        assert!(md.contains("| 1024 | `x {\"n\":2}` | 20 |"), "{md}");
    }
}
