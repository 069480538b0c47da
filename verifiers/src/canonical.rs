//! One canonical answer per candidate: an answer that states a single number in words, units
//! or an equation (`45 minutes`, `$1,200`, `the total is 7 + 5 = 12 dollars`, `x = 5`, `12%`)
//! becomes that number (`45`, `1200`, `12`, `5`, `12`), so equal answers vote together; any
//! other answer (`(1, 2)`, `\frac{\pi}{2}`, `Monday`, `3 dollars and 50 cents`) is kept as
//! written and left to math equivalence.
//!
//! Also [`has_clear_answer`]: whether a solution ends with an answer it marked as final
//! (`\boxed{}`, `#### n`, "the answer is …"), as opposed to one guessed from its last number —
//! the cue for forcing an answer with a probe (strategies' `Context::add_candidate_forced`).
//!
//! Invariants: total (never panics); idempotent (`canonical_answer(canonical_answer(a)) ==
//! canonical_answer(a)`); a canonical number is equivalent to the value the answer states.
//! A percentage keeps its number (`12%` → `12`), as GSM8K-style golds write it.
#![deny(clippy::indexing_slicing)]

use num_rational::BigRational;
use num_traits::{Signed, Zero};

use crate::calc_check::stated_number;
use crate::extract::extract_answer;

/// The canonical form of an extracted answer.
///
/// ```
/// use ponder_verifiers::canonical_answer;
///
/// assert_eq!(canonical_answer("45 minutes"), "45");
/// assert_eq!(canonical_answer("the total is 7 + 5 = 12 dollars"), "12");
/// assert_eq!(canonical_answer("$1,250.50"), "1250.5");
/// assert_eq!(canonical_answer(r"\frac{2}{6} of the cake"), r"\frac{1}{3}");
/// assert_eq!(canonical_answer("(1, 2)"), "(1, 2)");
/// assert_eq!(canonical_answer("Monday"), "Monday");
/// ```
pub fn canonical_answer(raw: &str) -> String {
    let without_percent = raw.replace("\\%", "").replace('%', "");
    match stated_number(&without_percent) {
        Some(v) => write_number(&v),
        None => raw.trim().to_string(),
    }
}

/// An exact number as an answer is written: an integer, a terminating decimal, or `\frac{a}{b}`.
fn write_number(v: &BigRational) -> String {
    if v.is_integer() {
        return v.to_integer().to_string();
    }
    let sign = if v.is_negative() { "-" } else { "" };
    let (n, d) = (v.numer().abs(), v.denom().clone());
    // A terminating decimal when the denominator has no prime factor but 2 and 5.
    let mut rest = d.clone();
    let (two, five) = (num_bigint::BigInt::from(2), num_bigint::BigInt::from(5));
    let mut places = 0u32;
    for p in [&two, &five] {
        while (&rest % p).is_zero() {
            rest /= p;
            places += 1;
        }
    }
    if rest == num_bigint::BigInt::from(1) && places <= 12 {
        let scale = num_traits::pow(num_bigint::BigInt::from(10), places as usize);
        let scaled = &n * &scale / &d;
        let int = &scaled / &scale;
        let frac = (&scaled % &scale).to_string();
        let frac = format!("{frac:0>width$}", width = places as usize);
        return format!("{sign}{int}.{}", frac.trim_end_matches('0'));
    }
    format!("{sign}\\frac{{{n}}}{{{d}}}")
}

/// Whether `text` marks its final answer (`\boxed{}`/`\fbox{}`, `#### n`, "answer is",
/// "answer:") and that answer can be read.
///
/// ```
/// use ponder_verifiers::has_clear_answer;
///
/// assert!(has_clear_answer(r"so \boxed{12}"));
/// assert!(has_clear_answer("The answer is 12 apples."));
/// assert!(!has_clear_answer("She has 7 + 5 = 12 apples."));
/// ```
pub fn has_clear_answer(text: &str) -> bool {
    let region = text.rsplit("</think>").next().unwrap_or(text);
    let lower = region.to_ascii_lowercase();
    let marked = ["\\boxed", "\\fbox", "####", "answer is", "answer:"]
        .iter()
        .any(|m| lower.contains(m));
    marked && extract_answer(text).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn phrases_units_and_forms_become_one_number() {
        for (raw, want) in [
            ("45 minutes", "45"),
            ("45", "45"),
            ("12 dollars", "12"),
            (r"\$12", "12"),
            ("3 boxes for each child", "3"),
            ("x = 5", "5"),
            ("12%", "12"),
            (r"12\%", "12"),
            ("0.50", "0.5"),
            ("-3/4", "-0.75"),
            ("2/3 cup", r"\frac{2}{3}"),
            ("1,000,000", "1000000"),
        ] {
            assert_eq!(canonical_answer(raw), want, "{raw}");
        }
        for keep in [
            "(1, 2)",
            r"\frac{\pi}{2}",
            "x^2 + 1",
            "Monday",
            "3 and 4",
            r"2\sqrt{3}",
        ] {
            assert_eq!(canonical_answer(keep), keep, "{keep}");
        }
    }

    #[test]
    fn canonical_answers_vote_together() {
        // What the candidates record.
        let recorded: Vec<String> = ["45 minutes", "45", "40", "45.0 min"]
            .iter()
            .map(|a| canonical_answer(a))
            .collect();
        let v = crate::majority_vote(recorded.iter().map(String::as_str));
        assert_eq!(v.map(|v| (v.answer, v.support)), Some(("45".into(), 3.0)));
    }

    proptest! {
        #[test]
        fn idempotent_and_equivalent(n in -100_000i64..100_000, d in 1i64..64, unit in "([a-z]{2,8})?") {
            let raw = format!("{n}/{d} {unit}");
            let c = canonical_answer(&raw);
            prop_assert_eq!(canonical_answer(&c), c.clone());
            prop_assert!(crate::equivalent(&c, &format!("{n}/{d}")), "{} vs {}/{}", c, n, d);
        }

        #[test]
        fn never_panics(raw in ".{0,60}") {
            let c = canonical_answer(&raw);
            let _ = has_clear_answer(&raw);
            prop_assert_eq!(canonical_answer(&c), c.clone());
        }
    }
}
