//! The grader acceptance test: our grader against hand labels on `fixtures/grader_pairs.jsonl`.
//!
//! Each line of the fixture is a pair — a gold answer and a model's output — with a hand label
//! (is the output's answer mathematically equivalent to the gold one?), labelled by the rules in
//! `verifiers/LABELLING.md`, and the verdict of HuggingFace's math-verify (`math_verify`, with a
//! `math_verify_note` where it differs from the label; recorded and checked in CI by
//! `scripts/crosscheck_math_verify.py`). The test requires ≥ 99% agreement with the labels
//! overall and ≥ 95% in every category, and that the pairs we get wrong are exactly those listed
//! in [`KNOWN_DISAGREEMENTS`], each with its reason: a new disagreement fails the test, and so
//! does a listed one that has been fixed (remove it from the list).

use ponder_verifiers::grade;
use std::collections::{BTreeMap, BTreeSet};

/// Pairs where our grader and the hand label differ, and why. None today: `unit-023` (`5 cm`
/// vs `5 m`) was the last, fixed by keeping the units normalisation removes and refusing two
/// answers whose units differ.
const KNOWN_DISAGREEMENTS: &[(&str, &str)] = &[];

/// Lowest agreement with the hand labels allowed overall, and in any one category.
const MIN_AGREEMENT: f64 = 0.99;
const MIN_CATEGORY_AGREEMENT: f64 = 0.95;

#[derive(Debug, serde::Deserialize)]
struct Pair {
    id: String,
    category: String,
    gold: String,
    pred: String,
    label: bool,
    #[serde(default)]
    math_verify: Option<bool>,
    #[serde(default)]
    math_verify_note: Option<String>,
}

fn pairs() -> Vec<Pair> {
    let text = include_str!("fixtures/grader_pairs.jsonl");
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| match serde_json::from_str(l) {
            Ok(p) => p,
            Err(e) => panic!("fixture line {}: {e}", i + 1),
        })
        .collect()
}

#[test]
fn grader_agrees_with_hand_labels() {
    let pairs = pairs();
    assert!(
        pairs.len() >= 300,
        "the acceptance set needs at least 300 pairs"
    );
    let mut wrong = BTreeMap::new();
    for p in &pairs {
        let g = grade(&p.gold, &p.pred);
        if g.equivalent != p.label {
            wrong.insert(p.id.as_str(), (p, g));
        }
    }
    let known: BTreeMap<&str, &str> = KNOWN_DISAGREEMENTS.iter().copied().collect();
    let new: Vec<String> = wrong
        .iter()
        .filter(|(id, _)| !known.contains_key(*id))
        .map(|(id, (p, g))| {
            format!(
                "{id}: label {} but graded {}\n  gold {:?}\n  pred {:?}\n  {g:?}",
                p.label, g.equivalent, p.gold, p.pred
            )
        })
        .collect();
    let fixed: Vec<&str> = known
        .keys()
        .filter(|id| !wrong.contains_key(*id))
        .copied()
        .collect();
    assert!(new.is_empty(), "new disagreements:\n{}", new.join("\n"));
    assert!(
        fixed.is_empty(),
        "listed disagreements that now agree (remove them): {fixed:?}"
    );
    let agreement = 1.0 - wrong.len() as f64 / pairs.len() as f64;
    println!(
        "grader vs hand labels: {}/{} agree ({:.2}%)",
        pairs.len() - wrong.len(),
        pairs.len(),
        agreement * 100.0
    );
    assert!(
        agreement >= MIN_AGREEMENT,
        "agreement {agreement:.4} is below {MIN_AGREEMENT}"
    );
    let mut by_category: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for p in &pairs {
        let e = by_category.entry(p.category.as_str()).or_default();
        e.0 += 1;
        e.1 += usize::from(!wrong.contains_key(p.id.as_str()));
    }
    let low: Vec<String> = by_category
        .iter()
        .filter(|(_, (n, ok))| (*ok as f64) < MIN_CATEGORY_AGREEMENT * *n as f64)
        .map(|(c, (n, ok))| format!("{c}: {ok}/{n}"))
        .collect();
    assert!(
        low.is_empty(),
        "categories below {MIN_CATEGORY_AGREEMENT}: {low:?}"
    );
}

#[test]
fn fixture_covers_every_form() {
    let pairs = pairs();
    let mut by_category: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for p in &pairs {
        let e = by_category.entry(p.category.as_str()).or_default();
        if p.label {
            e.0 += 1;
        } else {
            e.1 += 1;
        }
    }
    for category in [
        "fraction",
        "decimal",
        "integer",
        "root",
        "constant",
        "expression",
        "implicit_mult",
        "plus_minus",
        "interval",
        "set",
        "tuple",
        "matrix",
        "unit",
        "percent",
        "degree",
        "text",
        "prefix",
        "boxed",
        "phrase",
        "thinking",
        "gsm8k",
        "lookalike",
        "no_answer",
        "inequality",
        "solution",
        "base",
        "named_tuple",
        "vector",
        "matrix_scalar",
        "number_word",
        "inequality_interval",
        "choice",
        "aime",
    ] {
        let (yes, no) = by_category.get(category).copied().unwrap_or_default();
        assert!(
            yes + no >= 7,
            "category {category} has only {} pairs",
            yes + no
        );
        if !matches!(category, "lookalike" | "no_answer") {
            assert!(yes >= 3, "category {category} needs equivalent pairs");
        }
        assert!(no >= 1, "category {category} needs a negative pair");
    }
    let ids: BTreeSet<&str> = pairs.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids.len(), pairs.len(), "ids must be unique");
}

/// math-verify's verdicts are recorded in the fixture; report how they compare, per category
/// (run with `--nocapture`). Every pair must have a recorded verdict, and every pair where
/// math-verify differs from the label a `math_verify_note` saying why (CI checks the verdicts
/// against the pinned release itself: `scripts/crosscheck_math_verify.py --check`).
#[test]
fn math_verify_verdicts_are_recorded() {
    let pairs = pairs();
    let mut mv_vs_label = 0;
    let mut mv_vs_ours = 0;
    let mut by_category: BTreeMap<&str, [usize; 3]> = BTreeMap::new();
    for p in &pairs {
        let Some(mv) = p.math_verify else {
            panic!(
                "{}: no math_verify verdict; run scripts/crosscheck_math_verify.py --write",
                p.id
            );
        };
        assert_eq!(
            mv != p.label,
            p.math_verify_note.is_some(),
            "{}: a math_verify_note goes with exactly the pairs math-verify gets wrong",
            p.id
        );
        let ours = grade(&p.gold, &p.pred).equivalent;
        mv_vs_label += usize::from(mv == p.label);
        mv_vs_ours += usize::from(mv == ours);
        let e = by_category.entry(p.category.as_str()).or_default();
        e[0] += 1;
        e[1] += usize::from(ours == p.label);
        e[2] += usize::from(mv == p.label);
    }
    println!(
        "math-verify vs hand labels: {mv_vs_label}/{n}; math-verify vs ours: {mv_vs_ours}/{n}",
        n = pairs.len()
    );
    println!("category              pairs   ours  math-verify");
    for (c, [n, ours, mv]) in &by_category {
        let pct = |k: &usize| 100.0 * *k as f64 / *n as f64;
        println!("{c:22}{n:5} {:6.1}% {:6.1}%", pct(ours), pct(mv));
    }
}
