//! `CalcCheck`: an exact calculation check. Every equality a step writes — `6 × 7 = 42`,
//! `12 - 5 = 7`, `\frac{3}{4} \cdot 8 = 6`, `$1,200 / 4 = $300`, chains `a = b = c`, and simple
//! algebra once a variable is bound (`x = 5`, then `2x + 3 = 13`) — is evaluated with exact
//! rationals; a step's score halves with each false equality; a finished solution's final answer
//! is checked against the last quantity it computed.
//!
//! Given the question, it also checks what the computations compute *with*: every number a
//! computation uses (a literal on a side with an operator) should be **grounded** — written in
//! the question (in digits or words: `four`, `twenty-five`, `a dozen`), computed earlier in
//! the solution, or a common conversion constant ([`CONSTANTS`]) — and a finished solution
//! should **cover** the question's numbers, using each of them somewhere; and every result a
//! finished solution computes should be **used** — by a later computation or as the answer. A
//! true equality over numbers the model made up, a solution that ignores a quantity of the
//! question, or one that computes two subtotals and answers with one of them, is the typical
//! wrong answer of a small model that no longer slips at arithmetic. A question without
//! numbers is not judged for grounding and coverage.
//! Those counts live in the `grounding` submodule ([`QuestionNumbers`]); this file reads and
//! checks the equalities and scores.
//!
//! It is the rule-based cousin of a process reward model: small models (SmolLM2-135M) make
//! arithmetic slips that an exact check catches for free (the "calculator annotations" of
//! GSM8K, Cobbe et al. 2021, and the tool-checked steps of PAL / program-aided reasoning, Gao et
//! al. 2023), and a step without any arithmetic is neither rewarded nor punished.
//!
//! How text is read ([`check_text`]): the text is cut into runs of math — numbers (thousands
//! commas, decimals, `%`), `+ - × x * · / ÷ ^ ² ³`, `\times \cdot \div \frac`, brackets, and
//! single-letter variables — separated by words and punctuation (a word between a number and an
//! operator is a unit and is skipped: `5 apples + 7 apples = 12`). A run with `=` is split into
//! sides; two neighbouring sides that both evaluate are one [`Equality`]. A side that does not
//! parse, uses an unbound variable or divides by zero is not judged: only what can be computed
//! is checked, so prose never scores as an error.
//!
//! Invariants: total and bounded — never panics on any text, literals are capped at
//! [`MAX_DIGITS`] digits, powers at exponent [`MAX_EXPONENT`], nesting at [`MAX_NESTING`];
//! scores lie in `[0, 1]`; a solution whose equalities all hold scores 1.
#![deny(clippy::indexing_slicing)]

use std::collections::{BTreeMap, HashSet};

use num_bigint::BigInt;
use num_rational::BigRational;
use num_traits::{ToPrimitive, Zero};

use crate::error::Result;
use crate::extract::extract_answer;
use crate::verifier::{Scores, Solution, Verifier, NO_ANSWER_SCORE};

mod grounding;

pub use grounding::{
    grounding, question_numbers, unused_results, Grounding, QuestionNumbers, CONSTANTS,
};

/// Longest number literal read, in digits.
pub const MAX_DIGITS: usize = 40;
/// Largest exponent `a^n` evaluates (in absolute value).
pub const MAX_EXPONENT: u32 = 64;
/// Deepest bracket nesting evaluated.
pub const MAX_NESTING: usize = 32;

/// One token of a math run.
#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(BigRational),
    Var(char),
    Op(char),
    Percent,
    Open,
    Close,
    Frac,
    Eq,
    /// A word or punctuation: ends a run.
    Break,
    /// A word that may be a unit (dropped between a value and an operator).
    Word,
}

/// Reads `text` into tokens.
fn lex(text: &str) -> Vec<Tok> {
    let chars: Vec<char> = text.chars().collect();
    let mut out: Vec<Tok> = Vec::new();
    let mut i = 0;
    let at = |i: usize| chars.get(i).copied();
    while let Some(c) = at(i) {
        if c.is_ascii_digit() || (c == '.' && at(i + 1).is_some_and(|d| d.is_ascii_digit())) {
            let (tok, next) = number(&chars, i);
            out.push(tok);
            i = next;
            continue;
        }
        if c.is_alphabetic() {
            let start = i;
            while at(i).is_some_and(char::is_alphabetic) {
                i += 1;
            }
            if i - start == 1 {
                let spaced = start > 0
                    && at(start - 1).is_some_and(char::is_whitespace)
                    && at(i).is_some_and(char::is_whitespace);
                let after_value = matches!(out.last(), Some(Tok::Num(_) | Tok::Close));
                // `7 boxes x 4 apples`: a value and its unit, then `x` before a number.
                let after_unit =
                    matches!(out.as_slice(), [.., Tok::Num(_) | Tok::Close, Tok::Word])
                        && chars
                            .get(i..)
                            .and_then(|rest| rest.iter().find(|c| !c.is_whitespace()))
                            .is_some_and(char::is_ascii_digit);
                if (c == 'x' || c == 'X') && spaced && (after_value || after_unit) {
                    out.push(Tok::Op('*'));
                } else {
                    out.push(Tok::Var(c));
                }
            } else {
                out.push(Tok::Word);
            }
            continue;
        }
        i += 1;
        let tok = match c {
            '\\' => {
                let (tok, next) = command(&chars, i);
                i = next;
                match tok {
                    Some(t) => t,
                    None => continue,
                }
            }
            '+' => Tok::Op('+'),
            '-' | '−' => Tok::Op('-'),
            '*' | '×' | '·' | '⋅' | '✕' | '∗' => Tok::Op('*'),
            '/' | '÷' => Tok::Op('/'),
            '^' => Tok::Op('^'),
            '²' | '³' => {
                out.push(Tok::Op('^'));
                Tok::Num(int(if c == '²' { 2 } else { 3 }))
            }
            '%' => Tok::Percent,
            '(' | '{' | '[' => Tok::Open,
            ')' | '}' | ']' => Tok::Close,
            '=' => {
                if at(i) == Some('=') {
                    i += 1;
                }
                Tok::Eq
            }
            '$' => continue,
            c if c.is_whitespace() && c != '\n' => continue,
            _ => Tok::Break,
        };
        out.push(tok);
    }
    out
}

fn int(n: i64) -> BigRational {
    BigRational::from_integer(BigInt::from(n))
}

/// A number literal at `start`: digits with thousands commas, an optional decimal part.
fn number(chars: &[char], start: usize) -> (Tok, usize) {
    let at = |i: usize| chars.get(i).copied();
    let digit = |i: usize| at(i).is_some_and(|c| c.is_ascii_digit());
    let mut digits = String::new();
    let mut i = start;
    while digit(i) {
        digits.extend(at(i));
        i += 1;
        // `1,234`: a comma followed by exactly three digits and no fourth.
        if at(i) == Some(',') && (1..=3).all(|k| digit(i + k)) && !digit(i + 4) {
            i += 1;
        }
    }
    let mut scale = 0usize;
    if at(i) == Some('.') && digit(i + 1) {
        i += 1;
        while digit(i) {
            digits.extend(at(i));
            scale += 1;
            i += 1;
        }
    }
    if digits.len() > MAX_DIGITS {
        return (Tok::Break, i);
    }
    let value = BigInt::parse_bytes(digits.as_bytes(), 10)
        .map(|n| BigRational::new(n, num_traits::pow(BigInt::from(10), scale)));
    (value.map_or(Tok::Break, Tok::Num), i)
}

/// A LaTeX command after a backslash at `start`: its token (`None`: spacing, ignored).
fn command(chars: &[char], start: usize) -> (Option<Tok>, usize) {
    let at = |i: usize| chars.get(i).copied();
    let mut i = start;
    while at(i).is_some_and(|c| c.is_ascii_alphabetic()) {
        i += 1;
    }
    if i == start {
        // A one-character command: `\,` `\;` `\!` `\ ` spacing, `\(`, `\[` delimiters, `\$`,
        // `\%`, `\{`, `\}`.
        let tok = match at(i) {
            Some('%') => Some(Tok::Percent),
            Some('{') => Some(Tok::Open),
            Some('}') => Some(Tok::Close),
            Some(',' | ';' | '!' | ':' | ' ' | '$' | '(' | ')' | '[' | ']') => None,
            Some(_) => Some(Tok::Break),
            None => None,
        };
        return (tok, i + 1);
    }
    let name: String = chars.get(start..i).unwrap_or_default().iter().collect();
    let tok = match name.as_str() {
        "times" | "cdot" | "ast" => Some(Tok::Op('*')),
        "div" => Some(Tok::Op('/')),
        "frac" | "dfrac" | "tfrac" => Some(Tok::Frac),
        "left" | "right" | "boxed" | "quad" | "qquad" | "displaystyle" => None,
        "text" | "mathrm" | "textbf" | "mbox" | "textrm" => {
            // `\text{apples}` is a word; `\text{ }` is spacing.
            if at(i) == Some('{') {
                let close = (i..chars.len()).find(|&k| at(k) == Some('}'));
                let end = close.map_or(chars.len(), |c| c + 1);
                let body: String = chars
                    .get(i + 1..end.saturating_sub(1))
                    .unwrap_or_default()
                    .iter()
                    .collect();
                let tok = (!body.trim().is_empty()).then_some(Tok::Word);
                return (tok, end);
            }
            Some(Tok::Word)
        }
        _ => Some(Tok::Break),
    };
    (tok, i)
}

/// Drops unit words (a word right after a value and right before an operator or `=`) and
/// turns the rest into breaks.
fn drop_units(toks: Vec<Tok>) -> Vec<Tok> {
    let mut out: Vec<Tok> = Vec::with_capacity(toks.len());
    let mut iter = toks.into_iter().peekable();
    while let Some(t) = iter.next() {
        if t == Tok::Word {
            let after_value = matches!(out.last(), Some(Tok::Num(_) | Tok::Close | Tok::Percent));
            let before_op = matches!(iter.peek(), Some(Tok::Op(_) | Tok::Eq));
            if !(after_value && before_op) {
                out.push(Tok::Break);
            }
            continue;
        }
        out.push(t);
    }
    out
}

/// Variable bindings (`x = 5`).
type Env = BTreeMap<char, BigRational>;

/// A recursive-descent evaluator over one side of an equality.
struct Eval<'a> {
    toks: &'a [Tok],
    pos: usize,
    env: &'a Env,
    depth: usize,
}

impl Eval<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }

    fn eat(&mut self, t: &Tok) -> bool {
        if self.peek() == Some(t) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expr(&mut self) -> Option<BigRational> {
        let mut v = self.term()?;
        loop {
            if self.eat(&Tok::Op('+')) {
                v += self.term()?;
            } else if self.eat(&Tok::Op('-')) {
                v -= self.term()?;
            } else {
                break;
            }
        }
        Some(v)
    }

    fn term(&mut self) -> Option<BigRational> {
        let mut v = self.unary()?;
        loop {
            if self.eat(&Tok::Op('*')) {
                v *= self.unary()?;
            } else if self.eat(&Tok::Op('/')) {
                let d = self.unary()?;
                if d.is_zero() {
                    return None;
                }
                v /= d;
            } else if matches!(self.peek(), Some(Tok::Open | Tok::Var(_) | Tok::Frac)) {
                // Implicit product: `2(3 + 4)`, `2x`, `3\frac{1}{2}` is not a mixed number here.
                v *= self.power()?;
            } else {
                break;
            }
        }
        Some(v)
    }

    fn unary(&mut self) -> Option<BigRational> {
        let mut negative = false;
        loop {
            if self.eat(&Tok::Op('-')) {
                negative = !negative;
            } else if !self.eat(&Tok::Op('+')) {
                break;
            }
        }
        let v = self.power()?;
        Some(if negative { -v } else { v })
    }

    fn power(&mut self) -> Option<BigRational> {
        let base = self.postfix()?;
        if !self.eat(&Tok::Op('^')) {
            return Some(base);
        }
        let exp = if self.eat(&Tok::Op('-')) {
            -self.postfix()?
        } else {
            self.postfix()?
        };
        if !exp.is_integer() {
            return None;
        }
        let e = exp.to_integer().to_i64()?;
        let n = u32::try_from(e.unsigned_abs())
            .ok()
            .filter(|n| *n <= MAX_EXPONENT)?;
        if base.is_zero() && e < 0 {
            return None;
        }
        let p = num_traits::pow(base, n as usize);
        Some(if e < 0 { p.recip() } else { p })
    }

    fn postfix(&mut self) -> Option<BigRational> {
        let mut v = self.primary()?;
        while self.eat(&Tok::Percent) {
            v /= int(100);
        }
        Some(v)
    }

    fn primary(&mut self) -> Option<BigRational> {
        let t = self.peek()?.clone();
        self.pos += 1;
        if !matches!(t, Tok::Open | Tok::Frac) {
            return self.primary_of(t);
        }
        // Brackets and fractions are where recursion nests: bound it.
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return None;
        }
        let v = self.primary_of(t);
        self.depth -= 1;
        v
    }

    fn primary_of(&mut self, t: Tok) -> Option<BigRational> {
        match t {
            Tok::Num(n) => Some(n),
            Tok::Var(c) => self.env.get(&c).cloned(),
            Tok::Open => {
                let v = self.expr()?;
                self.eat(&Tok::Close).then_some(v)
            }
            Tok::Frac => {
                let a = self.group()?;
                let b = self.group()?;
                (!b.is_zero()).then(|| a / b)
            }
            _ => None,
        }
    }

    /// `{…}` (or a single digit, `\frac12`).
    fn group(&mut self) -> Option<BigRational> {
        if self.eat(&Tok::Open) {
            let v = self.expr()?;
            return self.eat(&Tok::Close).then_some(v);
        }
        self.primary()
    }
}

/// Evaluates a whole side; `None` unless every token is used.
fn evaluate(toks: &[Tok], env: &Env) -> Option<BigRational> {
    if toks.is_empty() {
        return None;
    }
    let mut e = Eval {
        toks,
        pos: 0,
        env,
        depth: 0,
    };
    let v = e.expr()?;
    (e.pos == toks.len()).then_some(v)
}

/// One checked equality: two neighbouring sides that both evaluate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Equality {
    /// The left side's value.
    pub left: BigRational,
    /// The right side's value.
    pub right: BigRational,
    /// Whether they are equal.
    pub holds: bool,
}

/// A number a computation used: a literal on a side of an equality that has an operator
/// (`6` and `7` in `6 × 7 = 42`; the lone `42` is a result, not a use).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operand {
    /// Its value.
    pub value: BigRational,
    /// Whether a side evaluated earlier in the solution (this text or an earlier step) had
    /// this value: a quantity the solution computed itself.
    pub computed_before: bool,
}

/// What [`check_text`] found in one text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CalcReport {
    /// Every equality judged, in order.
    pub equalities: Vec<Equality>,
    /// The last quantity computed: the rightmost evaluated side of the last equality with one.
    pub last_value: Option<BigRational>,
    /// Every number the text's computations used, in order.
    pub operands: Vec<Operand>,
    /// What each computation (an equation with an operator) came to, in order.
    pub results: Vec<Computed>,
}

/// The result of one computation: the rightmost evaluated side of an equation with an
/// operator (`42` in `6 × 7 = 42`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Computed {
    /// Its value.
    pub value: BigRational,
    /// Whether a later computation (in this text or a later step) uses it.
    pub used_later: bool,
}

impl CalcReport {
    /// Equalities that hold.
    pub fn holding(&self) -> usize {
        self.equalities.iter().filter(|e| e.holds).count()
    }

    /// Equalities that do not.
    pub fn false_count(&self) -> usize {
        self.equalities.len() - self.holding()
    }
}

/// The runs of a text that contain `=`, each as its sides (token slices), and whether
/// anything came before the run (its first side, when a lone number, may then be the tail of a
/// phrase, as in `3 boxes of 4 = 12`, and is not judged).
fn equation_runs(toks: &[Tok]) -> Vec<(Vec<&[Tok]>, bool)> {
    let mut out = Vec::new();
    let mut start = 0;
    for run in toks.split(|t| *t == Tok::Break) {
        if run.contains(&Tok::Eq) {
            out.push((run.split(|t| *t == Tok::Eq).collect(), start > 0));
        }
        start += run.len() + 1;
    }
    out
}

/// A single variable alone on a side (`x`), for bindings.
fn lone_var(side: &[Tok]) -> Option<char> {
    match side {
        [Tok::Var(c)] => Some(*c),
        _ => None,
    }
}

/// Checks every equality in the texts, in order, with variables bound by `x = …` anywhere
/// before (a first pass over all texts binds each variable to the first value given).
fn check_all(texts: &[&str]) -> Vec<CalcReport> {
    let tokenized: Vec<Vec<Tok>> = texts.iter().map(|t| drop_units(lex(t))).collect();
    let mut env = Env::new();
    for toks in &tokenized {
        for (sides, _) in equation_runs(toks) {
            for pair in sides.windows(2) {
                if let [a, b] = pair {
                    for (v, other) in [(lone_var(a), b), (lone_var(b), a)] {
                        if let Some(v) = v.filter(|v| !env.contains_key(v)) {
                            if let Some(value) = evaluate(other, &env) {
                                env.insert(v, value);
                            }
                        }
                    }
                }
            }
        }
    }
    let mut computed: HashSet<BigRational> = HashSet::new();
    // Every operand and every result in reading order, to tell which results a later
    // computation uses: (position, value) and (position, report, index in its results).
    let mut uses: Vec<(usize, BigRational)> = Vec::new();
    let mut made: Vec<(usize, usize, usize)> = Vec::new();
    let mut position = 0usize;
    let mut reports: Vec<CalcReport> = tokenized
        .iter()
        .enumerate()
        .map(|(r, toks)| {
            let mut report = CalcReport::default();
            for (sides, preceded) in equation_runs(toks) {
                let values: Vec<Option<BigRational>> =
                    sides.iter().map(|s| evaluate(s, &env)).collect();
                let mut computes = false;
                for (side, value) in sides.iter().zip(&values) {
                    if value.is_some() && side.iter().any(|t| matches!(t, Tok::Op(_) | Tok::Frac)) {
                        computes = true;
                        for t in side.iter() {
                            if let Tok::Num(v) = t {
                                report.operands.push(Operand {
                                    value: v.clone(),
                                    computed_before: computed.contains(v),
                                });
                                position += 1;
                                uses.push((position, v.clone()));
                            }
                        }
                    }
                    if let Some(v) = value {
                        computed.insert(v.clone());
                    }
                }
                if let (true, Some(v)) = (computes, values.iter().rev().flatten().next()) {
                    position += 1;
                    made.push((position, r, report.results.len()));
                    report.results.push(Computed {
                        value: v.clone(),
                        used_later: false,
                    });
                }
                for (k, pair) in values.windows(2).enumerate() {
                    let fragment =
                        k == 0 && preceded && matches!(sides.first(), Some([Tok::Num(_)]));
                    if let [Some(left), Some(right)] = pair {
                        if !fragment {
                            report.equalities.push(Equality {
                                holds: left == right,
                                left: left.clone(),
                                right: right.clone(),
                            });
                        }
                    }
                }
                if let Some(v) = values.iter().rev().flatten().next() {
                    report.last_value = Some(v.clone());
                }
            }
            report
        })
        .collect();
    for (at, r, i) in made {
        if let Some(c) = reports.get_mut(r).and_then(|rep| rep.results.get_mut(i)) {
            c.used_later = uses.iter().any(|(p, v)| *p > at && *v == c.value);
        }
    }
    reports
}

/// Checks the equalities of one text.
///
/// ```
/// use ponder_verifiers::calc_check::check_text;
///
/// let r = check_text(r"She buys 3 packs: 3 × 12 = 36 pens, and $\frac{3}{4} \cdot 8 = 7$.");
/// assert_eq!((r.holding(), r.false_count()), (1, 1));
/// assert_eq!(r.last_value, Some(num_rational::BigRational::from_integer(7.into())));
/// ```
pub fn check_text(text: &str) -> CalcReport {
    check_all(&[text]).pop().unwrap_or_default()
}

/// The number an answer states, if it states exactly one (`45 minutes` → 45, `$1,200` → 1200,
/// `\frac{3}{4}` → 3/4, `x = 5` → 5, `5 + 7 = 12 dollars` → 12); `None` for anything else.
pub fn stated_number(answer: &str) -> Option<BigRational> {
    let toks = drop_units(lex(answer));
    let runs: Vec<&[Tok]> = toks
        .split(|t| *t == Tok::Break)
        .filter(|r| !r.is_empty())
        .collect();
    let [run] = runs.as_slice() else {
        return None;
    };
    // `x = 5`, `5 + 7 = 12`: the value stated last.
    let last = run.split(|t| *t == Tok::Eq).next_back()?;
    evaluate(last, &Env::new())
}

/// The calculation-check verifier (see the module docs).
///
/// ```
/// use ponder_verifiers::{calc_check::CalcCheck, Solution, Verifier};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let rt = tokio::runtime::Builder::new_current_thread().build()?;
/// let right = vec!["He buys 4 boxes of 6: 4 × 6 = 24 eggs.".to_string(),
///                  "He uses 5, so 24 - 5 = 19. The answer is 19.".to_string()];
/// let slip = vec!["He buys 4 boxes of 6: 4 × 6 = 26 eggs.".to_string(),
///                 "He uses 5, so 26 - 5 = 21. The answer is 21.".to_string()];
/// let check = CalcCheck::default();
/// let score = |steps: &[String]| rt.block_on(check.score(Solution {
///     problem: "", steps, complete: true , confidence: None}));
/// assert_eq!(score(&right)?.overall, 1.0);
/// let s = score(&slip)?;
/// assert_eq!(s.steps, vec![0.5, 1.0]);
/// assert_eq!(s.overall, 0.5);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CalcCheck {
    /// Each false equality multiplies its step's score by this (default 0.5).
    pub false_factor: f32,
    /// A finished solution whose final answer differs from the last quantity it computed has its
    /// overall score multiplied by this (default 0.5).
    pub answer_mismatch_factor: f32,
    /// Each number a step's computations use that is not grounded ([`grounding`]) multiplies
    /// its step's score by this (default 0.5).
    pub ungrounded_factor: f32,
    /// Each number of the question that a finished solution's computations never use
    /// multiplies its overall score by this (default 0.5).
    pub uncovered_factor: f32,
    /// Each result of a finished solution that nothing uses ([`unused_results`]) multiplies
    /// its overall score by this (default 0.5).
    pub unused_factor: f32,
}

impl Default for CalcCheck {
    fn default() -> Self {
        Self {
            false_factor: 0.5,
            answer_mismatch_factor: 0.5,
            ungrounded_factor: 0.5,
            uncovered_factor: 0.5,
            unused_factor: 0.5,
        }
    }
}

fn power(factor: f32, n: usize) -> f32 {
    factor
        .clamp(0.0, 1.0)
        .powi(i32::try_from(n).unwrap_or(i32::MAX))
}

impl CalcCheck {
    /// Scores texts (steps) without the async trait and without a question (no grounding or
    /// coverage): per-step scores and the overall score.
    pub fn score_steps(&self, steps: &[String], complete: bool) -> Scores {
        self.score_solution("", steps, complete)
    }

    /// Scores the steps of a solution to `question`: per-step scores (false equalities and
    /// ungrounded numbers) and the overall score (their product; for a finished solution also
    /// the final answer against the last quantity computed, the question's numbers left unused
    /// and the results nothing uses).
    pub fn score_solution(&self, question: &str, steps: &[String], complete: bool) -> Scores {
        let texts: Vec<&str> = steps.iter().map(String::as_str).collect();
        let reports = check_all(&texts);
        let numbers = QuestionNumbers::of(question);
        let step_scores: Vec<f32> = reports
            .iter()
            .map(|r| {
                let ungrounded = numbers.grounding(std::slice::from_ref(r)).ungrounded;
                power(self.false_factor, r.false_count())
                    * power(self.ungrounded_factor, ungrounded)
            })
            .collect();
        let mut overall: f32 = step_scores.iter().product();
        if complete {
            overall *= power(self.uncovered_factor, numbers.grounding(&reports).uncovered);
            let Some(answer) = extract_answer(&steps.join("\n")) else {
                return Scores {
                    steps: step_scores,
                    overall: NO_ANSWER_SCORE,
                    cost: 0,
                };
            };
            let last = reports.iter().rev().find_map(|r| r.last_value.clone());
            let stated = stated_number(&answer);
            overall *= power(
                self.unused_factor,
                unused_results(&reports, stated.as_ref()),
            );
            if let (Some(stated), Some(last)) = (stated, last) {
                if stated != last {
                    overall *= self.answer_mismatch_factor.clamp(0.0, 1.0);
                }
            }
        }
        Scores {
            steps: step_scores,
            overall: overall.clamp(0.0, 1.0),
            cost: 0,
        }
    }
}

#[async_trait::async_trait]
impl Verifier for CalcCheck {
    fn name(&self) -> &str {
        "calc"
    }

    async fn score(&self, solution: Solution<'_>) -> Result<Scores> {
        Ok(self.score_solution(solution.problem, solution.steps, solution.complete))
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests;
