//! Math equivalence of two answers, and grading a model's output against a gold answer.
//!
//! Two extracted answers are equivalent when (in order): their units, where both have one,
//! agree; their normalised strings are equal; a rule for a special form decides (a numeral in
//! another base, a multiple-choice letter: `forms.rs`); or, when either is text rather than
//! math, their normalised strings match ignoring case and spacing; or both parse as LaTeX and
//! their values agree. Values agree exactly when both are rational (`0.5` ≡ `\frac{1}{2}`,
//! `2^{10}` ≡ `1024`), otherwise within a relative tolerance of [`REL_TOL`] (`\sqrt{8}` ≡
//! `2\sqrt{2}`). Expressions with variables are compared at [`POINTS`] random points drawn from
//! a fixed seed (`(x+1)^2` ≡ `x^2+2x+1`), the classic randomized identity test. Structure must
//! match: tuples in order, sets and unions in any order, intervals with the same ends, matrices
//! of one shape; a `±` answer is the set of its values. An answer written with `%` may also be
//! read as hundredths and one written with a degree mark as degrees (`50\%` ≡ `0.5`,
//! `30^\circ` ≡ `\frac{\pi}{6}`).
//!
//! # MATH's conventions
//!
//! The MATH benchmark (Hendrycks et al. 2021) and AIME write one gold answer per problem, in the
//! form the question asked for; the gold's form stands for the question:
//!
//! - **Base.** A gold `1011_2` or `3A_{16}` means the question asked for a base-`b` numeral: the
//!   same digits with or without the subscript are right (`1011`, `3a`, `204_{\text{five}}`);
//!   the decimal value (`11`) and the digits in another base (`1011_3`) are wrong. A gold in
//!   base ten accepts a numeral in another base by the number it names (`1011_2` for `11`).
//! - **Form.** An ordered pair or triple is a tuple: order matters, and named components count
//!   in the order written (`m = 3, n = -4` ≡ `(3,-4)`; `n = -4, m = 3` is read as `(-4, 3)`); a
//!   column or row vector equals the tuple of its entries (also `\langle…\rangle`, `[a, b]`);
//!   a scalar times a vector or matrix is multiplied out (`2\begin{pmatrix}1\\3\end{pmatrix}`);
//!   `I`, `-I`, `2I`, `I_n` against a square matrix are multiples of its identity. A list of
//!   solutions of one unknown is a set (`x = -2, x = 1` ≡ `-2, 1`). An interval equals the
//!   inequality describing it, an `or` of inequalities a union, an `and` an intersection, `x \ne
//!   c` the line without `c`, `\mathbb{R}` the whole line (`sets.rs`). A number in words is the
//!   number (`twenty-one` ≡ `21`, `one half` ≡ `\frac12`). A multiple-choice gold `(B)` takes
//!   `B`, `(B)`, `\text{(B) Parabola}`, `Option B`, and its label when the gold gives one.
//!   AIME answers are integers 0–999 often written with three digits: `033` ≡ `33`.
//! - **Units.** Units after a number are dropped (`5\text{ cm}` ≡ `5`), but two answers whose
//!   units differ are not equal (`5 cm` ≢ `5 m`: no conversion is attempted).
//!
//! The design follows HuggingFace's math-verify (normalise, parse, compare symbolically then
//! numerically) and the MATH benchmark's graders; the fixture in `tests/fixtures/` measures how
//! close we are (see `tests/grader_acceptance.rs` and `verifiers/LABELLING.md`).
//!
//! Invariants: symmetric — `equivalent(a, b) == equivalent(b, a)` — except for base numerals,
//! where the first argument is the gold (`equivalent("11", "1011_2")` but not
//! `equivalent("1011_2", "11")`); reflexive on any non-empty answer; total; deterministic
//! (fixed seed); bounded work (see [`crate::latex`]). No rule makes two different numbers equal.
#![deny(clippy::indexing_slicing)]

pub(crate) mod forms;
mod sets;

use crate::extract::extract_answer;
use crate::latex::{self, eval_value, square_size, Env, Expr, Num, RelOp, Value};
use crate::normalize::{normalize, Normalized};
use forms::text_key;
use num_bigint::BigInt;
use num_rational::BigRational;
use num_traits::Zero;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;

/// Relative tolerance for comparing values that are not both exact.
pub const REL_TOL: f64 = 1e-9;
/// Absolute tolerance near zero (so `\sin(\pi)` ≡ `0`).
const ABS_TOL: f64 = 1e-12;
/// Random points at which expressions with variables are compared.
pub const POINTS: usize = 4;
const SEED: u64 = 0x5eed_0fa1_1500;

/// An answer prepared for comparison: normalised and parsed once, compared many times (votes
/// compare every answer with every group).
#[derive(Debug, Clone)]
pub struct Answer {
    norm: Normalized,
    expr: Option<Expr>,
}

impl Answer {
    /// Normalises and parses `answer` (an already-extracted answer, not a whole output).
    pub fn new(answer: &str) -> Self {
        let norm = normalize(answer);
        let expr = sets::all_reals(answer).or_else(|| match latex::parse(&norm.text) {
            Ok(e) => Some(sets::described_set(e, &norm)),
            Err(_) => forms::number_words(&norm.text).map(Expr::Number),
        });
        Self { norm, expr }
    }

    /// The normalised answer text.
    pub fn normalized(&self) -> &str {
        &self.norm.text
    }

    /// The parsed expression, when the answer is math the parser reads.
    pub fn expr(&self) -> Option<&Expr> {
        self.expr.as_ref()
    }

    /// Whether `other` (a prediction) is mathematically equivalent to this answer (the gold;
    /// see the module docs).
    pub fn is_equivalent(&self, other: &Answer) -> bool {
        let (a, b) = (&self.norm.text, &other.norm.text);
        if a.is_empty() || b.is_empty() {
            return false;
        }
        let (ua, ub) = (&self.norm.units, &other.norm.units);
        if !ua.is_empty() && !ub.is_empty() && ua != ub {
            return false;
        }
        if a == b {
            return true;
        }
        let pred_value = match forms::base_verdict(a, b) {
            forms::BaseVerdict::Decided(verdict) => return verdict,
            forms::BaseVerdict::PredValue(v) => Some(Expr::Number(v)),
            forms::BaseVerdict::NotBase => None,
        };
        if let Some(verdict) = forms::choice_verdict(a, b) {
            return verdict;
        }
        match (&self.expr, pred_value.as_ref().or(other.expr.as_ref())) {
            (Some(x), Some(y)) => values_equivalent(x, &self.norm, y, &other.norm),
            _ => text_key(a) == text_key(b),
        }
    }
}

/// Whether two extracted answers are mathematically equivalent; `a` is the gold (it matters
/// only for numerals in another base, see the module docs).
///
/// ```
/// use ponder_verifiers::equivalent;
///
/// assert!(equivalent(r"\frac{1}{2}", "0.5"));
/// assert!(equivalent(r"\sqrt{8}", r"2\sqrt{2}"));
/// assert!(equivalent(r"(x+1)^2", r"x^2 + 2x + 1"));
/// assert!(equivalent(r"\{1, 2\}", r"\{2, 1\}"));
/// assert!(!equivalent("(1, 2)", "(2, 1)"));
/// assert!(!equivalent("[1, 2)", "[1, 2]"));
/// assert!(!equivalent(r"\pi", "3.14"));
/// assert!(equivalent("1011_2", "1011") && !equivalent("1011_2", "11"));
/// assert!(equivalent(r"\begin{pmatrix} 2 \\ 6 \end{pmatrix}", r"2\begin{pmatrix} 1 \\ 3 \end{pmatrix}"));
/// assert!(equivalent(r"(-\infty, 2) \cup (5, \infty)", r"x < 2 \text{ or } x > 5"));
/// assert!(equivalent(r"\text{(B)}", r"\text{(B) Parabola}") && !equivalent(r"\text{(B)}", "C"));
/// assert!(!equivalent(r"5\text{ cm}", r"5\text{ m}"));
/// ```
pub fn equivalent(a: &str, b: &str) -> bool {
    Answer::new(a).is_equivalent(&Answer::new(b))
}

/// The verdict on one prediction, with what the grader saw, for auditing.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Grade {
    /// Whether the extracted answer is equivalent to the gold answer.
    pub equivalent: bool,
    /// The answer extracted from the prediction, if any.
    pub extracted: Option<String>,
    /// The gold answer, normalised.
    pub normalized_gold: String,
    /// The extracted answer, normalised.
    pub normalized_pred: Option<String>,
}

/// Grades a model's output against a gold answer.
///
/// `gold` is an answer (`\frac{1}{2}`, `72`); when it is a whole solution (it holds `\boxed`,
/// `####` or `</think>`) its answer is extracted first. The prediction is a model's output: its
/// answer is extracted with [`extract_answer`]. No answer grades as not equivalent.
///
/// ```
/// use ponder_verifiers::grade;
///
/// let g = grade(r"\frac{1}{2}", r"<think>hmm</think> So the answer is $\boxed{0.5}$.");
/// assert!(g.equivalent);
/// assert_eq!(g.extracted.as_deref(), Some("0.5"));
/// assert!(!grade("3", "I don't know").equivalent);
/// ```
pub fn grade(gold: &str, prediction_text: &str) -> Grade {
    let gold_answer = gold_answer(gold);
    let gold = Answer::new(&gold_answer);
    let extracted = extract_answer(prediction_text);
    let pred = extracted.as_deref().map(Answer::new);
    Grade {
        equivalent: pred.as_ref().is_some_and(|p| gold.is_equivalent(p)),
        extracted,
        normalized_gold: gold.normalized().to_string(),
        normalized_pred: pred.map(|p| p.norm.text),
    }
}

fn gold_answer(gold: &str) -> String {
    let whole_solution = ["\\boxed", "\\fbox", "####", "</think>"]
        .iter()
        .any(|m| gold.contains(m));
    if whole_solution {
        if let Some(a) = extract_answer(gold) {
            return a;
        }
    }
    gold.trim().to_string()
}

/// Ways a value may be read: as written, as hundredths (percent), as degrees.
fn readings(n: &Normalized) -> Vec<Num> {
    let mut out = vec![Num::Exact(BigRational::from_integer(BigInt::from(1)))];
    if n.percent {
        out.push(Num::Exact(BigRational::new(
            BigInt::from(1),
            BigInt::from(100),
        )));
    }
    if n.degrees {
        out.push(Num::Float(std::f64::consts::PI / 180.0));
    }
    out
}

/// Evaluation points: one when there are no variables, else [`POINTS`] points where each
/// variable takes a distinct random positive rational.
fn points(vars: &std::collections::BTreeSet<String>) -> Vec<Env> {
    if vars.is_empty() {
        return vec![Env::default()];
    }
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(SEED);
    (0..POINTS)
        .map(|_| {
            let mut used: Vec<BigRational> = Vec::new();
            let mut map = BTreeMap::new();
            for v in vars {
                let value = loop {
                    let n: i64 = rng.random_range(2..=97);
                    let d: i64 = rng.random_range(1..=11);
                    let q = BigRational::new(BigInt::from(n), BigInt::from(d));
                    if n != d && !used.contains(&q) {
                        break q;
                    }
                };
                used.push(value.clone());
                map.insert(v.clone(), value);
            }
            Env::new(map)
        })
        .collect()
}

/// `m = 3, n = -4` read as the tuple `(3, -4)` when the other answer is a tuple or a vector.
fn as_tuple_against(e: &Expr, n: &Normalized, other: &Expr) -> Option<Expr> {
    match (e, other) {
        (Expr::Set(items), Expr::Tuple(_) | Expr::Matrix(_) | Expr::Interval { .. })
            if n.named_tuple =>
        {
            Some(Expr::Tuple(items.clone()))
        }
        _ => None,
    }
}

fn values_equivalent(a: &Expr, na: &Normalized, b: &Expr, nb: &Normalized) -> bool {
    let a_tuple = as_tuple_against(a, na, b);
    let b_tuple = as_tuple_against(b, nb, a);
    let a = a_tuple.as_ref().unwrap_or(a);
    let b = b_tuple.as_ref().unwrap_or(b);
    let mut vars = a.variables();
    vars.extend(b.variables());
    // `I`, `-I`, `2I`, `I_3` against a square matrix: `I` is the identity of that size.
    let identity = square_size(a).or_else(|| square_size(b)).filter(|n| {
        *n <= latex::MAX_IDENTITY && vars.iter().any(|v| latex::is_identity_name(v, *n))
    });
    if let Some(n) = identity {
        vars.retain(|v| !latex::is_identity_name(v, n));
    }
    let envs: Vec<Env> = points(&vars)
        .into_iter()
        .map(|env| match identity {
            Some(n) => env.with_identity(n),
            None => env,
        })
        .collect();
    let evaluated: Vec<(Value, Value)> = envs
        .iter()
        .filter_map(|env| {
            let va = eval_value(a, env).ok()?;
            let vb = eval_value(b, env).ok()?;
            (!va.has_nan() && !vb.has_nan()).then_some((va, vb))
        })
        .collect();
    if evaluated.is_empty() {
        return false;
    }
    if let Some(eq) = equations_proportional(&evaluated) {
        return eq;
    }
    let (ra, rb) = (readings(na), readings(nb));
    ra.iter().any(|sa| {
        rb.iter().any(|sb| {
            evaluated
                .iter()
                .all(|(va, vb)| values_eq(&va.scaled(sa), &vb.scaled(sb)))
        })
    })
}

/// Two single equations `l = r` are equivalent when `l − r` of one is a constant non-zero
/// multiple of the other's at every point. `None` when the values are not both equations.
fn equations_proportional(evaluated: &[(Value, Value)]) -> Option<bool> {
    let diff = |v: &Value| -> Option<Num> {
        match v {
            Value::Relation(sides, ops) if ops.as_slice() == [RelOp::Eq] => {
                match sides.as_slice() {
                    [Value::Scalar(l), Value::Scalar(r)] => Some(l.sub_num(r)),
                    _ => None,
                }
            }
            _ => None,
        }
    };
    let mut ratio: Option<Num> = None;
    for (va, vb) in evaluated {
        let (da, db) = (diff(va)?, diff(vb)?);
        let (za, zb) = (
            num_eq(&da, &Num::Exact(BigRational::zero())),
            num_eq(&db, &Num::Exact(BigRational::zero())),
        );
        if za || zb {
            if za != zb {
                return Some(false);
            }
            continue;
        }
        let r = da.div_num(&db)?;
        match &ratio {
            None => ratio = Some(r),
            Some(prev) if !num_eq(prev, &r) => return Some(false),
            Some(_) => {}
        }
    }
    Some(true)
}

pub(crate) fn num_eq(a: &Num, b: &Num) -> bool {
    if let (Num::Exact(x), Num::Exact(y)) = (a, b) {
        return x == y;
    }
    let (x, y) = (a.to_f64(), b.to_f64());
    if x.is_nan() || y.is_nan() {
        return false;
    }
    if x.is_infinite() || y.is_infinite() {
        return x == y;
    }
    let d = (x - y).abs();
    d <= ABS_TOL || d <= REL_TOL * x.abs().max(y.abs())
}

/// Every member of `a` has an equal member in `b`, and vice versa.
fn same_members(a: &[Value], b: &[Value]) -> bool {
    a.iter().all(|x| b.iter().any(|y| values_eq(x, y)))
        && b.iter().all(|y| a.iter().any(|x| values_eq(x, y)))
}

fn values_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Scalar(x), Value::Scalar(y)) => num_eq(x, y),
        (Value::Tuple(x), Value::Tuple(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| values_eq(p, q))
        }
        (
            Value::Interval {
                lo: l1,
                hi: h1,
                lo_closed: lc1,
                hi_closed: hc1,
            },
            Value::Interval {
                lo: l2,
                hi: h2,
                lo_closed: lc2,
                hi_closed: hc2,
            },
        ) => lc1 == lc2 && hc1 == hc2 && num_eq(l1, l2) && num_eq(h1, h2),
        (Value::Set(x), Value::Set(y)) | (Value::Union(x), Value::Union(y)) => same_members(x, y),
        (Value::Set(x), other) | (other, Value::Set(x))
            if x.len() == 1 && !matches!(other, Value::Set(_)) =>
        {
            x.first().is_some_and(|only| values_eq(only, other))
        }
        // A column or row vector and the tuple of its entries, in order.
        (Value::Matrix(m), Value::Tuple(t)) | (Value::Tuple(t), Value::Matrix(m)) => {
            vector_entries(m).is_some_and(|v| {
                v.len() == t.len()
                    && v.iter()
                        .zip(t)
                        .all(|(x, y)| matches!(y, Value::Scalar(y) if num_eq(x, y)))
            })
        }
        // `[a, b]` written for a two-entry vector.
        (
            Value::Matrix(m),
            Value::Interval {
                lo,
                hi,
                lo_closed: true,
                hi_closed: true,
            },
        )
        | (
            Value::Interval {
                lo,
                hi,
                lo_closed: true,
                hi_closed: true,
            },
            Value::Matrix(m),
        ) => vector_entries(m)
            .is_some_and(|v| matches!(v.as_slice(), [x, y] if num_eq(x, lo) && num_eq(y, hi))),
        (Value::Matrix(x), Value::Matrix(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|(r, s)| r.len() == s.len() && r.iter().zip(s).all(|(p, q)| num_eq(p, q)))
        }
        (Value::Relation(x, ox), Value::Relation(y, oy)) => {
            let forward =
                ox == oy && x.len() == y.len() && x.iter().zip(y).all(|(p, q)| values_eq(p, q));
            let mirrored: Vec<RelOp> = oy.iter().rev().map(|o| o.mirrored()).collect();
            let backward = *ox == mirrored
                && x.len() == y.len()
                && x.iter().zip(y.iter().rev()).all(|(p, q)| values_eq(p, q));
            forward || backward
        }
        _ => false,
    }
}

/// The entries of a one-column or one-row matrix, in order.
fn vector_entries(m: &[Vec<Num>]) -> Option<Vec<&Num>> {
    match m {
        [row] => Some(row.iter().collect()),
        rows if rows.iter().all(|r| r.len() == 1) => Some(rows.iter().flatten().collect()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn yes(a: &str, b: &str) {
        assert!(equivalent(a, b), "{a:?} should equal {b:?}");
        assert!(equivalent(b, a), "{b:?} should equal {a:?}");
    }

    #[track_caller]
    fn no(a: &str, b: &str) {
        assert!(!equivalent(a, b), "{a:?} should differ from {b:?}");
        assert!(!equivalent(b, a), "{b:?} should differ from {a:?}");
    }

    #[test]
    fn numbers() {
        yes(r"\frac{1}{2}", "0.5");
        yes(r"\frac12", "1/2");
        yes(r"-\frac{3}{4}", r"\frac{-3}{4}");
        yes("1,000", "1000");
        yes("2^{10}", "1024");
        yes(r"\sqrt{8}", r"2\sqrt{2}");
        yes(r"\frac{\sqrt{2}}{2}", r"\frac{1}{\sqrt{2}}");
        yes(r"\sqrt[3]{8}", "2");
        no(r"\frac{1}{3}", "0.333");
        no(r"\pi", "3.14");
        no("2", "3");
    }

    #[test]
    fn structures() {
        yes(r"\{1,2,3\}", "3, 2, 1");
        yes(r"(1, \frac{1}{2})", "(1, 0.5)");
        no("(1, 2)", "(2, 1)");
        yes(r"[1, \infty)", r"[1,\infty)");
        no(r"[1, 2)", "[1, 2]");
        yes(
            r"(-\infty, 0) \cup (1, \infty)",
            r"(1, \infty) \cup (-\infty, 0)",
        );
        yes(
            r"\begin{pmatrix} 1 & 2 \\ 3 & 4 \end{pmatrix}",
            r"\begin{bmatrix} 1 & 2 \\ 3 & 4 \end{bmatrix}",
        );
        yes(r"1 \pm \sqrt{2}", r"1 + \sqrt{2}, 1 - \sqrt{2}");
    }

    #[test]
    fn variables() {
        yes("(x+1)^2", "x^2+2x+1");
        yes("2x", "x+x");
        no("x", "y");
        no("x^2", "x^3");
        yes("y = 2x + 3", "3 + 2x");
        yes("2x + 3y = 6", "6 = 3y + 2x");
        yes("2x + 3y = 6", "4x + 6y = 12");
        no("2x + 3y = 6", "2x + 3y = 7");
    }

    #[test]
    fn inequalities_and_mixed_numbers() {
        yes(r"x \ge 3", r"[3, \infty)");
        yes("x > 3", r"(3, \infty)");
        yes("3 < x", r"(3, \infty)");
        yes(r"-1 \le x < 2", "[-1, 2)");
        no(r"x \ge 3", r"(3, \infty)");
        yes(r"2\frac{1}{3}", r"\frac{7}{3}");
        no(r"2\frac{1}{3}", r"\frac{2}{3}");
    }

    #[test]
    fn percent_degrees_text() {
        yes(r"50\%", "50");
        yes(r"50\%", "0.5");
        no("0.5", "50");
        yes(r"30^\circ", "30");
        yes(r"30^\circ", r"\frac{\pi}{6}");
        yes(r"\text{Monday}", "monday");
        no("Monday", "dynamo");
        yes(r"\text{(B)}", "B");
    }

    #[test]
    fn math_forms() {
        // Bases: the gold's form decides.
        yes("1011_2", "1011_{2}");
        assert!(equivalent("1011_2", "1011"));
        assert!(!equivalent("1011_2", "11"));
        assert!(equivalent("11", "1011_2"));
        no("1011_2", "1011_3");
        // Named components, vectors, matrices.
        yes("(3,-4)", "m = 3, n = -4");
        no("(3,-4)", "m = -4, n = 3");
        yes("-2, 1", "x = 1, x = -2");
        yes(r"\begin{pmatrix} 1 \\ 2 \end{pmatrix}", "(1, 2)");
        no(r"\begin{pmatrix} 1 \\ 2 \end{pmatrix}", "(2, 1)");
        yes(r"\begin{pmatrix} -1 & 0 \\ 0 & -1 \end{pmatrix}", "-I");
        no(r"\begin{pmatrix} -1 & 0 \\ 0 & -1 \end{pmatrix}", "I");
        no(r"\begin{pmatrix} 1 & 1 \\ 0 & 1 \end{pmatrix}", "I");
        yes(
            r"\begin{pmatrix} 2 & 4 \\ 6 & 8 \end{pmatrix}",
            r"2\begin{pmatrix} 1 & 2 \\ 3 & 4 \end{pmatrix}",
        );
        // Words, inequalities, choices, units.
        yes("21", r"\text{twenty-one}");
        no("21", r"\text{twelve}");
        yes("[-1, 4)", r"x \ge -1 \text{ and } x < 4");
        yes(r"(-\infty, 3) \cup (3, \infty)", r"x \ne 3");
        no(
            r"(-\infty, 2) \cup (5, \infty)",
            r"x < 2 \text{ and } x > 5",
        );
        yes(r"(-\infty, \infty)", r"\mathbb{R}");
        yes(r"\text{(B) Parabola}", "parabola");
        no(r"\text{(B) Parabola}", r"\text{(B) Circle}");
        yes(r"5\text{ cm}", r"5 \text{ centimeters}");
        no(r"5\text{ cm}", r"5\text{ m}");
        yes("33", "033");
    }

    #[test]
    fn empty_is_never_equivalent() {
        no("", "");
        no("", "1");
    }

    #[test]
    fn grade_extracts_gold_solutions() {
        let g = grade("Since 3+4=7\n#### 7", "The answer is 7.");
        assert!(g.equivalent);
        assert_eq!(g.normalized_gold, "7");
    }
}
