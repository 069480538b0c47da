//! The compute allocator: from (category, difficulty, the request's budget, the current load)
//! choose whether to think at all and which measured configuration to run — a row of the
//! calibration table of accuracy vs spend per difficulty and strategy configuration that
//! `ponder-eval calibrate` (or `ponder bench strategies`) measures (see [`CalibrationTable`]).
//!
//! Rules, in order (compute-optimal scaling, Snell et al. 2024: spend where the table says it
//! pays):
//! 1. Direct answer (no chain of thought, one greedy reply) for chat and writing, and for easy
//!    queries of categories that do not need derivations (knowledge) — the semantic-router
//!    result: reasoning only when it pays.
//! 2. Otherwise, among the table's rows for the difficulty (the nearest measured difficulty
//!    when it has none) that were measured with the search's verifier (else without one) and
//!    whose budget fits the request's, run the one with the best measured accuracy — the
//!    configuration the budget buys the most expected accuracy with — unless a cheaper row is
//!    *non-inferior* to it within `margin` by a paired test over the calibration problems both
//!    were measured on ([`super::noninferiority`]); then the cheapest such row
//!    ([`Allocator::choose_row`]). Rows without per-problem outcomes (measured before they
//!    were recorded) cannot show non-inferiority: the most accurate runs. The allocation is
//!    that row as measured: its strategy, its parameters, its N and per-branch cap, its
//!    budget.
//! 3. The request's budget is a hard cap: only rows whose budget fits it are chosen; when none
//!    does, a small self-consistency vote inside the budget runs (an unmeasured fallback, said
//!    so in `basis`).
//! 4. A table measured with another model than the one served says nothing about it: `auto`
//!    then runs the *model-agnostic policy* ([`Allocator::model_agnostic`]) — a
//!    self-consistency vote (Wang et al. 2023) of `N = ⌊0.9 · budget / 256⌋` samples (1 to
//!    16) of at most 256 tokens each, the budget the request gave: no measured row, no
//!    difficulty, a method that helps every model and spends what it was given.
//! 5. Under load (`load` in [0, 1]: busy share of the server) N shrinks — down to one branch,
//!    the row's budget shrinking with it — rather than requests queueing; at full load every
//!    query is answered directly. The load is part of the decision `auto` records, and a
//!    caller can pin it (`auto`'s `load` parameter) so a seeded run replays.

use serde::{Deserialize, Serialize};

/// One measured cell: a strategy configuration's accuracy and mean spend at a budget, on
/// problems of one difficulty.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CalibrationRow {
    /// Difficulty of the problems it was measured on.
    pub difficulty: String,
    /// Strategy name.
    pub strategy: String,
    /// The strategy's parameters as the measured run gave them (`null`: its registered
    /// defaults): `auto` builds the strategy from exactly these.
    #[serde(default)]
    pub params: serde_json::Value,
    /// The verifier the measured run scored with (`none`: the model's own confidence).
    #[serde(default = "no_verifier")]
    pub verifier: String,
    /// Worked examples each problem was shown (`ponder-eval run --shots`; 0 in rows measured
    /// before it was recorded). Recorded, not matched: a request's own `shots` decides what
    /// it is shown.
    #[serde(default)]
    pub shots: usize,
    /// Its width (N, k or max traces) with those parameters.
    pub n: usize,
    /// Its per-branch token cap with those parameters.
    pub max_tokens: usize,
    /// The budget it ran under.
    pub budget: u64,
    /// Share answered correctly.
    pub accuracy: f64,
    /// 95% bootstrap confidence interval of `accuracy` over the problems (absent in rows
    /// measured before it was recorded, and in `ponder bench strategies` rows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accuracy_ci: Option<[f64; 2]>,
    /// Mean tokens charged per problem.
    pub mean_spent: f64,
    /// Problems measured.
    pub problems: usize,
    /// Where the row comes from (the command that measured it, or `prior`).
    pub source: String,
    /// Each calibration problem's outcome (`1` correct, `0` not), in the order of the table's
    /// problem list for this row's difficulty ([`CalibrationTable::problems`]): what the
    /// paired non-inferiority test compares. Absent in rows measured before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcomes: Option<String>,
}

fn no_verifier() -> String {
    "none".into()
}

/// A way a calibration table is not what the allocator may serve ([`CalibrationTable::faults`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TableFault {
    /// A public problem of a role nothing is fitted on ([`crate::roles`]).
    #[error("bin {bin}: {id} is a {role} problem, and tables are fitted on fit problems only")]
    NotFit {
        /// The difficulty bin that lists it.
        bin: String,
        /// The problem id.
        id: String,
        /// Its role.
        role: crate::roles::Role,
    },
    /// A problem of no public set (a user's own calibration problems are such).
    #[error("bin {bin}: {id} is of no public set")]
    NotPublic {
        /// The difficulty bin that lists it.
        bin: String,
        /// The problem id.
        id: String,
    },
    /// A row measured over other problems than its bin lists.
    #[error("row {row}: {problems} problems{}, and its bin lists {bin}", outcomes_said(.outcomes))]
    RowUnlikeItsBin {
        /// The row (difficulty, strategy, budget).
        row: String,
        /// The problems it says it measured.
        problems: usize,
        /// How many per-problem outcomes it holds, if any.
        outcomes: Option<usize>,
        /// How many problems its bin lists.
        bin: usize,
    },
}

fn outcomes_said(outcomes: &Option<usize>) -> String {
    outcomes.map_or_else(String::new, |o| format!(" and {o} outcomes"))
}

/// Accuracy vs spend per difficulty and strategy configuration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CalibrationTable {
    /// The cells.
    pub rows: Vec<CalibrationRow>,
    /// Per difficulty, the ids of the calibration problems its rows' `outcomes` are over.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub problems: std::collections::BTreeMap<String, Vec<String>>,
    /// The model the rows were measured with (absent in tables written before it was
    /// recorded): a table applies to that model only ([`crate::router::FittedModel`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<super::FittedModel>,
    /// What put each calibration problem in its difficulty bin.
    #[serde(default, skip_serializing_if = "BinnedBy::is_level")]
    pub binned_by: BinnedBy,
}

/// What put each calibration problem in its difficulty bin.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BinnedBy {
    /// The dataset's level (`ponder-eval calibrate --easy-max-level …`); a query's bin is
    /// the router's predicted difficulty until the probe says otherwise.
    #[default]
    Level,
    /// What `auto`'s two-sample probe saw on the problem ([`super::ProbeBin`]): a signal that
    /// transfers to problems of other sets, where a level predicted from the question's
    /// embedding does not. A query starts in the prior rows ([`PRIOR_BIN`]: no evidence yet)
    /// and the probe moves it ([`CalibrationTable::starting_bin`]).
    Probe,
}

impl BinnedBy {
    fn is_level(&self) -> bool {
        *self == BinnedBy::Level
    }
}

/// Per-sample token cap of the model-agnostic policy ([`Allocator::model_agnostic`]).
pub const MODEL_AGNOSTIC_CAP: usize = 256;

/// Difficulty levels in order (for "nearest measured difficulty").
pub const DIFFICULTIES: [&str; 3] = ["easy", "medium", "hard"];

/// The bin under which a probe-binned table files its rows over every calibration problem
/// (`ponder-eval calibrate --bins-from` writes them beside the probe's bins): what a
/// configuration is expected to score on a query no probe has read yet, and on one whose
/// probe bin holds too few calibration problems to choose by
/// ([`CalibrationTable::choosing_bin`]).
pub const PRIOR_BIN: &str = "any";

fn level(difficulty: &str) -> usize {
    DIFFICULTIES
        .iter()
        .position(|d| *d == difficulty)
        .unwrap_or(1)
}

impl CalibrationTable {
    /// What keeps the table from being a measurement on fit problems that the allocator can
    /// read as recorded: each listed problem that is a public problem of another role, or of no
    /// public set, and each row unlike its bin's problem list. Empty for a table Step 17's
    /// commands make (`ponder-eval calibrate --bins-from` on the fit grid).
    pub fn faults(&self) -> Vec<TableFault> {
        let mut out = Vec::new();
        for (bin, ids) in &self.problems {
            for id in ids {
                let (bin, id) = (bin.clone(), id.clone());
                out.push(match crate::roles::role_of(&id) {
                    Some(crate::roles::Role::Fit) => continue,
                    Some(role) => TableFault::NotFit { bin, id, role },
                    None => TableFault::NotPublic { bin, id },
                });
            }
        }
        // Tables written before problem lists were recorded have none; their rows' counts
        // cannot be checked, and they carry no outcomes.
        let listed = !self.problems.is_empty();
        for row in &self.rows {
            let bin = self.problems.get(&row.difficulty).map_or(0, Vec::len);
            let outcomes = row.outcomes.as_ref().map(String::len);
            if (listed && row.problems > bin) || outcomes.is_some_and(|o| o != bin) {
                out.push(TableFault::RowUnlikeItsBin {
                    row: format!("{} {} @ {}", row.difficulty, row.strategy, row.budget),
                    problems: row.problems,
                    outcomes,
                    bin,
                });
            }
        }
        out
    }

    /// The worked-example count every row was measured with (`ponder-eval run --shots`);
    /// `None` when the rows differ or there are none.
    pub fn measured_shots(&self) -> Option<usize> {
        let mut shots = self.rows.iter().map(|r| r.shots);
        let first = shots.next()?;
        shots.all(|s| s == first).then_some(first)
    }

    /// Which rows a search scored by `verifier` (a verifier's name; `none` without one) can run
    /// as measured: those measured with its own verifier and those measured without one (the
    /// search then sets its verifier aside, [`ponder_strategies::Context::set_verifier_aside`]);
    /// every row when the table has neither.
    pub fn runnable_with<'a>(&'a self, verifier: &'a str) -> impl Fn(&CalibrationRow) -> bool + 'a {
        let runnable = move |r: &CalibrationRow| r.verifier == verifier || r.verifier == "none";
        let any = !self.rows.iter().any(runnable);
        move |r: &CalibrationRow| any || runnable(r)
    }

    /// Rows for `difficulty`, or for the nearest difficulty that has rows.
    pub fn rows_for(&self, difficulty: &str) -> Vec<&CalibrationRow> {
        let exact: Vec<&CalibrationRow> = self
            .rows
            .iter()
            .filter(|r| r.difficulty == difficulty)
            .collect();
        if !exact.is_empty() {
            return exact;
        }
        // The nearest of the easy / medium / hard bins (the prior rows are no level).
        let levelled = || {
            self.rows
                .iter()
                .filter(|r| DIFFICULTIES.contains(&r.difficulty.as_str()))
        };
        let want = level(difficulty);
        let nearest = levelled()
            .map(|r| level(&r.difficulty))
            .min_by_key(|l| (want.abs_diff(*l), *l));
        match nearest {
            Some(l) => levelled().filter(|r| level(&r.difficulty) == l).collect(),
            None => Vec::new(),
        }
    }

    /// Whether the table is binned by the probe and has rows over every calibration problem
    /// ([`PRIOR_BIN`]).
    pub fn has_prior(&self) -> bool {
        self.binned_by == BinnedBy::Probe && self.rows.iter().any(|r| r.difficulty == PRIOR_BIN)
    }

    /// The bin whose rows choose for a query in `bin`: `bin` itself, except in a table with
    /// prior rows ([`Self::has_prior`]), where a bin of fewer than `min_problems` calibration
    /// problems gives way to [`PRIOR_BIN`] — a bin a model's probe seldom gives (a small model's
    /// two samples rarely agree) measures every configuration on a handful of problems, too
    /// few to tell them apart.
    pub fn choosing_bin<'a>(&self, bin: &'a str, min_problems: usize) -> &'a str {
        if !self.has_prior() {
            return bin;
        }
        let size = self.problems.get(bin).map_or(0, Vec::len);
        if size < min_problems {
            PRIOR_BIN
        } else {
            bin
        }
    }

    /// The bin a query starts in before any probe: [`PRIOR_BIN`] in a table with prior rows;
    /// `medium` in a probe-binned one without (written before they were); else `predicted`,
    /// the router's difficulty.
    pub fn starting_bin<'a>(&self, predicted: &'a str) -> &'a str {
        match self.binned_by {
            BinnedBy::Probe if self.has_prior() => PRIOR_BIN,
            BinnedBy::Probe => "medium",
            BinnedBy::Level => predicted,
        }
    }
}

/// The allocator's knobs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AllocatorConfig {
    /// A cheaper row runs instead of the most accurate one only when the paired 95% interval
    /// of its accuracy difference lies above `−margin` (non-inferiority).
    #[serde(alias = "tolerance")]
    pub margin: f64,
    /// Categories always answered directly.
    pub direct_categories: Vec<String>,
    /// Categories answered directly when easy.
    pub direct_when_easy: Vec<String>,
    /// Token cap of a direct answer.
    pub direct_tokens: usize,
    /// When the table has nothing that fits the budget: per-branch cap of the fallback vote.
    pub fallback_tokens: usize,
    /// Fewest calibration problems a probe bin needs to choose by; a smaller one gives way to
    /// the prior rows ([`CalibrationTable::choosing_bin`]). 30: below that a row's 95% (Wilson)
    /// interval spans more than 0.1 whatever it measured.
    pub min_bin_problems: usize,
}

impl Default for AllocatorConfig {
    fn default() -> Self {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect();
        Self {
            margin: 0.02,
            direct_categories: s(&["chat", "writing"]),
            direct_when_easy: s(&["knowledge"]),
            direct_tokens: 256,
            fallback_tokens: 256,
            min_bin_problems: 30,
        }
    }
}

/// What the allocator chose.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Allocation {
    /// Whether to reason at all (false: one direct greedy answer).
    pub think: bool,
    /// What runs: `direct`, the row's strategy, or `self_consistency` for the fallback vote.
    pub strategy: String,
    /// The parameters it is built with: the row's (`null`: the strategy's defaults); under
    /// load, `auto` writes the shrunk width here.
    pub params: serde_json::Value,
    /// The measured row it runs (none: a direct answer or the fallback vote).
    pub row: Option<CalibrationRow>,
    /// Branches it runs (the row's N, fewer under load).
    pub n: usize,
    /// Per-branch token cap (the row's).
    pub max_tokens: usize,
    /// Tokens this search may spend: the row's budget (scaled by N under load; ≤ the
    /// request's).
    pub budget_tokens: u64,
    /// Whether load made it smaller than the row measured.
    pub degraded: bool,
    /// Why, in a few words.
    pub basis: String,
}

/// The allocator: a calibration table and its knobs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Allocator {
    /// The calibration table.
    pub table: CalibrationTable,
    /// The knobs.
    #[serde(default)]
    pub config: AllocatorConfig,
}

/// `load` clamped to [0, 1] (0 when not a number).
fn clamp_load(load: f64) -> f64 {
    if load.is_finite() {
        load.clamp(0.0, 1.0)
    } else {
        0.0
    }
}

impl Allocator {
    /// [`Allocator::allocate_for`] a search without a verifier.
    pub fn allocate(&self, category: &str, difficulty: &str, budget: u64, load: f64) -> Allocation {
        self.allocate_for(category, difficulty, budget, load, "none")
    }

    /// Chooses the compute for a query of `category` and `difficulty` under `budget` tokens at
    /// `load` (clamped to [0, 1]), for a search scored by `verifier` (its name; `none`): among
    /// the rows it can run as measured ([`CalibrationTable::runnable_with`]).
    pub fn allocate_for(
        &self,
        category: &str,
        difficulty: &str,
        budget: u64,
        load: f64,
        verifier: &str,
    ) -> Allocation {
        let c = &self.config;
        let load = clamp_load(load);
        let direct = |basis: String, degraded: bool| Allocation {
            think: false,
            strategy: "direct".into(),
            params: serde_json::Value::Null,
            row: None,
            n: 1,
            max_tokens: c.direct_tokens.min(budget as usize).max(1),
            budget_tokens: budget,
            degraded,
            basis,
        };
        let has = |list: &[String]| list.iter().any(|x| x == category);
        if has(&c.direct_categories) {
            return direct(format!("{category}: answered directly"), false);
        }
        if difficulty == "easy" && has(&c.direct_when_easy) {
            return direct(format!("easy {category}: answered directly"), false);
        }
        if load >= 0.95 {
            return direct(format!("load {load:.2}: answered directly"), true);
        }
        self.allocate_row(difficulty, budget, load, self.table.runnable_with(verifier))
    }

    /// The model-agnostic policy (module doc, rule 4): a self-consistency vote sized to the
    /// budget, for a model the table was not measured with; `why` is said in `basis`.
    pub fn model_agnostic(&self, budget: u64, why: &str) -> Allocation {
        let cap = MODEL_AGNOSTIC_CAP.min(budget as usize).max(1);
        let n = ((budget as f64 * 0.9) as usize / cap).clamp(1, 16);
        Allocation {
            think: true,
            strategy: "self_consistency".into(),
            params: serde_json::json!({"n": n, "max_tokens": cap}),
            row: None,
            n,
            max_tokens: cap,
            budget_tokens: budget,
            degraded: false,
            basis: format!("model-agnostic policy: self-consistency of {n} ({why})"),
        }
    }

    /// Among the rows for `difficulty` (the nearest measured difficulty when it has none) that
    /// fit `budget` and that `eligible` accepts: the most accurate (ties: the cheaper, then the
    /// earlier row), or the cheapest row non-inferior to it within `margin` by the paired test
    /// over their outcomes ([`super::noninferiority::non_inferior`]).
    pub fn choose_row(
        &self,
        difficulty: &str,
        budget: u64,
        eligible: impl Fn(&CalibrationRow) -> bool,
    ) -> Option<&CalibrationRow> {
        let rows: Vec<&CalibrationRow> = self
            .table
            .rows_for(difficulty)
            .into_iter()
            .filter(|r| r.budget <= budget && r.n > 0 && eligible(r))
            .collect();
        let best = rows.iter().copied().reduce(|a, b| {
            let better = b.accuracy > a.accuracy
                || (b.accuracy == a.accuracy && b.mean_spent < a.mean_spent);
            if better {
                b
            } else {
                a
            }
        })?;
        let stands_in = |r: &CalibrationRow| match (&r.outcomes, &best.outcomes) {
            (Some(x), Some(y)) => super::noninferiority::non_inferior(x, y, self.config.margin),
            _ => false,
        };
        rows.into_iter()
            .filter(|r| std::ptr::eq(*r, best) || (r.mean_spent < best.mean_spent && stands_in(r)))
            .min_by(|a, b| {
                a.mean_spent
                    .total_cmp(&b.mean_spent)
                    .then(b.accuracy.total_cmp(&a.accuracy))
            })
    }

    /// The allocation that runs the row [`Allocator::choose_row`] picks for `difficulty`
    /// among the `eligible` ones, at `load`; the fallback vote when there is none.
    pub fn allocate_row(
        &self,
        difficulty: &str,
        budget: u64,
        load: f64,
        eligible: impl Fn(&CalibrationRow) -> bool,
    ) -> Allocation {
        let load = clamp_load(load);
        let (strategy, params, row, n, max_tokens, row_budget, basis) =
            match self.choose_row(difficulty, budget, eligible) {
                Some(r) => (
                    r.strategy.clone(),
                    r.params.clone(),
                    Some(r.clone()),
                    r.n,
                    r.max_tokens,
                    r.budget,
                    format!(
                        "{} {} (N {}, cap {}) @ {}: {:.2} accuracy for {:.0} tokens on {} problems",
                        r.difficulty,
                        r.strategy,
                        r.n,
                        r.max_tokens,
                        r.budget,
                        r.accuracy,
                        r.mean_spent,
                        r.problems
                    ),
                ),
                None => {
                    let per_branch = self.config.fallback_tokens.min(budget as usize).max(1);
                    let n = (budget as usize / per_branch).clamp(1, 4);
                    (
                        "self_consistency".to_string(),
                        serde_json::json!({"n": n, "max_tokens": per_branch}),
                        None,
                        n,
                        per_branch,
                        budget,
                        "no calibration row fits the budget: small vote (unmeasured)".to_string(),
                    )
                }
            };
        // Load: keep the row's N up to a quarter busy, then shrink linearly to one.
        let shrink = 1.0 - ((load - 0.25) / 0.7).clamp(0.0, 1.0);
        let n_loaded = ((n as f64 * shrink).floor() as usize).max(1);
        let degraded = n_loaded < n;
        // Fewer branches, the same per-branch share: the budget shrinks with N.
        let budget_tokens = if degraded {
            (row_budget as f64 * n_loaded as f64 / n as f64).ceil() as u64
        } else {
            row_budget
        };
        Allocation {
            think: true,
            strategy,
            params,
            row,
            n: n_loaded,
            max_tokens,
            budget_tokens: budget_tokens.min(budget),
            degraded,
            basis: if degraded {
                format!("{basis}; load {load:.2}: N {n} -> {n_loaded}")
            } else {
                basis
            },
        }
    }
}

#[cfg(test)]
#[path = "allocator_tests.rs"]
mod tests;
