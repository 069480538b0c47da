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
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_search_chooses_among_the_rows_measured_with_its_verifier_or_without_one() {
        let scored = |verifier: &str, accuracy: f64, spent: f64| CalibrationRow {
            verifier: verifier.into(),
            ..row("easy", "best_of_n", 8, 1024, accuracy, spent)
        };
        let a = Allocator {
            table: CalibrationTable {
                rows: vec![scored("none", 0.2, 300.0), scored("learned", 0.3, 400.0)],
                ..CalibrationTable::default()
            },
            config: AllocatorConfig::default(),
        };
        let chosen = |verifier: &str| {
            a.allocate_for("math", "easy", 4096, 0.0, verifier)
                .row
                .map(|r| r.verifier)
        };
        assert_eq!(chosen("learned").as_deref(), Some("learned"));
        assert_eq!(
            chosen("none").as_deref(),
            Some("none"),
            "not the learned row"
        );
        assert_eq!(
            chosen("llm-prm").as_deref(),
            Some("none"),
            "an unmeasured verifier: the rows measured without one"
        );
        let close = Allocator {
            table: CalibrationTable {
                rows: vec![scored("none", 0.28, 300.0), scored("learned", 0.3, 400.0)],
                ..CalibrationTable::default()
            },
            config: AllocatorConfig::default(),
        };
        assert_eq!(
            close
                .allocate_for("math", "easy", 4096, 0.0, "learned")
                .row
                .map(|r| r.verifier)
                .as_deref(),
            Some("learned"),
            "nothing shows the cheaper row non-inferior: the more accurate runs"
        );
        let only_learned = CalibrationTable {
            rows: vec![scored("learned", 0.3, 400.0)],
            ..CalibrationTable::default()
        };
        assert!(
            only_learned.runnable_with("calc")(&only_learned.rows[0]),
            "then any row"
        );
    }

    #[test]
    fn measured_shots_is_the_count_every_row_shares() {
        let with = |shots: &[usize]| CalibrationTable {
            rows: shots
                .iter()
                .map(|&k| CalibrationRow {
                    shots: k,
                    ..row("easy", "best_of_n", 4, 512, 0.5, 100.0)
                })
                .collect(),
            ..CalibrationTable::default()
        };
        assert_eq!(with(&[2, 2, 2]).measured_shots(), Some(2));
        assert_eq!(with(&[0]).measured_shots(), Some(0));
        assert_eq!(with(&[2, 0]).measured_shots(), None, "rows differ");
        assert_eq!(with(&[]).measured_shots(), None, "no rows");
    }

    fn row(
        difficulty: &str,
        strategy: &str,
        n: usize,
        budget: u64,
        accuracy: f64,
        mean_spent: f64,
    ) -> CalibrationRow {
        CalibrationRow {
            difficulty: difficulty.into(),
            strategy: strategy.into(),
            params: serde_json::json!({"n": n, "max_tokens": 1024}),
            verifier: "none".into(),
            shots: 0,
            n,
            max_tokens: 1024,
            budget,
            accuracy,
            accuracy_ci: None,
            mean_spent,
            problems: 12,
            source: "test".into(),
            outcomes: None,
        }
    }

    fn allocator() -> Allocator {
        Allocator {
            table: CalibrationTable {
                rows: vec![
                    row("easy", "self_consistency", 8, 512, 0.50, 480.0),
                    row("easy", "self_consistency", 8, 2048, 0.52, 1900.0),
                    row("easy", "first_finish", 8, 2048, 0.30, 600.0),
                    row("hard", "self_consistency", 8, 2048, 0.40, 1950.0),
                    row("hard", "beam_search", 8, 2048, 0.45, 2000.0),
                ],
                ..CalibrationTable::default()
            },
            config: AllocatorConfig::default(),
        }
    }

    #[test]
    fn a_probe_binned_table_chooses_by_its_prior_rows_before_the_probe_and_for_thin_bins() {
        let sized =
            |difficulty: &str, strategy: &str, accuracy: f64, problems: usize| CalibrationRow {
                problems,
                ..row(difficulty, strategy, 4, 1024, accuracy, 800.0)
            };
        let ids = |prefix: &str, k: usize| (0..k).map(|i| format!("{prefix}{i}")).collect();
        let mut table = CalibrationTable {
            rows: vec![
                sized(PRIOR_BIN, "self_consistency", 0.04, 100),
                sized(PRIOR_BIN, "deepconf", 0.05, 100),
                sized("hard", "self_consistency", 0.03, 97),
                sized("easy", "best_of_n", 0.9, 3),
            ],
            problems: [
                (PRIOR_BIN.to_string(), ids("p", 100)),
                ("hard".to_string(), ids("p", 97)),
                ("easy".to_string(), ids("e", 3)),
            ]
            .into(),
            binned_by: BinnedBy::Probe,
            ..CalibrationTable::default()
        };
        assert!(table.has_prior());
        // Before a probe: the prior rows, whatever the router predicted.
        assert_eq!(table.starting_bin("easy"), PRIOR_BIN);
        let a = Allocator {
            table: table.clone(),
            config: AllocatorConfig::default(),
        };
        let x = a.allocate("math", PRIOR_BIN, 4096, 0.0);
        assert_eq!(
            x.strategy, "deepconf",
            "the best over every calibration problem"
        );
        // Three easy problems are too few to choose by; 97 hard ones are not.
        assert_eq!(table.choosing_bin("easy", 30), PRIOR_BIN);
        assert_eq!(table.choosing_bin("hard", 30), "hard");
        assert_eq!(table.choosing_bin("easy", 3), "easy");
        // A level's nearest bin never falls to the prior rows.
        let medium: Vec<&str> = table
            .rows_for("medium")
            .iter()
            .map(|r| r.difficulty.as_str())
            .collect();
        assert_eq!(
            medium,
            ["easy"],
            "easy and hard are equally near: the easier"
        );
        assert!(table
            .rows_for(PRIOR_BIN)
            .iter()
            .all(|r| r.difficulty == PRIOR_BIN));
        // Without prior rows (tables written before them) the probe's bins stand as they are.
        table.rows.retain(|r| r.difficulty != PRIOR_BIN);
        assert!(!table.has_prior());
        assert_eq!(table.starting_bin("easy"), "medium");
        assert_eq!(table.choosing_bin("easy", 30), "easy");
        // A level-binned table starts where the router predicted.
        table.binned_by = BinnedBy::Level;
        assert_eq!(table.starting_bin("hard"), "hard");
    }

    #[test]
    fn chat_and_easy_knowledge_are_answered_directly() {
        let a = allocator();
        for (category, difficulty) in [("chat", "hard"), ("writing", "easy"), ("knowledge", "easy")]
        {
            let x = a.allocate(category, difficulty, 4096, 0.0);
            assert!(
                !x.think && x.strategy == "direct" && x.n == 1,
                "{category}/{difficulty}: {x:?}"
            );
            assert!(x.max_tokens <= 256);
        }
        assert!(a.allocate("knowledge", "hard", 4096, 0.0).think);
    }

    #[test]
    fn runs_the_most_accurate_row_that_fits_and_runs_it_as_measured() {
        // 0.52 @ 2048 beats 0.50 @ 512; nothing shows the cheaper one non-inferior.
        let a = allocator();
        let x = a.allocate("math", "easy", 4096, 0.0);
        assert_eq!(x.strategy, "self_consistency");
        assert_eq!(x.row.as_ref(), Some(&a.table.rows[1]));
        assert_eq!(x.params, serde_json::json!({"n": 8, "max_tokens": 1024}));
        assert_eq!((x.n, x.max_tokens, x.budget_tokens), (8, 1024, 2048));
        assert!(!x.degraded);
        // At 1024 only the 512 row fits.
        assert_eq!(a.allocate("math", "easy", 1024, 0.0).budget_tokens, 512);
    }

    #[test]
    fn a_cheaper_row_runs_only_when_the_paired_test_shows_it_non_inferior() {
        // 300 problems; the best solves the first 60. `near` misses 2 of them (−0.007, a
        // tight interval): non-inferior within 0.02. `far` misses 15 and solves 9 others
        // (−0.02 on average): its interval reaches below −0.02.
        let best = "1".repeat(60) + &"0".repeat(240);
        let near = "0".repeat(2) + &"1".repeat(58) + &"0".repeat(240);
        let far = "0".repeat(15) + &"1".repeat(45) + &"1".repeat(9) + &"0".repeat(231);
        let with = |outcomes: &str, acc: f64, spent: f64, n: usize| CalibrationRow {
            outcomes: Some(outcomes.to_string()),
            ..row("easy", "self_consistency", n, 2048, acc, spent)
        };
        let table = |rows| Allocator {
            table: CalibrationTable {
                rows,
                ..CalibrationTable::default()
            },
            config: AllocatorConfig::default(),
        };
        let a = table(vec![
            with(&best, 0.2, 1900.0, 8),
            with(&near, 0.193, 600.0, 2),
        ]);
        assert_eq!(
            a.allocate("math", "easy", 4096, 0.0).n,
            2,
            "near is non-inferior"
        );
        let a = table(vec![
            with(&best, 0.2, 1900.0, 8),
            with(&far, 0.18, 600.0, 2),
        ]);
        assert_eq!(a.allocate("math", "easy", 4096, 0.0).n, 8, "far is not");
        // Outcomes over other problems (another length) cannot be paired.
        let a = table(vec![with(&best, 0.2, 1900.0, 8), with("1", 1.0, 10.0, 1)]);
        assert_eq!(
            a.allocate("math", "easy", 4096, 0.0).n,
            1,
            "1.0 is the most accurate"
        );
        let a = table(vec![
            with(&best, 0.2, 1900.0, 8),
            with(&best[..200], 0.19, 10.0, 1),
        ]);
        assert_eq!(
            a.allocate("math", "easy", 4096, 0.0).n,
            8,
            "unpaired: the best runs"
        );
    }

    #[test]
    fn the_request_budget_is_a_hard_cap() {
        let a = allocator();
        for budget in [100, 300, 512, 700, 2048, 10_000] {
            for difficulty in DIFFICULTIES {
                let x = a.allocate("math", difficulty, budget, 0.0);
                assert!(x.budget_tokens <= budget, "{budget} {difficulty}: {x:?}");
                assert!(
                    x.row.as_ref().is_none_or(|r| r.budget <= budget),
                    "{budget} {difficulty}: {x:?}"
                );
            }
        }
        // Nothing in the table fits 300 tokens: a small fallback vote inside the budget.
        let x = a.allocate("math", "easy", 300, 0.0);
        assert!(x.row.is_none() && x.think && x.strategy == "self_consistency");
        assert!(x.n * x.max_tokens <= 300, "{x:?}");
    }

    #[test]
    fn missing_difficulty_uses_the_nearest_measured_one() {
        let x = allocator().allocate("code", "medium", 4096, 0.0);
        // medium has no rows; easy and hard are equally near, the easier wins.
        assert_eq!(x.row.as_ref().map(|r| r.difficulty.as_str()), Some("easy"));
        assert_eq!(x.budget_tokens, 2048);
        let hard = allocator().allocate("math", "hard", 4096, 0.0);
        assert_eq!(hard.strategy, "beam_search", "0.45 beats 0.40");
    }

    #[test]
    fn an_eligibility_filter_narrows_the_choice() {
        let a = allocator();
        let x = a.allocate_row("hard", 4096, 0.0, |r| r.strategy == "beam_search");
        assert_eq!(x.strategy, "beam_search");
        let none = a.allocate_row("hard", 4096, 0.0, |_| false);
        assert!(none.row.is_none(), "nothing eligible: the fallback");
    }

    #[test]
    fn load_shrinks_the_width_and_its_budget_then_answers_directly() {
        let a = allocator();
        let idle = a.allocate("math", "easy", 4096, 0.0);
        let some = a.allocate("math", "easy", 4096, 0.6);
        let busy = a.allocate("math", "easy", 4096, 0.9);
        let full = a.allocate("math", "easy", 4096, 1.0);
        assert!(!idle.degraded && some.degraded && busy.degraded);
        assert!(
            idle.n > some.n && some.n > busy.n && busy.n >= 1,
            "{} {} {}",
            idle.n,
            some.n,
            busy.n
        );
        // The same per-branch share: the budget scales with N.
        assert_eq!(
            some.budget_tokens,
            (2048.0 * some.n as f64 / 8.0).ceil() as u64
        );
        assert!(some.basis.contains("load 0.60"), "{}", some.basis);
        assert!(!full.think && full.degraded);
    }

    fn arb_row() -> impl Strategy<Value = CalibrationRow> {
        (
            0usize..3,
            1usize..9,
            prop::sample::select(vec![256u64, 512, 1024, 2048]),
            prop::option::of(prop::collection::vec(any::<bool>(), 40)),
            1u32..2000,
        )
            .prop_map(|(d, n, budget, outcomes, spent)| {
                let solved = outcomes
                    .as_ref()
                    .map_or(n, |o| o.iter().filter(|x| **x).count());
                let mut r = row(
                    DIFFICULTIES[d],
                    "self_consistency",
                    n,
                    budget,
                    solved as f64 / 40.0,
                    spent as f64,
                );
                r.outcomes =
                    outcomes.map(|o| o.iter().map(|x| if *x { '1' } else { '0' }).collect());
                r.strategy = format!("s{n}");
                r
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            rng_seed: proptest::test_runner::RngSeed::Fixed(0x5eed),
            ..ProptestConfig::default()
        })]

        /// The chosen row fits the budget and is eligible; it is the most accurate eligible
        /// row of its difficulty, or a cheaper one the paired test shows non-inferior to a
        /// most accurate one; and nothing cheaper was either.
        #[test]
        fn the_choice_is_the_best_or_a_cheaper_non_inferior_row(
            rows in prop::collection::vec(arb_row(), 0..12),
            d in 0usize..3,
            budget in prop::sample::select(vec![300u64, 512, 1024, 4096]),
            odd_only in any::<bool>(),
        ) {
            let a = Allocator {
                table: CalibrationTable { rows, ..CalibrationTable::default() },
                config: AllocatorConfig::default(),
            };
            let eligible = |r: &CalibrationRow| !odd_only || r.n % 2 == 1;
            let difficulty = DIFFICULTIES[d];
            let pool: Vec<&CalibrationRow> = a.table.rows_for(difficulty).into_iter()
                .filter(|r| r.budget <= budget && eligible(r)).collect();
            let stands_in = |r: &CalibrationRow, b: &CalibrationRow| match (&r.outcomes, &b.outcomes) {
                (Some(x), Some(y)) => {
                    crate::router::noninferiority::non_inferior(x, y, a.config.margin)
                }
                _ => false,
            };
            match a.choose_row(difficulty, budget, eligible) {
                None => prop_assert!(pool.is_empty()),
                Some(c) => {
                    prop_assert!(c.budget <= budget && eligible(c));
                    let best = pool.iter().map(|r| r.accuracy).fold(f64::NEG_INFINITY, f64::max);
                    if c.accuracy < best {
                        prop_assert!(pool.iter().any(|b| b.accuracy == best
                            && b.mean_spent > c.mean_spent && stands_in(c, b)));
                    }
                    for r in &pool {
                        if r.mean_spent < c.mean_spent {
                            prop_assert!(r.accuracy < best, "a cheaper best row: {r:?}");
                        }
                    }
                }
            }
            let x = a.allocate_row(difficulty, budget, 0.0, eligible);
            prop_assert!(x.budget_tokens <= budget);
        }
    }
}
