//! The compute allocator: from (category, difficulty, the request's budget, the current load)
//! choose whether to think at all, which strategy, how wide (N), how long each branch may run
//! and how much of the budget to spend — using a calibration table of accuracy vs spend per
//! difficulty and strategy that `ponder bench strategies` measures (see [`CalibrationTable`]).
//!
//! Rules, in order (compute-optimal scaling: spend where the table says it pays):
//! 1. Direct answer (no chain of thought, one greedy reply) for chat and writing, and for easy
//!    queries of categories that do not need derivations (knowledge) — the semantic-router
//!    result: reasoning only when it pays.
//! 2. Otherwise, among the table's rows for the predicted difficulty (the nearest measured
//!    difficulty when it has none) whose budget fits the request's, take the best accuracy and
//!    then the *cheapest* row within `tolerance` of it: more spend that does not buy accuracy
//!    is not spent.
//! 3. The request's budget is a hard cap: the allocation's budget never exceeds it, and N ×
//!    per-branch cap fits inside it.
//! 4. Under load (`load` in [0, 1]: busy share of the server) N shrinks — down to one branch —
//!    rather than requests queueing; at full load every query is answered directly.

use serde::{Deserialize, Serialize};

/// One measured cell: a strategy's accuracy and mean spend at a budget, on problems of one
/// difficulty.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CalibrationRow {
    /// Difficulty of the problems it was measured on.
    pub difficulty: String,
    /// Strategy name.
    pub strategy: String,
    /// Its width (N, k or max traces) with the parameters it ran with.
    pub n: usize,
    /// Its per-branch token cap with those parameters.
    pub max_tokens: usize,
    /// The budget it ran under.
    pub budget: u64,
    /// Share answered correctly.
    pub accuracy: f64,
    /// Mean tokens charged per problem.
    pub mean_spent: f64,
    /// Problems measured.
    pub problems: usize,
    /// Where the row comes from (the command that measured it, or `prior`).
    pub source: String,
}

/// Accuracy vs spend per difficulty and strategy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CalibrationTable {
    /// The cells.
    pub rows: Vec<CalibrationRow>,
}

/// Difficulty levels in order (for "nearest measured difficulty").
pub const DIFFICULTIES: [&str; 3] = ["easy", "medium", "hard"];

fn level(difficulty: &str) -> usize {
    DIFFICULTIES
        .iter()
        .position(|d| *d == difficulty)
        .unwrap_or(1)
}

impl CalibrationTable {
    /// Rows for `difficulty`, or for the nearest difficulty that has rows.
    pub fn rows_for(&self, difficulty: &str) -> Vec<&CalibrationRow> {
        let want = level(difficulty);
        let nearest = self
            .rows
            .iter()
            .map(|r| level(&r.difficulty))
            .min_by_key(|l| (want.abs_diff(*l), *l));
        match nearest {
            Some(l) => self
                .rows
                .iter()
                .filter(|r| level(&r.difficulty) == l)
                .collect(),
            None => Vec::new(),
        }
    }
}

/// The allocator's knobs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AllocatorConfig {
    /// Rows within this accuracy of the best count as "as good" (the cheapest of them wins).
    pub tolerance: f64,
    /// Categories always answered directly.
    pub direct_categories: Vec<String>,
    /// Categories answered directly when easy.
    pub direct_when_easy: Vec<String>,
    /// Token cap of a direct answer.
    pub direct_tokens: usize,
    /// How far `auto` may widen past the table's N while the vote is undecided (× N).
    pub widen: f64,
    /// Strategies that are "N samples and a vote": `auto` runs them as an adaptive vote that
    /// stops early on a clear margin and widens on disagreement.
    pub voting: Vec<String>,
    /// When the table has nothing that fits the budget: per-branch cap of the fallback vote.
    pub fallback_tokens: usize,
}

impl Default for AllocatorConfig {
    fn default() -> Self {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect();
        Self {
            tolerance: 0.05,
            direct_categories: s(&["chat", "writing"]),
            direct_when_easy: s(&["knowledge"]),
            direct_tokens: 256,
            widen: 2.0,
            voting: s(&[
                "self_consistency",
                "best_of_n",
                "weighted_best_of_n",
                "deepconf",
                "short_m_of_k",
                "adaptive_parallel",
            ]),
            fallback_tokens: 256,
        }
    }
}

/// What the allocator chose.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Allocation {
    /// Whether to reason at all (false: one direct greedy answer).
    pub think: bool,
    /// What to run: `direct`, the table's strategy, or `adaptive_parallel` for a voting one.
    pub strategy: String,
    /// The strategy the table row named (before mapping to the adaptive vote).
    pub table_strategy: Option<String>,
    /// Branches to start with.
    pub n: usize,
    /// Most branches the search may widen to while the vote is undecided.
    pub max_n: usize,
    /// Per-branch token cap.
    pub max_tokens: usize,
    /// Tokens this search may spend (≤ the request's budget).
    pub budget_tokens: u64,
    /// Whether load made it smaller than the table asked for.
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

impl Allocator {
    /// Chooses the compute for a query of `category` and `difficulty` under `budget` tokens at
    /// `load` (clamped to [0, 1]).
    pub fn allocate(&self, category: &str, difficulty: &str, budget: u64, load: f64) -> Allocation {
        let c = &self.config;
        let load = if load.is_finite() {
            load.clamp(0.0, 1.0)
        } else {
            0.0
        };
        let direct = |basis: String, degraded: bool| Allocation {
            think: false,
            strategy: "direct".into(),
            table_strategy: None,
            n: 1,
            max_n: 1,
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
        let rows: Vec<&CalibrationRow> = self
            .table
            .rows_for(difficulty)
            .into_iter()
            .filter(|r| r.budget <= budget && r.n > 0)
            .collect();
        let best = rows
            .iter()
            .map(|r| r.accuracy)
            .fold(f64::NEG_INFINITY, f64::max);
        let chosen = rows
            .iter()
            .filter(|r| r.accuracy >= best - c.tolerance)
            .min_by(|a, b| {
                a.mean_spent
                    .total_cmp(&b.mean_spent)
                    .then(b.accuracy.total_cmp(&a.accuracy))
            });
        let (table_strategy, n, per_branch, cap, basis) = match chosen {
            Some(r) => (
                Some(r.strategy.clone()),
                r.n,
                r.max_tokens.min((r.budget as usize / r.n).max(1)),
                r.budget,
                format!(
                    "{} @ {}: {:.2} accuracy for {:.0} tokens (best {:.2}, {} rows)",
                    r.strategy,
                    r.budget,
                    r.accuracy,
                    r.mean_spent,
                    best,
                    rows.len()
                ),
            ),
            None => {
                let per_branch = c.fallback_tokens.min(budget as usize).max(1);
                let n = (budget as usize / per_branch).clamp(1, 4);
                (
                    None,
                    n,
                    per_branch,
                    budget,
                    "no calibration row fits the budget: small vote".to_string(),
                )
            }
        };
        // Load: keep the whole table's N up to a quarter busy, then shrink linearly to one.
        let shrink = 1.0 - ((load - 0.25) / 0.7).clamp(0.0, 1.0);
        let n_loaded = ((n as f64 * shrink).floor() as usize).max(1);
        let degraded = n_loaded < n;
        let voting = table_strategy.as_ref().is_none_or(|s| c.voting.contains(s));
        let max_n = if degraded || !voting {
            n_loaded
        } else {
            // Widen only as far as whole branches still fit in the request's budget.
            let affordable = (budget as usize / per_branch.max(1)).max(1);
            ((n as f64 * c.widen).round() as usize)
                .min(affordable)
                .max(n_loaded)
        };
        // The row's budget bought N branches; widening scales it. Never past the request's.
        let budget_tokens = (cap as f64 * max_n as f64 / n.max(1) as f64)
            .ceil()
            .max(cap as f64) as u64;
        Allocation {
            think: true,
            strategy: if voting {
                "adaptive_parallel".into()
            } else {
                table_strategy.clone().unwrap_or_default()
            },
            table_strategy,
            n: n_loaded,
            max_n,
            max_tokens: per_branch,
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
            n,
            max_tokens: 1024,
            budget,
            accuracy,
            mean_spent,
            problems: 12,
            source: "test".into(),
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
            },
            config: AllocatorConfig::default(),
        }
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
    fn picks_the_cheapest_row_as_good_as_the_best() {
        // 0.50 @ 512 is within 0.05 of 0.52 @ 2048 and costs a quarter: more would not help.
        let x = allocator().allocate("math", "easy", 4096, 0.0);
        assert_eq!(x.table_strategy.as_deref(), Some("self_consistency"));
        assert_eq!(x.strategy, "adaptive_parallel");
        assert_eq!((x.n, x.max_tokens), (8, 64));
        assert_eq!(x.max_n, 16);
        assert_eq!(x.budget_tokens, 1024);
    }

    #[test]
    fn the_request_budget_is_a_hard_cap() {
        let a = allocator();
        for budget in [100, 300, 512, 700, 2048, 10_000] {
            for difficulty in DIFFICULTIES {
                let x = a.allocate("math", difficulty, budget, 0.0);
                assert!(x.budget_tokens <= budget, "{budget} {difficulty}: {x:?}");
                assert!(
                    x.max_n * x.max_tokens <= budget as usize || x.max_n == 1,
                    "{budget} {difficulty}: {x:?}"
                );
            }
        }
        // Nothing in the table fits 300 tokens: a small fallback vote inside the budget.
        let x = a.allocate("math", "easy", 300, 0.0);
        assert!(x.table_strategy.is_none() && x.think);
    }

    #[test]
    fn missing_difficulty_uses_the_nearest_measured_one() {
        let x = allocator().allocate("code", "medium", 4096, 0.0);
        // medium has no rows; easy and hard are equally near, the easier wins.
        assert_eq!(x.table_strategy.as_deref(), Some("self_consistency"));
        assert!(x.basis.contains("@ 512"), "{}", x.basis);
        let hard = allocator().allocate("math", "hard", 4096, 0.0);
        assert_eq!(
            hard.table_strategy.as_deref(),
            Some("self_consistency"),
            "0.40 is within 0.05 of 0.45 and cheaper"
        );
    }

    #[test]
    fn load_shrinks_the_width_then_answers_directly() {
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
        assert_eq!(some.max_n, some.n, "no widening under load");
        assert!(!full.think && full.degraded);
    }
}
