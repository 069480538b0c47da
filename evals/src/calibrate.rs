//! `ponder-eval calibrate`: the router's calibration table from a run — accuracy and mean
//! spend per (difficulty level, strategy, budget). The router's allocator reads it to choose the
//! cheapest setting that reaches the best accuracy it can expect for a query's difficulty.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::results::ResultRow;
use crate::stats::mean;

/// One row of the table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CalibrationRow {
    /// Difficulty level (0 when the dataset has none).
    pub level: u32,
    /// Strategy.
    pub strategy: String,
    /// Budget.
    pub budget: i64,
    /// Items.
    pub n: usize,
    /// Accuracy.
    pub accuracy: f64,
    /// Mean tokens charged.
    pub mean_spent: f64,
}

/// The table file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CalibrationTable {
    /// Format version.
    pub version: u32,
    /// Where it came from (the run directory).
    pub source: String,
    /// Rows sorted by level, strategy, budget.
    pub rows: Vec<CalibrationRow>,
}

/// Builds the table from a run's rows.
pub fn calibrate(rows: &[ResultRow], source: &str) -> CalibrationTable {
    let mut cells: BTreeMap<(u32, String, i64), Vec<&ResultRow>> = BTreeMap::new();
    for r in rows {
        cells
            .entry((r.level.unwrap_or(0), r.strategy.clone(), r.budget))
            .or_default()
            .push(r);
    }
    let rows = cells
        .into_iter()
        .map(|((level, strategy, budget), rs)| CalibrationRow {
            level,
            strategy,
            budget,
            n: rs.len(),
            accuracy: mean(
                &rs.iter()
                    .map(|r| f64::from(u8::from(r.correct)))
                    .collect::<Vec<_>>(),
            ),
            mean_spent: mean(&rs.iter().map(|r| r.spend.spent as f64).collect::<Vec<_>>()),
        })
        .collect();
    CalibrationTable {
        version: 1,
        source: source.into(),
        rows,
    }
}
