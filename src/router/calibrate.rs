//! Filling the calibration table: from `ponder bench strategies` output (each (strategy,
//! budget) cell becomes a [`CalibrationRow`] for the difficulty of the problem set it was run
//! on, with the strategy's width and per-branch cap read from its registered defaults, which
//! the bench runs) and from `ponder-eval calibrate` tables, which are written in this same
//! schema with the parameters each run gave its strategy ([`merge_harness`]). [`shape`] and
//! [`difficulty_of_level`] are shared with the harness so both sources describe a
//! configuration the same way; [`with_width`] narrows one (`auto` under load).

use std::path::Path;

use ponder_strategies::Registry;
use serde::Deserialize;

use super::allocator::{CalibrationRow, CalibrationTable, TableFault};
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

/// Width (N, k, max traces, or `revision`'s parallel chains) and per-branch token cap of `strategy` run with `params` (an
/// object of overrides; `null` or a missing key: the registered default).
pub fn shape(registry: &Registry, strategy: &str, params: &serde_json::Value) -> (usize, usize) {
    let defaults = registry
        .list()
        .into_iter()
        .find(|i| i.name == strategy)
        .map(|i| i.defaults)
        .unwrap_or_default();
    let get = |v: &serde_json::Value, key: &str| v.get(key).cloned();
    let value = |key: &str| get(params, key).or_else(|| get(&defaults, key));
    let int = |key: &str| value(key).and_then(|v| v.as_u64()).map(|v| v as usize);
    let n = int("n")
        .or_else(|| int("k"))
        .or_else(|| int("max_n"))
        .or_else(|| int("chains"))
        .unwrap_or(1);
    let step = |key: &str| {
        get(params, "steps")
            .and_then(|s| s.get(key).and_then(serde_json::Value::as_u64))
            .or_else(|| get(&defaults, "steps").and_then(|s| s.get(key)?.as_u64()))
    };
    let steps = step("max_step_tokens")
        .zip(step("max_steps"))
        .map(|(a, b)| a * b);
    let max_tokens = int("max_tokens")
        .or(steps.map(|s| s as usize))
        .unwrap_or(1024);
    (n, max_tokens)
}

/// `params` with the width [`shape`] reads (`n`, `k`, `max_n` or `chains`, whichever the parameters or
/// the registered defaults have) set to `n`: the same configuration, narrower (`auto` under
/// load). A strategy with no width parameter is returned as it is.
pub fn with_width(
    registry: &Registry,
    strategy: &str,
    params: &serde_json::Value,
    n: usize,
) -> serde_json::Value {
    let defaults = registry
        .list()
        .into_iter()
        .find(|i| i.name == strategy)
        .map(|i| i.defaults)
        .unwrap_or_default();
    let has = |v: &serde_json::Value, key: &str| v.get(key).is_some_and(|x| x.is_u64());
    let Some(key) = ["n", "k", "max_n", "chains"]
        .into_iter()
        .find(|k| has(params, k) || has(&defaults, k))
    else {
        return params.clone();
    };
    let mut out = match params {
        serde_json::Value::Object(m) => m.clone(),
        _ => serde_json::Map::new(),
    };
    out.insert(key.into(), serde_json::json!(n));
    serde_json::Value::Object(out)
}

/// [`shape`] with the registered defaults.
pub fn default_shape(registry: &Registry, strategy: &str) -> (usize, usize) {
    shape(registry, strategy, &serde_json::Value::Null)
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
            params: serde_json::Value::Null,
            verifier: "none".into(),
            shots: 0,
            n,
            max_tokens,
            budget: c.budget,
            accuracy: c.accuracy,
            accuracy_ci: None,
            mean_spent: c.mean_spent,
            problems: c.problems,
            source: source.into(),
            outcomes: None,
        });
    }
    Ok(cells.len())
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

/// Merges a `ponder-eval calibrate` table (the same schema as `table`) into `table`:
/// replaces `table`'s rows and problem lists of every difficulty the file has, and takes the
/// file's model when it records one. A file binned otherwise than `table` (by the probe where
/// `table` is by level, or back) replaces `table` whole: a bin of one kind says nothing about a
/// bin of the other. A file listing a public problem of another role than fit, or a row
/// measured over other problems than its bin lists, is refused ([`CalibrationTable::faults`]).
/// Returns the rows merged.
pub fn merge_harness(table: &mut CalibrationTable, harness: &Path) -> Result<usize> {
    let text = std::fs::read_to_string(harness).map_err(|e| RouterError::read(harness, e))?;
    let file: CalibrationTable = serde_json::from_str(&text)
        .map_err(|e| RouterError::corrupt(harness, "`ponder-eval calibrate` table", e))?;
    // A user's own problems are theirs to fit on; a public problem of another role is not.
    let fault = file
        .faults()
        .into_iter()
        .find(|f| !matches!(f, TableFault::NotPublic { .. }));
    if let Some(fault) = fault {
        return Err(RouterError::corrupt(harness, "calibration table", fault));
    }
    if file.binned_by != table.binned_by {
        let n = file.rows.len();
        *table = file;
        return Ok(n);
    }
    let difficulties: std::collections::BTreeSet<&str> =
        file.rows.iter().map(|r| r.difficulty.as_str()).collect();
    table
        .rows
        .retain(|r| !difficulties.contains(r.difficulty.as_str()));
    table
        .problems
        .retain(|d, _| !difficulties.contains(d.as_str()));
    table.rows.extend(file.rows.iter().cloned());
    table.problems.extend(file.problems.clone());
    if file.model.is_some() {
        table.model = file.model.clone();
    }
    Ok(file.rows.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_harness_table_replaces_the_rows_of_its_difficulties_only() {
        let row = |difficulty: &str, strategy: &str| CalibrationRow {
            difficulty: difficulty.into(),
            strategy: strategy.into(),
            params: serde_json::Value::Null,
            verifier: "none".into(),
            shots: 0,
            n: 4,
            max_tokens: 256,
            budget: 1024,
            accuracy: 0.5,
            accuracy_ci: None,
            mean_spent: 700.0,
            problems: 100,
            source: "runs/a".into(),
            outcomes: None,
        };
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("cal.json");
        let file = CalibrationTable {
            rows: vec![row("easy", "best_of_n"), row("easy", "self_consistency")],
            ..CalibrationTable::default()
        };
        std::fs::write(&path, serde_json::to_string(&file).expect("json")).expect("write");
        let mut table = CalibrationTable {
            rows: vec![row("easy", "beam_search"), row("hard", "mcts")],
            ..CalibrationTable::default()
        };
        assert_eq!(merge_harness(&mut table, &path).expect("merge"), 2);
        let mut kept: Vec<(&str, &str)> = table
            .rows
            .iter()
            .map(|r| (r.difficulty.as_str(), r.strategy.as_str()))
            .collect();
        kept.sort_unstable();
        assert_eq!(
            kept,
            vec![
                ("easy", "best_of_n"),
                ("easy", "self_consistency"),
                ("hard", "mcts")
            ]
        );
        std::fs::write(&path, "{\"rows\": 3}").expect("write");
        let e = merge_harness(&mut table, &path).expect_err("corrupt");
        assert!(e.to_string().contains("cal.json"), "{e}");
    }

    #[test]
    fn a_harness_table_listing_a_public_problem_not_of_the_fit_role_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("cal.json");
        let listing = |ids: &[&str]| CalibrationTable {
            problems: [(
                "any".to_string(),
                ids.iter().map(|i| i.to_string()).collect(),
            )]
            .into(),
            binned_by: crate::router::BinnedBy::Probe,
            ..CalibrationTable::default()
        };
        let mut table = CalibrationTable::default();
        // A user's own problems, of no public set, are theirs to calibrate on.
        let own = listing(&["my-problem-1"]);
        std::fs::write(&path, serde_json::to_string(&own).expect("json")).expect("write");
        merge_harness(&mut table, &path).expect("own problems merge");
        // MATH-500's algebra/1265 is a report problem.
        let report = listing(&["my-problem-1", "test/algebra/1265.json"]);
        std::fs::write(&path, serde_json::to_string(&report).expect("json")).expect("write");
        let e = merge_harness(&mut table, &path).expect_err("a report problem");
        let said = e.to_string();
        assert!(
            said.contains("cal.json")
                && said.contains("test/algebra/1265.json is a report problem"),
            "{said}"
        );
        assert_eq!(table, own, "the table is left as it was");
    }

    #[test]
    fn a_probe_binned_table_replaces_a_level_binned_one_whole() {
        let row = |difficulty: &str| CalibrationRow {
            difficulty: difficulty.into(),
            strategy: "deepconf".into(),
            params: serde_json::Value::Null,
            verifier: "none".into(),
            shots: 2,
            n: 4,
            max_tokens: 256,
            budget: 1024,
            accuracy: 0.1,
            accuracy_ci: None,
            mean_spent: 700.0,
            problems: 100,
            source: "grid".into(),
            outcomes: None,
        };
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("cal.json");
        let probed = CalibrationTable {
            rows: vec![row(crate::router::PRIOR_BIN), row("hard")],
            binned_by: crate::router::BinnedBy::Probe,
            ..CalibrationTable::default()
        };
        std::fs::write(&path, serde_json::to_string(&probed).expect("json")).expect("write");
        let mut table = CalibrationTable {
            rows: vec![row("easy"), row("medium"), row("hard")],
            ..CalibrationTable::default()
        };
        assert_eq!(merge_harness(&mut table, &path).expect("merge"), 2);
        assert_eq!(
            table, probed,
            "no level-binned row is left beside the probe's bins"
        );
    }

    #[test]
    fn a_shape_reads_the_parameters_given_over_the_defaults() {
        let registry = Registry::with_builtins();
        assert_eq!(default_shape(&registry, "best_of_n"), (4, 1024));
        let params = serde_json::json!({"n": 8, "max_tokens": 64});
        assert_eq!(shape(&registry, "best_of_n", &params), (8, 64));
        let steps = serde_json::json!({"steps": {"max_step_tokens": 10, "max_steps": 3}});
        assert_eq!(shape(&registry, "beam_search", &steps).1, 30);
    }

    #[test]
    fn a_width_is_set_where_shape_reads_it() {
        let registry = Registry::with_builtins();
        let narrower = with_width(
            &registry,
            "best_of_n",
            &serde_json::json!({"n": 8, "max_tokens": 64}),
            3,
        );
        assert_eq!(shape(&registry, "best_of_n", &narrower), (3, 64));
        let defaults = with_width(&registry, "self_consistency", &serde_json::Value::Null, 2);
        assert_eq!(defaults, serde_json::json!({"n": 2}));
        let adaptive = with_width(&registry, "adaptive_parallel", &serde_json::Value::Null, 5);
        assert_eq!(shape(&registry, "adaptive_parallel", &adaptive).0, 5);
        // Revision's width is its parallel chains; the chain length stays.
        let params = serde_json::json!({"chains": 4, "attempts": 2, "max_tokens": 256});
        assert_eq!(shape(&registry, "revision", &params), (4, 256));
        let narrower = with_width(&registry, "revision", &params, 2);
        assert_eq!(
            narrower,
            serde_json::json!({"chains": 2, "attempts": 2, "max_tokens": 256})
        );
    }
}
