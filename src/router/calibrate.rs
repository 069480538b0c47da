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
    let defaults = registry.list().into_iter().find(|i| i.name == strategy).map(|i| i.defaults).unwrap_or_default();
    let get = |key: &str| defaults.get(key).and_then(|v| v.as_u64()).map(|v| v as usize);
    let n = get("n").or_else(|| get("k")).or_else(|| get("max_n")).unwrap_or(1);
    let steps = defaults.get("steps").and_then(|s| Some(s.get("max_step_tokens")?.as_u64()? * s.get("max_steps")?.as_u64()?));
    let max_tokens = get("max_tokens").or(steps.map(|s| s as usize)).unwrap_or(1024);
    (n, max_tokens)
}

/// Reads a bench JSON file into rows for `difficulty`, replacing `table`'s rows of that
/// difficulty.
pub fn merge_bench(table: &mut CalibrationTable, bench: &Path, difficulty: &str, source: &str) -> Result<usize> {
    let text = std::fs::read_to_string(bench).map_err(|e| RouterError::read(bench, e))?;
    let cells: Vec<BenchCell> = serde_json::from_str(&text).map_err(|e| RouterError::corrupt(bench, "`ponder bench strategies` JSON table", e))?;
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
