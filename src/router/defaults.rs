//! The measured defaults (`data/router/defaults.json`): what a search that names no strategy
//! runs at each budget — the arm validation problems measured most accurate among those that
//! fit it, `auto` or a fixed configuration (one measured at a lower budget fits a larger one as
//! measured; Step 17's `evals/examples/public-report/run.sh choose defaults`).
//!
//! Owns the file's format, its checks and the lookup of a budget's entry. It measures nothing
//! (the harness does) and builds no strategy (the server checks every entry against its
//! registry when it starts). Like every fitted file it records the model it was measured with,
//! the validation problems and the command (style rule 21); a server of another model does not
//! apply it, and runs its built-in default instead, saying why.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::{Result, RouterError};
use crate::models::FittedModel;

/// The file format version this build reads and writes.
pub const DEFAULTS_FORMAT: u32 = 1;

/// Where the shipped defaults live, relative to the checkout.
pub const DEFAULT_DEFAULTS: &str = "data/router/defaults.json";

/// `$PONDER_DEFAULTS`, else `./data/router/defaults.json` if present, else the checkout's.
pub fn default_defaults_path() -> PathBuf {
    crate::models::shipped_path("PONDER_DEFAULTS", DEFAULT_DEFAULTS)
}

/// What a search that names no strategy runs, per budget, as validation measured it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeasuredDefaults {
    /// [`DEFAULTS_FORMAT`].
    pub format: u32,
    /// The model the arms were measured with.
    pub model: FittedModel,
    /// The command that wrote the file.
    pub command: String,
    /// The validation problems every arm ran on (ids of `ponder::roles`' validation role).
    pub problems: Vec<String>,
    /// One entry per measured budget, budgets increasing.
    pub by_budget: Vec<MeasuredDefault>,
}

/// The arm a budget's searches run: from its budget up to the next entry's (below the first
/// entry's budget, the first entry).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeasuredDefault {
    /// The billed budget validation ran at.
    pub budget: u64,
    /// A registered strategy name (`auto`, or a fixed configuration's strategy).
    pub strategy: String,
    /// Its parameters as measured (`null`: the strategy's own, as `auto` takes them).
    #[serde(default)]
    pub params: Value,
    /// Worked examples the arm was shown (`None`: the server's rule for the strategy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shots: Option<usize>,
    /// Its accuracy on the validation problems.
    pub accuracy: f64,
    /// Its mean billed tokens there.
    pub mean_spent: f64,
}

impl MeasuredDefaults {
    /// Reads and checks `path`: the format, at least one entry, budgets strictly increasing,
    /// accuracies in [0, 1] and parameters an object or `null`.
    pub fn load(path: &Path) -> Result<Self> {
        const WHAT: &str = "defaults file";
        let text = std::fs::read_to_string(path).map_err(|e| RouterError::read(path, e))?;
        let file: Self =
            serde_json::from_str(&text).map_err(|e| RouterError::corrupt(path, WHAT, e))?;
        file.check()
            .map_err(|e| RouterError::corrupt(path, WHAT, e))?;
        Ok(file)
    }

    fn check(&self) -> std::result::Result<(), String> {
        if self.format != DEFAULTS_FORMAT {
            return Err(format!(
                "format {} (this build reads {DEFAULTS_FORMAT})",
                self.format
            ));
        }
        if self.by_budget.is_empty() {
            return Err("by_budget is empty".into());
        }
        for pair in self.by_budget.windows(2) {
            if pair[0].budget >= pair[1].budget {
                return Err(format!(
                    "by_budget: budget {} follows {} (budgets must increase)",
                    pair[1].budget, pair[0].budget
                ));
            }
        }
        for entry in &self.by_budget {
            if entry.budget == 0 {
                return Err("by_budget: budget 0".into());
            }
            if !(0.0..=1.0).contains(&entry.accuracy) {
                return Err(format!(
                    "by_budget {}: accuracy {} is not in [0, 1]",
                    entry.budget, entry.accuracy
                ));
            }
            if !(entry.params.is_object() || entry.params.is_null()) {
                return Err(format!(
                    "by_budget {}: params must be an object or null",
                    entry.budget
                ));
            }
        }
        Ok(())
    }

    /// The entry a search of `budget` billed tokens runs: the one of the largest measured
    /// budget not above it, else the first (`None` only for a file without entries, which
    /// [`MeasuredDefaults::load`] refuses).
    pub fn for_budget(&self, budget: u64) -> Option<&MeasuredDefault> {
        self.by_budget
            .iter()
            .rev()
            .find(|e| e.budget <= budget)
            .or_else(|| self.by_budget.first())
    }

    /// Whether every entry runs where `registry`'s strategies are registered (`auto` only
    /// where `has_auto`, a router being loaded): built from its measured parameters. The error
    /// names the entry.
    pub fn check_runs(
        &self,
        registry: &ponder_strategies::Registry,
        has_auto: bool,
    ) -> std::result::Result<(), String> {
        for entry in &self.by_budget {
            let runs = if entry.strategy == "auto" {
                has_auto
                    .then_some(())
                    .ok_or_else(|| "`auto` is off here (no router)".to_string())
            } else {
                registry
                    .build(&entry.strategy, entry.params.clone())
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            };
            runs.map_err(|e| {
                format!(
                    "the default at budget {} ({}) does not run here: {e}",
                    entry.budget, entry.strategy
                )
            })?;
        }
        Ok(())
    }

    /// Why the file does not apply to a server of `served`, if it does not.
    pub fn foreign_to(&self, served: &FittedModel) -> Option<String> {
        (!self.model.applies_to(served)).then(|| {
            format!(
                "the defaults were measured with {}, this server runs {served}",
                self.model
            )
        })
    }

    /// Writes it as pretty JSON (after the same checks [`MeasuredDefaults::load`] makes).
    pub fn save(&self, path: &Path) -> Result<()> {
        const WHAT: &str = "defaults file";
        self.check()
            .map_err(|e| RouterError::corrupt(path, WHAT, e))?;
        super::file::save_pretty(self, path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(budget: u64, strategy: &str) -> MeasuredDefault {
        MeasuredDefault {
            budget,
            strategy: strategy.into(),
            params: Value::Null,
            shots: None,
            accuracy: 0.5,
            mean_spent: budget as f64 * 0.8,
        }
    }

    fn file(entries: Vec<MeasuredDefault>) -> MeasuredDefaults {
        MeasuredDefaults {
            format: DEFAULTS_FORMAT,
            model: FittedModel {
                name: "m.gguf".into(),
                sha256: Some("ab".repeat(32)),
            },
            command: "test".into(),
            problems: vec!["gsm8k-train-1".into()],
            by_budget: entries,
        }
    }

    #[test]
    fn a_budget_runs_the_entry_of_the_largest_measured_budget_not_above_it() {
        let f = file(vec![entry(1024, "auto"), entry(2048, "deepconf")]);
        let at = |budget| f.for_budget(budget).map(|e| e.strategy.as_str());
        assert_eq!(at(1), Some("auto"), "below the first: the first");
        assert_eq!(at(1024), Some("auto"));
        assert_eq!(at(2047), Some("auto"));
        assert_eq!(at(2048), Some("deepconf"));
        assert_eq!(at(1 << 20), Some("deepconf"));
        assert_eq!(file(vec![]).for_budget(1024), None);
    }

    #[test]
    fn a_file_that_cannot_be_looked_up_is_refused_naming_what_is_wrong() {
        let cases = [
            (file(vec![]), "by_budget is empty"),
            (
                file(vec![entry(2048, "a"), entry(1024, "b")]),
                "budgets must increase",
            ),
            (
                file(vec![entry(1024, "a"), entry(1024, "b")]),
                "budgets must increase",
            ),
            (
                file(vec![MeasuredDefault {
                    accuracy: 1.5,
                    ..entry(1024, "a")
                }]),
                "not in [0, 1]",
            ),
            (
                file(vec![MeasuredDefault {
                    params: json!([1]),
                    ..entry(1024, "a")
                }]),
                "params must be an object",
            ),
            (
                MeasuredDefaults {
                    format: 9,
                    ..file(vec![entry(1024, "a")])
                },
                "format 9",
            ),
        ];
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("defaults.json");
        for (bad, why) in cases {
            std::fs::write(&path, serde_json::to_string(&bad).unwrap()).unwrap();
            let e = MeasuredDefaults::load(&path).unwrap_err().to_string();
            assert!(e.contains(why) && e.contains("defaults.json"), "{e}");
        }
    }

    #[test]
    fn a_saved_file_loads_back_and_is_foreign_to_another_model() {
        let f = file(vec![entry(1024, "auto")]);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("defaults.json");
        f.save(&path).unwrap();
        let back = MeasuredDefaults::load(&path).unwrap();
        assert_eq!(back, f);
        assert_eq!(back.foreign_to(&f.model), None);
        let other = FittedModel {
            name: "m.gguf".into(),
            sha256: Some("cd".repeat(32)),
        };
        let why = back.foreign_to(&other).unwrap();
        assert!(why.contains("measured with m.gguf"), "{why}");
    }
}
