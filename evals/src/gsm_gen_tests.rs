//! Tests of the generator: each answer recomputed from the problem's text alone, with exact
//! rational arithmetic and formulas written here independently of the templates; the committed
//! file equal to the generator's output; determinism and the split's proportions.

use super::*;
use std::collections::{BTreeMap, HashSet};

/// The integers written in `text`, in order (`$20` → 20, `3/4` → 3 and 4, `25%` → 25).
fn numbers(text: &str) -> Vec<i128> {
    let mut out = Vec::new();
    let mut cur: Option<i128> = None;
    for c in text.chars() {
        match (c.to_digit(10), cur) {
            (Some(d), Some(n)) => cur = Some(n * 10 + i128::from(d)),
            (Some(d), None) => cur = Some(i128::from(d)),
            (None, Some(n)) => {
                out.push(n);
                cur = None;
            }
            (None, None) => {}
        }
    }
    out.extend(cur);
    out
}

/// An exact rational `num / den` with `den > 0`, reduced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Q(i128, i128);

impl Q {
    fn int(n: i128) -> Self {
        Q(n, 1)
    }
    fn new(num: i128, den: i128) -> Self {
        assert_ne!(den, 0);
        let g = gcd128(num.abs(), den.abs()).max(1);
        let s = if den < 0 { -1 } else { 1 };
        Q(s * num / g, s * den / g)
    }
    fn add(self, o: Q) -> Q {
        Q::new(self.0 * o.1 + o.0 * self.1, self.1 * o.1)
    }
    fn sub(self, o: Q) -> Q {
        self.add(Q(-o.0, o.1))
    }
    fn mul(self, o: Q) -> Q {
        Q::new(self.0 * o.0, self.1 * o.1)
    }
    fn div(self, o: Q) -> Q {
        Q::new(self.0 * o.1, self.1 * o.0)
    }
}

fn gcd128(a: i128, b: i128) -> i128 {
    if b == 0 {
        a
    } else {
        gcd128(b, a % b)
    }
}

/// The answer of `template` from the numbers of its text, computed independently.
fn expected(template: &str, n: &[i128]) -> Q {
    let q = |i: usize| Q::int(n[i]);
    let pct = |i: usize| Q::new(n[i], 100);
    let one = Q::int(1);
    match template {
        "distance" => q(0).mul(q(1)),
        "machine" => q(0).div(q(1)).mul(q(2)),
        "reading_days" => q(1).div(q(0)),
        "wages" => q(0).mul(q(1)).mul(q(2)),
        "give_away" | "class_split" => q(0).mul(one.sub(q(1).div(q(2)))),
        "fraction_of" => q(0).mul(q(1).div(q(2))),
        "pizza" => q(0).mul(q(1)).mul(q(2).div(q(3))),
        "discount" | "not_red" => q(0).mul(one.sub(pct(1))),
        "raise" => q(0).mul(one.add(pct(1))),
        "score_percent" => q(0).div(q(1)).mul(Q::int(100)),
        "shopping" => q(0).mul(q(1)).add(q(2).mul(q(3))),
        "change" => q(0).sub(q(1).mul(q(2))),
        "boxes" => q(0).mul(q(1)).sub(q(2)),
        "legs" => Q::int(4).mul(q(0)).add(Q::int(2).mul(q(1))),
        "movie_minutes" => Q::int(60).mul(q(0)).add(q(1)),
        "ribbon_cm" => Q::int(100).mul(q(0)).sub(q(1)),
        "glasses" => Q::int(1000).mul(q(0)).div(q(1)),
        "coins" => Q::int(25).mul(q(0)).add(Q::int(10).mul(q(1))),
        other => panic!("no independent formula for template {other}"),
    }
}

/// How many numbers each template writes.
fn arity(template: &str) -> usize {
    match template {
        "distance" | "reading_days" | "discount" | "not_red" | "raise" | "score_percent"
        | "legs" | "movie_minutes" | "ribbon_cm" | "glasses" | "coins" => 2,
        "pizza" | "shopping" => 4,
        _ => 3,
    }
}

#[test]
fn every_answer_is_recomputed_exactly_from_the_text() {
    let problems = generate(0, 1200);
    for p in &problems {
        let n = numbers(&p.problem);
        assert_eq!(n.len(), arity(&p.template), "{}: {}", p.id, p.problem);
        let want = expected(&p.template, &n);
        assert_eq!(want.1, 1, "{}: the answer is not a whole number", p.id);
        assert!(want.0 > 0, "{}: answer {} is not positive", p.id, want.0);
        assert_eq!(p.answer, want.0.to_string(), "{}: {}", p.id, p.problem);
    }
}

#[test]
fn skills_and_templates_are_balanced_and_problems_distinct() {
    let problems = generate(0, 1200);
    let mut per_skill: BTreeMap<&str, HashSet<&str>> = BTreeMap::new();
    for (skill, name) in template_names() {
        per_skill.entry(skill).or_default().insert(name);
    }
    assert!(per_skill.len() >= 5);
    assert!(per_skill.values().all(|t| t.len() >= 3));
    let per_template = problems.iter().fold(BTreeMap::new(), |mut m, p| {
        *m.entry(p.template.as_str()).or_insert(0usize) += 1;
        m
    });
    assert_eq!(per_template.len(), TEMPLATE_COUNT);
    assert!(per_template.values().all(|&c| c == 1200 / TEMPLATE_COUNT));
    let distinct: HashSet<&str> = problems.iter().map(|p| p.problem.as_str()).collect();
    assert!(
        distinct.len() * 100 >= problems.len() * 98,
        "{} distinct texts of {}",
        distinct.len(),
        problems.len()
    );
    let ids: HashSet<&str> = problems.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids.len(), problems.len());
}

#[test]
fn seeds_decide_everything() {
    assert_eq!(generate(3, 100), generate(3, 100));
    assert_ne!(generate(3, 100), generate(4, 100));
    // A prefix of a longer run is the shorter run.
    assert_eq!(generate(3, 100)[..], generate(3, 200)[..100]);
}

#[test]
fn the_committed_file_is_the_generators_output() -> crate::Result<()> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/data/gsm_gen.jsonl");
    let committed = std::fs::read_to_string(path)?;
    assert!(
        committed == to_jsonl(&generate(0, 1200))?,
        "evals/data/gsm_gen.jsonl differs from the generator: rerun \
         `ponder-eval gen-problems --seed 0 --count 1200 --out evals/data/gsm_gen.jsonl`"
    );
    Ok(())
}

#[test]
fn the_committed_file_loads_and_splits_about_seventy_thirty() -> crate::Result<()> {
    let path = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/data/gsm_gen.jsonl"));
    let d = crate::load(path, &crate::DatasetOptions::default())?;
    assert_eq!(d.problems.len(), 1200);
    assert!(d.skipped.is_empty());
    let held = d
        .problems
        .iter()
        .filter(|p| crate::split::split_of(&p.id) == crate::split::Split::HeldOut)
        .count();
    assert!((300..=420).contains(&held), "{held} held out of 1200");
    Ok(())
}

#[test]
fn every_worked_solution_checks_and_ends_at_its_answer() {
    use ponder_verifiers::calc_check::{check_text, stated_number};
    let mut levels = std::collections::BTreeMap::new();
    for p in generate(0, 40) {
        levels.entry(p.template.clone()).or_insert(p.level);
        assert_eq!(
            levels.get(&p.template),
            Some(&p.level),
            "one level per template"
        );
    }
    let counts = levels.values().fold([0; 4], |mut c, &l| {
        if let Some(x) = c.get_mut(l as usize) {
            *x += 1;
        }
        c
    });
    assert_eq!(
        counts,
        [0, 4, 13, 3],
        "templates at one, two and three steps"
    );
    for p in generate(0, 400) {
        let report = check_text(&p.solution);
        assert!(!report.equalities.is_empty(), "{}: no computation", p.id);
        assert_eq!(
            report.equalities.len(),
            p.level as usize,
            "{}: the level is the number of computations",
            p.id
        );
        assert_eq!(
            report.false_count(),
            0,
            "{}: a false equality in {:?}",
            p.id,
            p.solution
        );
        assert!(report.last_value.is_some(), "{}", p.id);
        assert_eq!(
            report.last_value,
            stated_number(&p.answer),
            "{}: the last quantity computed is not the answer in {:?}",
            p.id,
            p.solution
        );
        assert_eq!(
            ponder_verifiers::extract_answer(&p.solution).as_deref(),
            Some(p.answer.as_str()),
            "{}",
            p.id
        );
    }
}
