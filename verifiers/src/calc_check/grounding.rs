//! Grounding: what a solution's computations compute *with*, against its question — the
//! question's numbers (digits and number words), which of them the computations use, the
//! numbers they use that the question does not give, and the results nothing uses. Owned here
//! so that `CalcCheck` and the learned verifier's features count the same things; this module
//! reads reports made by the parent's checker and must not evaluate text itself.

use num_rational::BigRational;

use super::{int, lex, CalcReport, Computed, Operand, Tok};
use crate::equivalence::forms::{cardinal, is_cardinal_word};

/// Numbers a computation may use without the question writing them: units of time
/// (60, 24, 7, 12, 52, 365), of length, mass and volume (10, 100, 1000), and the small factors
/// of halving, doubling and counting (1, 2).
pub const CONSTANTS: [i64; 11] = [1, 2, 7, 10, 12, 24, 52, 60, 100, 365, 1000];

/// Words that name a number by themselves (besides the words of whole numbers).
const OTHER_WORDS: [(&str, i64); 5] = [
    ("dozen", 12),
    ("twice", 2),
    ("double", 2),
    ("half", 2),
    ("triple", 3),
];

/// The numbers a question states: its literals (`$1,200`, `3/4` → 3 and 4, `25%` → 25) and
/// its number words (`four`, `twenty-five`, `a dozen`), each once.
///
/// ```
/// use ponder_verifiers::calc_check::question_numbers;
/// let n = question_numbers("Cows have four legs; 12 cows and twenty-five hens eat 3/4 of $1,200.");
/// let ints: Vec<i64> = n.iter().map(|v| v.to_integer().try_into().unwrap_or(-1)).collect();
/// assert_eq!(ints, vec![12, 3, 4, 1200, 25]);
/// ```
pub fn question_numbers(question: &str) -> Vec<BigRational> {
    QuestionNumbers::of(question).all
}

/// The numbers a question states, read once: all of them ([`question_numbers`]) and those
/// written in digits (the ones a finished solution should cover).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QuestionNumbers {
    /// Every number, literals first, then number words, each once.
    pub all: Vec<BigRational>,
    /// The literals (digits) only, each once.
    pub digits: Vec<BigRational>,
}

impl QuestionNumbers {
    /// Reads `question`'s numbers.
    pub fn of(question: &str) -> Self {
        let mut digits: Vec<BigRational> = Vec::new();
        for t in lex(question) {
            if let Tok::Num(v) = t {
                if !digits.contains(&v) {
                    digits.push(v);
                }
            }
        }
        let mut all = digits.clone();
        for v in number_words(question) {
            if !all.contains(&v) {
                all.push(v);
            }
        }
        Self { all, digits }
    }

    /// The [`Grounding`] of a solution (its steps' reports, in order) against these numbers.
    /// A question without numbers grounds nothing: everything is zero.
    pub fn grounding(&self, reports: &[CalcReport]) -> Grounding {
        if self.all.is_empty() {
            return Grounding::default();
        }
        let operands: Vec<&Operand> = reports.iter().flat_map(|r| &r.operands).collect();
        let constant = |v: &BigRational| CONSTANTS.iter().any(|c| *v == int(*c));
        Grounding {
            ungrounded: operands
                .iter()
                .filter(|o| {
                    !o.computed_before && !self.all.contains(&o.value) && !constant(&o.value)
                })
                .count(),
            question_numbers: self.digits.len(),
            uncovered: self
                .digits
                .iter()
                .filter(|d| !operands.iter().any(|o| o.value == **d))
                .count(),
        }
    }
}

/// The numbers a text names in words (`four`, `twenty-five`, `a dozen`), in order, repeats
/// included.
fn number_words(text: &str) -> Vec<BigRational> {
    let mut out = Vec::new();
    let lower = text.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_ascii_alphabetic())
        .filter(|w| !w.is_empty())
        .collect();
    let whole = |ws: &[&str]| cardinal(ws).and_then(|v| i64::try_from(v).ok()).map(int);
    let mut i = 0;
    while let Some(w) = words.get(i) {
        // A run of number words is one number (`twenty five`, `one hundred`), or, when it is
        // not one grammatical number (`two three`), each word is its own.
        let run = words
            .get(i..)
            .unwrap_or_default()
            .iter()
            .take_while(|w| is_cardinal_word(w))
            .count();
        if run > 0 {
            let ws = words.get(i..i + run).unwrap_or_default();
            match whole(ws) {
                Some(v) => out.push(v),
                None => out.extend(ws.iter().filter_map(|w| whole(&[w]))),
            }
            i += run;
            continue;
        }
        if let Some((_, v)) = OTHER_WORDS.iter().find(|(name, _)| name == w) {
            out.push(int(*v));
        }
        i += 1;
    }
    out
}

/// How a solution's computations relate to its question's numbers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Grounding {
    /// Numbers used that are neither in the question, nor computed before, nor [`CONSTANTS`].
    pub ungrounded: usize,
    /// The question's numbers written in digits.
    pub question_numbers: usize,
    /// Of those, how many no computation uses.
    pub uncovered: usize,
}

/// The [`Grounding`] of a solution (its steps' reports, in order) against `question`
/// ([`QuestionNumbers::grounding`] for many solutions to one question).
pub fn grounding(question: &str, reports: &[CalcReport]) -> Grounding {
    QuestionNumbers::of(question).grounding(reports)
}

/// Computations of a finished solution whose result nothing uses: no later computation takes
/// it and it is not the final answer (`answer`, the number the answer states). The last result
/// is never counted: whether the answer is it is the final-answer check's question. A solution
/// that computes two subtotals and answers with the second leaves the first unused.
pub fn unused_results(reports: &[CalcReport], answer: Option<&BigRational>) -> usize {
    let results: Vec<&Computed> = reports.iter().flat_map(|r| &r.results).collect();
    let before_last = results.len().saturating_sub(1);
    results
        .iter()
        .take(before_last)
        .filter(|c| !c.used_later && answer != Some(&c.value))
        .count()
}
