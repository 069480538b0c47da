//! A seeded generator of grade-school word problems with exact answers: Ponder's dev set.
//!
//! Five skills (rates, fractions, percentages, multi-step totals, unit conversion), four
//! templates each; problem `i` uses template `i mod 20` and draws its numbers from a ChaCha8
//! stream seeded with the seed, so `generate(seed, count)` is a pure function and the committed
//! file `evals/data/gsm_gen.jsonl` is reproducible by one command
//! (`ponder-eval gen-problems --seed 0 --count 1200 --out evals/data/gsm_gen.jsonl`).
//!
//! Invariants: every answer is an exact integer computed from the template's numbers (the
//! numbers are drawn so that divisions come out even); every number in a problem's text is one
//! of its parameters, in the order the template's formula names them, so a test can recompute
//! each answer from the text alone. Ids are `gen-<seed>-<index>-<template>`, stable across
//! versions of this file as long as the templates' order is kept; the train / held-out split
//! is decided by the id alone ([`crate::split`]).
//!
//! The templates follow the shapes of GSM8K (Cobbe et al. 2021) at one to three steps each, so
//! that a 135M model solves some and fails others — enough spread to tell verifiers apart.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// One generated problem, as written to the JSONL file (the dataset loader's `auto` preset
/// reads `id`, `problem`, `answer`, `subject` and `solution`; `template` is extra).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GeneratedProblem {
    /// `gen-<seed>-<index>-<template>`.
    pub id: String,
    /// The question.
    pub problem: String,
    /// The exact answer, an integer.
    pub answer: String,
    /// The skill (`rates`, `fractions`, `percentages`, `multi_step`, `units`).
    pub subject: String,
    /// Difficulty level: the number of computations the worked solution makes (1–3; the
    /// harness's `--level`; `ponder-eval calibrate --easy-max-level 1 --hard-min-level 3`
    /// bins them easy / medium / hard). SmolLM2-135M's per-sample accuracy falls with it.
    pub level: u32,
    /// The template's name.
    pub template: String,
    /// A worked solution: steps separated by a blank line, every computation written as an
    /// equality that holds, ending with `The answer is \boxed{answer}.` — what a few-shot
    /// prompt shows the model (`ponder-eval run --shots`).
    pub solution: String,
}

/// A template: its skill, its name, and a function that draws numbers and writes the problem,
/// its answer and a worked solution (steps separated by a blank line, each computation written
/// out as an equality, without the final answer line that [`generate`] appends).
struct Template {
    skill: &'static str,
    name: &'static str,
    make: fn(&mut Draw<'_>) -> (String, i64, String),
}

/// Draws numbers and names for one problem.
struct Draw<'a> {
    rng: &'a mut ChaCha8Rng,
}

const NAMES: [(&str, &str); 12] = [
    ("Maya", "she"),
    ("Liam", "he"),
    ("Ava", "she"),
    ("Noah", "he"),
    ("Zoe", "she"),
    ("Omar", "he"),
    ("Lena", "she"),
    ("Ravi", "he"),
    ("Sofia", "she"),
    ("Ben", "he"),
    ("Aisha", "she"),
    ("Kenji", "he"),
];

impl Draw<'_> {
    /// A uniform integer in `lo..=hi`.
    fn int(&mut self, lo: i64, hi: i64) -> i64 {
        self.rng.random_range(lo..=hi)
    }

    /// One of `xs`.
    fn pick(&mut self, xs: &[i64]) -> i64 {
        let i = self.rng.random_range(0..xs.len());
        xs.get(i).copied().unwrap_or(1)
    }

    /// A name and its pronoun.
    fn person(&mut self) -> (&'static str, &'static str) {
        let i = self.rng.random_range(0..NAMES.len());
        NAMES.get(i).copied().unwrap_or(("Maya", "she"))
    }
}

/// A proper fraction `a/b` in lowest terms with a small denominator.
fn fraction(d: &mut Draw<'_>) -> (i64, i64) {
    let b = d.pick(&[2, 3, 4, 5, 6, 8, 10]);
    loop {
        let a = d.int(1, b - 1);
        if gcd(a, b) == 1 {
            return (a, b);
        }
    }
}

fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 {
        a.abs()
    } else {
        gcd(b, a % b)
    }
}

/// Capitalises a pronoun at the start of a sentence.
fn cap(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

const TEMPLATES: [Template; 20] = [
    // --- rates ---
    Template {
        skill: "rates",
        name: "distance",
        make: |d| {
            let (v, h) = (d.int(3, 12) * 5, d.int(2, 9));
            (format!("A train travels at {v} miles per hour for {h} hours. How many miles does it travel?"), v * h, format!("The train goes {v} miles every hour for {h} hours.\n\n{v} × {h} = {}", v * h))
        },
    },
    Template {
        skill: "rates",
        name: "machine",
        make: |d| {
            let (a, m, k) = (d.int(2, 15), d.int(2, 10), d.int(2, 8));
            let t = m * k;
            (format!("A machine makes {a} toys every {m} minutes. At the same rate, how many toys does it make in {t} minutes?"), a * k, format!("{t} minutes is {t} / {m} = {k} groups of {m} minutes.\n\nThe machine makes {a} toys in each group, so {a} × {k} = {}", a * k))
        },
    },
    Template {
        skill: "rates",
        name: "reading_days",
        make: |d| {
            let (name, _) = d.person();
            let (p, days) = (d.int(4, 30), d.int(3, 15));
            let total = p * days;
            (format!("{name} reads {p} pages every day. How many days does it take {name} to read a book of {total} pages?"), days, format!("The book has {total} pages and {p} pages are read each day.\n\n{total} / {p} = {days}"))
        },
    },
    Template {
        skill: "rates",
        name: "wages",
        make: |d| {
            let (name, pro) = d.person();
            let (w, h, days) = (d.int(8, 25), d.int(2, 8), d.int(2, 6));
            (format!("{name} earns ${w} per hour. {} works {h} hours a day for {days} days. How many dollars does {pro} earn in total?", cap(pro)), w * h * days, format!("Each day: {w} × {h} = {} dollars.\n\nFor {days} days: {} × {days} = {}", w * h, w * h, w * h * days))
        },
    },
    // --- fractions ---
    Template {
        skill: "fractions",
        name: "give_away",
        make: |d| {
            let (name, pro) = d.person();
            let (a, b) = fraction(d);
            let n = b * d.int(2, 12);
            (format!("{name} has {n} marbles. {} gives {a}/{b} of them to a friend. How many marbles does {name} have left?", cap(pro)), n - n / b * a, format!("{a}/{b} of {n} is {n} / {b} × {a} = {} marbles given away.\n\n{n} - {} = {}", n / b * a, n / b * a, n - n / b * a))
        },
    },
    Template {
        skill: "fractions",
        name: "class_split",
        make: |d| {
            let (a, b) = fraction(d);
            let n = b * d.int(3, 9);
            (format!("A class has {n} students, and {a}/{b} of them are girls. How many boys are in the class?"), n - n / b * a, format!("{a}/{b} of {n} is {n} / {b} × {a} = {} girls.\n\n{n} - {} = {}", n / b * a, n / b * a, n - n / b * a))
        },
    },
    Template {
        skill: "fractions",
        name: "fraction_of",
        make: |d| {
            let (name, _) = d.person();
            let (a, b) = fraction(d);
            let n = b * d.int(2, 20);
            (format!("A tank holds {n} liters of water. {name} uses {a}/{b} of the water to fill buckets. How many liters did {name} use?"), n / b * a, format!("{a}/{b} of {n} liters is {n} / {b} × {a} = {}", n / b * a))
        },
    },
    Template {
        skill: "fractions",
        name: "pizza",
        make: |d| {
            let (a, b) = fraction(d);
            let pizzas = d.int(2, 6);
            let slices = b * d.int(1, 3);
            let eaten = pizzas * slices / b * a;
            (format!("There are {pizzas} pizzas, each cut into {slices} slices. The guests eat {a}/{b} of all the slices. How many slices do they eat?"), eaten, format!("There are {pizzas} × {slices} = {} slices.\n\n{a}/{b} of them is {} / {b} × {a} = {eaten}", pizzas * slices, pizzas * slices))
        },
    },
    // --- percentages ---
    Template {
        skill: "percentages",
        name: "discount",
        make: |d| {
            let p = 20 * d.int(1, 15);
            let r = 5 * d.int(1, 15);
            (format!("A jacket costs ${p}. It is on sale for {r}% off. What is the sale price in dollars?"), p - p * r / 100, format!("{r}% of ${p} is {p} × {r} / 100 = {} dollars off.\n\n{p} - {} = {}", p * r / 100, p * r / 100, p - p * r / 100))
        },
    },
    Template {
        skill: "percentages",
        name: "not_red",
        make: |d| {
            let n = 20 * d.int(1, 10);
            let r = 5 * d.int(1, 19);
            (format!("There are {n} apples in a basket, and {r}% of them are red. How many apples are not red?"), n - n * r / 100, format!("{r}% of {n} is {n} × {r} / 100 = {} red apples.\n\n{n} - {} = {}", n * r / 100, n * r / 100, n - n * r / 100))
        },
    },
    Template {
        skill: "percentages",
        name: "raise",
        make: |d| {
            let (name, pro) = d.person();
            let s = 20 * d.int(2, 20);
            let r = 5 * d.int(1, 10);
            (format!("Last month {name} saved ${s}. This month {pro} saved {r}% more than last month. How many dollars did {pro} save this month?"), s + s * r / 100, format!("{r}% of ${s} is {s} × {r} / 100 = {} dollars more.\n\n{s} + {} = {}", s * r / 100, s * r / 100, s + s * r / 100))
        },
    },
    Template {
        skill: "percentages",
        name: "score_percent",
        make: |d| {
            let (name, pro) = d.person();
            let t = d.pick(&[10, 20, 25, 50]);
            let c = d.int(1, t);
            (format!("{name} answered {c} out of {t} questions correctly. What percent of the questions did {pro} answer correctly?"), c * 100 / t, format!("{c} out of {t} is {c} / {t} × 100 = {} percent.", c * 100 / t))
        },
    },
    // --- multi-step totals ---
    Template {
        skill: "multi_step",
        name: "shopping",
        make: |d| {
            let (name, pro) = d.person();
            let (a, p, b, q) = (d.int(2, 9), d.int(2, 12), d.int(2, 9), d.int(1, 6));
            (format!("{name} buys {a} notebooks at ${p} each and {b} pens at ${q} each. How many dollars does {pro} spend in total?"), a * p + b * q, format!("Notebooks: {a} × {p} = {} dollars.\n\nPens: {b} × {q} = {} dollars.\n\n{} + {} = {}", a * p, b * q, a * p, b * q, a * p + b * q))
        },
    },
    Template {
        skill: "multi_step",
        name: "change",
        make: |d| {
            let (name, pro) = d.person();
            let (a, p) = (d.int(2, 8), d.int(3, 15));
            let m = a * p + d.int(1, 50);
            (format!("{name} has ${m}. {} buys {a} books that cost ${p} each. How many dollars does {pro} have left?", cap(pro)), m - a * p, format!("The books cost {a} × {p} = {} dollars.\n\n{m} - {} = {}", a * p, a * p, m - a * p))
        },
    },
    Template {
        skill: "multi_step",
        name: "boxes",
        make: |d| {
            let (name, _) = d.person();
            let (b, c) = (d.int(3, 12), d.int(6, 24));
            let g = d.int(1, b * c - 1);
            (format!("There are {b} boxes with {c} crayons in each box. {name} gives away {g} crayons. How many crayons are left?"), b * c - g, format!("There are {b} × {c} = {} crayons.\n\n{} - {g} = {}", b * c, b * c, b * c - g))
        },
    },
    Template {
        skill: "multi_step",
        name: "legs",
        make: |d| {
            let (cows, hens) = (d.int(2, 30), d.int(2, 40));
            (format!("A farm has {cows} cows and {hens} chickens. Cows have four legs and chickens have two. How many legs do the animals have in total?"), 4 * cows + 2 * hens, format!("Cows: {cows} × 4 = {} legs.\n\nChickens: {hens} × 2 = {} legs.\n\n{} + {} = {}", 4 * cows, 2 * hens, 4 * cows, 2 * hens, 4 * cows + 2 * hens))
        },
    },
    // --- unit conversion ---
    Template {
        skill: "units",
        name: "movie_minutes",
        make: |d| {
            let (h, m) = (d.int(1, 3), d.int(1, 59));
            (
                format!(
                    "A movie lasts {h} hours and {m} minutes. How many minutes long is the movie?"
                ),
                60 * h + m,
                format!(
                    "{h} hours is {h} × 60 = {} minutes.\n\n{} + {m} = {}",
                    60 * h,
                    60 * h,
                    60 * h + m
                ),
            )
        },
    },
    Template {
        skill: "units",
        name: "ribbon_cm",
        make: |d| {
            let (name, pro) = d.person();
            let m = d.int(2, 9);
            let c = d.int(5, 95);
            (format!("{name} has a ribbon that is {m} meters long. {} cuts off {c} centimeters. How many centimeters of ribbon are left?", cap(pro)), 100 * m - c, format!("{m} meters is {m} × 100 = {} centimeters.\n\n{} - {c} = {}", 100 * m, 100 * m, 100 * m - c))
        },
    },
    Template {
        skill: "units",
        name: "glasses",
        make: |d| {
            let l = d.int(1, 9);
            let ml = d.pick(&[100, 200, 250, 500]);
            (format!("A jug holds {l} liters of juice. How many glasses of {ml} milliliters can be filled from the jug?"), l * 1000 / ml, format!("{l} liters is {l} × 1000 = {} milliliters.\n\n{} / {ml} = {}", 1000 * l, 1000 * l, 1000 * l / ml))
        },
    },
    Template {
        skill: "units",
        name: "coins",
        make: |d| {
            let (name, pro) = d.person();
            let (q, dimes) = (d.int(1, 20), d.int(1, 20));
            (format!("{name} has {q} quarters and {dimes} dimes. A quarter is worth twenty-five cents and a dime is worth ten cents. How many cents does {pro} have?"), 25 * q + 10 * dimes, format!("Quarters: {q} × 25 = {} cents.\n\nDimes: {dimes} × 10 = {} cents.\n\n{} + {} = {}", 25 * q, 10 * dimes, 25 * q, 10 * dimes, 25 * q + 10 * dimes))
        },
    },
];

/// How many times a duplicate text is redrawn.
const MAX_REDRAWS: usize = 50;

/// The number of templates (problem `i` uses template `i mod TEMPLATE_COUNT`).
pub const TEMPLATE_COUNT: usize = TEMPLATES.len();

/// The `(skill, template)` names, in template order.
pub fn template_names() -> impl Iterator<Item = (&'static str, &'static str)> {
    TEMPLATES.iter().map(|t| (t.skill, t.name))
}

/// `count` problems from `seed`: a pure function (same arguments, same problems).
///
/// ```
/// let a = ponder_evals::gsm_gen::generate(7, 40);
/// assert_eq!(a, ponder_evals::gsm_gen::generate(7, 40));
/// assert_eq!(a.len(), 40);
/// assert!(a[0].id.starts_with("gen-7-0000-"));
/// ```
pub fn generate(seed: u64, count: usize) -> Vec<GeneratedProblem> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut seen = std::collections::HashSet::new();
    (0..count)
        .filter_map(|i| {
            let t = TEMPLATES.get(i % TEMPLATES.len())?;
            // Redraw a text seen before (a duplicate could sit on both sides of the split);
            // templates with few combinations may still repeat after the last try.
            let mut drawn = (t.make)(&mut Draw { rng: &mut rng });
            for _ in 0..MAX_REDRAWS {
                if !seen.contains(&drawn.0) {
                    break;
                }
                drawn = (t.make)(&mut Draw { rng: &mut rng });
            }
            seen.insert(drawn.0.clone());
            let (problem, answer, steps) = drawn;
            Some(GeneratedProblem {
                id: format!("gen-{seed}-{i:04}-{}", t.name),
                problem,
                answer: answer.to_string(),
                subject: t.skill.to_string(),
                level: u32::try_from(steps.matches('=').count()).unwrap_or(u32::MAX),
                template: t.name.to_string(),
                solution: format!("{steps}\n\nThe answer is \\boxed{{{answer}}}."),
            })
        })
        .collect()
}

/// The problems as JSONL text (one object per line, a newline after each): exactly the bytes of
/// the committed file.
pub fn to_jsonl(problems: &[GeneratedProblem]) -> crate::Result<String> {
    let mut out = String::new();
    for p in problems {
        out.push_str(
            &serde_json::to_string(p).map_err(|e| crate::EvalError::Dataset {
                path: p.id.clone(),
                reason: e.to_string(),
            })?,
        );
        out.push('\n');
    }
    Ok(out)
}

#[cfg(test)]
#[path = "gsm_gen_tests.rs"]
mod tests;
