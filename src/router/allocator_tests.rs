//! Unit tests of the allocator (`allocator.rs`): row choice, non-inferiority, budget caps,
//! prior rows of probe-binned tables, load.

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
    let sized = |difficulty: &str, strategy: &str, accuracy: f64, problems: usize| CalibrationRow {
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
    for (category, difficulty) in [("chat", "hard"), ("writing", "easy"), ("knowledge", "easy")] {
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
            r.outcomes = outcomes.map(|o| o.iter().map(|x| if *x { '1' } else { '0' }).collect());
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

#[test]
fn a_table_lists_its_problems_of_other_roles_and_its_rows_unlike_their_bin() {
    use crate::roles::Role;
    let fit = (0..200)
        .map(|i| format!("gsm8k-train-{i:04}"))
        .find(|id| crate::roles::role_of(id) == Some(Role::Fit))
        .expect("a fit problem among the first 200");
    let mut table = CalibrationTable {
        rows: vec![CalibrationRow {
            problems: 2,
            outcomes: Some("10".into()),
            ..row("easy", "best_of_n", 4, 1024, 0.5, 300.0)
        }],
        problems: [("easy".to_string(), vec![fit.clone(), fit.clone()])].into(),
        ..CalibrationTable::default()
    };
    assert_eq!(table.faults(), vec![]);

    table.problems.insert(
        "hard".into(),
        vec!["test/algebra/1265.json".into(), "mine-1".into()],
    );
    assert_eq!(
        table.faults(),
        vec![
            TableFault::NotFit {
                bin: "hard".into(),
                id: "test/algebra/1265.json".into(),
                role: Role::Report
            },
            TableFault::NotPublic {
                bin: "hard".into(),
                id: "mine-1".into()
            }
        ]
    );
    table.problems.remove("hard");

    let unlike = |problems, outcomes: Option<usize>, bin| {
        vec![TableFault::RowUnlikeItsBin {
            row: "easy best_of_n @ 1024".into(),
            problems,
            outcomes,
            bin,
        }]
    };
    table.rows[0].problems = 3;
    assert_eq!(
        table.faults(),
        unlike(3, Some(2), 2),
        "more problems than the bin"
    );
    assert_eq!(
        table.faults()[0].to_string(),
        "row easy best_of_n @ 1024: 3 problems and 2 outcomes, and its bin lists 2"
    );
    table.rows[0].problems = 2;
    table.rows[0].outcomes = Some("1".into());
    assert_eq!(
        table.faults(),
        unlike(2, Some(1), 2),
        "outcomes over another count"
    );
    table.problems.clear();
    table.rows[0].outcomes = None;
    assert_eq!(
        table.faults(),
        vec![],
        "a table from before problem lists were recorded: nothing to check a count against"
    );
    table.rows[0].outcomes = Some("1".into());
    assert_eq!(
        table.faults(),
        unlike(2, Some(1), 0),
        "outcomes need a list"
    );
}
