//! Calibration rows from `ponder bench strategies` output: each (strategy, budget) cell of the
//! JSON table becomes a [`CalibrationRow`] for the difficulty of the problem set it was run on,
//! with the strategy's width and per-branch cap read from its registered defaults (the bench
//! runs every strategy with its defaults).

use std::path::Path;

use ponder_strategies::Registry;
use serde::Deserialize;

use super::allocator::{CalibrationRow, CalibrationTable};
use super::error::{Result, RouterError};

/// One cell of `ponder bench strategies` JSON output (the fields calibration needs).
#[derive(Debug, Clone, Deserialize)]
pub struct BenchCell {
    /// Strategy.
    pub strategy: String,
    /// Budget.
    pub budget: u64,
    /// Problems run.
    pub problems: usize,
    /// Share correct.
    pub accuracy: f64,
    /// Mean tokens charged.
    pub mean_spent: f64,
}

/// Width and per-branch cap of `strategy` with its default parameters.
pub fn default_shape(registry: &Registry, strategy: &str) -> (usize, usize) {
    let defaults = registry
        .list()
        .into_iter()
        .find(|i| i.name == strategy)
        .map(|i| i.defaults)
        .unwrap_or_default();
    let get = |key: &str| {
        defaults
            .get(key)
            .and_then(|v| v.as_u64())
            .map(|v| v as usize)
    };
    let n = get("n")
        .or_else(|| get("k"))
        .or_else(|| get("max_n"))
        .unwrap_or(1);
    let steps = defaults
        .get("steps")
        .and_then(|s| Some(s.get("max_step_tokens")?.as_u64()? * s.get("max_steps")?.as_u64()?));
    let max_tokens = get("max_tokens")
        .or(steps.map(|s| s as usize))
        .unwrap_or(1024);
    (n, max_tokens)
}

/// Reads a bench JSON file into rows for `difficulty`, replacing `table`'s rows of that
/// difficulty.
pub fn merge_bench(
    table: &mut CalibrationTable,
    bench: &Path,
    difficulty: &str,
    source: &str,
) -> Result<usize> {
    let text = std::fs::read_to_string(bench).map_err(|e| RouterError::read(bench, e))?;
    let cells: Vec<BenchCell> = serde_json::from_str(&text)
        .map_err(|e| RouterError::corrupt(bench, "`ponder bench strategies` JSON table", e))?;
    let registry = Registry::with_builtins();
    table.rows.retain(|r| r.difficulty != difficulty);
    for c in &cells {
        let (n, max_tokens) = default_shape(&registry, &c.strategy);
        table.rows.push(CalibrationRow {
            difficulty: difficulty.into(),
            strategy: c.strategy.clone(),
            n,
            max_tokens,
            budget: c.budget,
            accuracy: c.accuracy,
            mean_spent: c.mean_spent,
            problems: c.problems,
            source: source.into(),
        });
    }
    Ok(cells.len())
}

/// One row of `ponder-eval calibrate` output (the fields calibration needs).
#[derive(Debug, Clone, Deserialize)]
struct HarnessRow {
    level: u32,
    strategy: String,
    budget: i64,
    n: usize,
    accuracy: f64,
    mean_spent: f64,
}

#[derive(Debug, Clone, Deserialize)]
struct HarnessTable {
    rows: Vec<HarnessRow>,
}

/// The router's difficulty for a dataset level: levels up to `easy_max` are easy, from
/// `hard_min` hard, between them medium (level 0, "no level", counts as easy).
pub fn difficulty_of_level(level: u32, easy_max: u32, hard_min: u32) -> &'static str {
    if level <= easy_max {
        "easy"
    } else if level >= hard_min {
        "hard"
    } else {
        "medium"
    }
}

/// Reads a `ponder-eval calibrate` table into rows, mapping each dataset level to a difficulty
/// with [`difficulty_of_level`] and pooling the levels of one difficulty (weighted by items).
/// Replaces `table`'s rows of every difficulty the file has. Returns the rows written.
pub fn merge_harness(
    table: &mut CalibrationTable,
    harness: &Path,
    easy_max: u32,
    hard_min: u32,
    source: &str,
) -> Result<usize> {
    let text = std::fs::read_to_string(harness).map_err(|e| RouterError::read(harness, e))?;
    let file: HarnessTable = serde_json::from_str(&text)
        .map_err(|e| RouterError::corrupt(harness, "`ponder-eval calibrate` table", e))?;
    let mut pooled: std::collections::BTreeMap<(&'static str, String, u64), (usize, f64, f64)> =
        Default::default();
    for r in file.rows.iter().filter(|r| r.n > 0 && r.budget > 0) {
        let key = (
            difficulty_of_level(r.level, easy_max, hard_min),
            r.strategy.clone(),
            r.budget as u64,
        );
        let cell = pooled.entry(key).or_default();
        cell.0 += r.n;
        cell.1 += r.accuracy * r.n as f64;
        cell.2 += r.mean_spent * r.n as f64;
    }
    let registry = Registry::with_builtins();
    let difficulties: std::collections::BTreeSet<&str> = pooled.keys().map(|k| k.0).collect();
    table
        .rows
        .retain(|r| !difficulties.contains(r.difficulty.as_str()));
    for ((difficulty, strategy, budget), (n, correct, spent)) in &pooled {
        let (width, max_tokens) = default_shape(&registry, strategy);
        table.rows.push(CalibrationRow {
            difficulty: (*difficulty).into(),
            strategy: strategy.clone(),
            n: width,
            max_tokens,
            budget: *budget,
            accuracy: correct / *n as f64,
            mean_spent: spent / *n as f64,
            problems: *n,
            source: source.into(),
        });
    }
    Ok(pooled.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn harness_levels_pool_into_difficulties_weighted_by_items() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("cal.json");
        let rows = serde_json::json!({"version": 1, "source": "run", "rows": [
            {"level": 1, "strategy": "best_of_n", "budget": 512, "n": 10, "accuracy": 0.5, "mean_spent": 100.0},
            {"level": 2, "strategy": "best_of_n", "budget": 512, "n": 30, "accuracy": 0.1, "mean_spent": 200.0},
            {"level": 5, "strategy": "best_of_n", "budget": 512, "n": 4, "accuracy": 0.0, "mean_spent": 500.0}
        ]});
        std::fs::write(&path, rows.to_string()).expect("write");
        let mut table = CalibrationTable::default();
        assert_eq!(
            merge_harness(&mut table, &path, 2, 4, "test").expect("merge"),
            2
        );
        let easy = table
            .rows
            .iter()
            .find(|r| r.difficulty == "easy")
            .expect("easy row");
        assert_eq!(easy.problems, 40);
        assert!((easy.accuracy - 0.2).abs() < 1e-12 && (easy.mean_spent - 175.0).abs() < 1e-9);
        assert!(table
            .rows
            .iter()
            .any(|r| r.difficulty == "hard" && r.problems == 4));
        std::fs::write(&path, "{\"rows\": 3}").expect("write");
        let e = merge_harness(&mut table, &path, 2, 4, "test").expect_err("corrupt");
        assert!(e.to_string().contains("cal.json"), "{e}");
    }
}
