//! Answer forms that are not plain values: numerals in another base, multiple-choice letters
//! and numbers written in words. Each is decided on the normalised text, before any parsing.
//!
//! - A numeral in base `b ≠ 10` (`1011_2`, `3A_{16}`, `(204)_5`, `204_{\text{five}}`) is the
//!   digits the question asked for: it equals the same digits with the same base or with no
//!   subscript at all, and nothing else — not its decimal value, not the digits in another base.
//!   A gold in base ten takes a prediction in another base by the value it names.
//! - A choice `(B)`, with or without its label (`(B) Parabola`), equals `B`, `(B)`, `\text{(B)}`,
//!   `Option B`, or the label itself; another letter, or a contradicting label, is wrong.
//! - Number words (`seven`, `twenty-one`, `one hundred and five`, `negative three`, `one half`,
//!   `three quarters`, `two and a half`) read as the number they name; anything else in words
//!   is text.
//!
//! Invariants: the choice and word rules are symmetric; the base rule is not — the gold's form
//! decides (a gold `11` accepts `1011_2`, which is eleven; a gold `1011_2` rejects `11`, which
//! is not the base-2 numeral asked for). Every function is total and linear in its input.
#![deny(clippy::indexing_slicing)]

use num_bigint::BigInt;
use num_rational::BigRational;

/// A numeral in a base other than ten: its sign, its digits (upper case, no leading zeros) and
/// its base (2–36).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BaseNumeral {
    negative: bool,
    digits: String,
    base: u32,
}

/// Number words for bases written in words (`_{\text{five}}`).
const BASE_WORDS: &[(&str, u32)] = &[
    ("two", 2),
    ("three", 3),
    ("four", 4),
    ("five", 5),
    ("six", 6),
    ("seven", 7),
    ("eight", 8),
    ("nine", 9),
    ("eleven", 11),
    ("twelve", 12),
    ("thirteen", 13),
    ("fourteen", 14),
    ("fifteen", 15),
    ("sixteen", 16),
];

/// Strips one pair of `(…)` or `{…}` around `s`.
fn unwrap_group(s: &str) -> &str {
    let s = s.trim();
    s.strip_prefix('(')
        .and_then(|t| t.strip_suffix(')'))
        .or_else(|| s.strip_prefix('{').and_then(|t| t.strip_suffix('}')))
        .map_or(s, str::trim)
}

/// `digits` upper-cased without leading zeros, when every character is a digit of `base`.
fn canonical_digits(digits: &str, base: u32) -> Option<String> {
    let ok = !digits.is_empty()
        && digits
            .chars()
            .all(|c| c.to_digit(36).is_some_and(|d| d < base));
    if !ok {
        return None;
    }
    let trimmed = digits.trim_start_matches('0');
    Some(if trimmed.is_empty() {
        "0".to_string()
    } else {
        trimmed.to_ascii_uppercase()
    })
}

/// Reads a normalised answer as a numeral with a base subscript other than ten.
pub(crate) fn base_numeral(norm: &str) -> Option<BaseNumeral> {
    let (negative, body) = match norm.trim().strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, norm.trim()),
    };
    let (head, sub) = body.rsplit_once('_')?;
    let mut sub = unwrap_group(sub);
    for _ in 0..2 {
        sub = unwrap_group(sub);
    }
    let base = match sub.parse::<u32>() {
        Ok(b) => b,
        Err(_) => BASE_WORDS
            .iter()
            .find(|(w, _)| sub.eq_ignore_ascii_case(w))
            .map(|(_, b)| *b)?,
    };
    if !(2..=36).contains(&base) || base == 10 {
        return None;
    }
    let head = unwrap_group(head);
    let digits = canonical_digits(head, base)?;
    Some(BaseNumeral {
        negative,
        digits,
        base,
    })
}

/// Whether `norm` is the digits of `numeral` written without a subscript.
fn plain_digits_match(numeral: &BaseNumeral, norm: &str) -> bool {
    let (negative, body) = match norm.trim().strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, norm.trim()),
    };
    negative == numeral.negative
        && canonical_digits(unwrap_group(body), numeral.base).as_deref()
            == Some(numeral.digits.as_str())
}

impl BaseNumeral {
    /// The number the numeral denotes.
    pub(crate) fn value(&self) -> Option<BigRational> {
        let n = BigInt::parse_bytes(self.digits.as_bytes(), self.base)?;
        Some(BigRational::from_integer(if self.negative {
            -n
        } else {
            n
        }))
    }
}

/// How a gold answer written in a base other than ten decides (see the module docs).
pub(crate) enum BaseVerdict {
    /// Neither answer is a numeral in another base.
    NotBase,
    /// The gold is: the verdict, from the digits.
    Decided(bool),
    /// Only the prediction is (`1011_2` for a gold `11`): it names a number, compare values.
    PredValue(BigRational),
}

/// The gold's form decides: a gold in base `b` wants the digits (with or without the
/// subscript); a gold in base ten accepts a prediction in another base by its value.
pub(crate) fn base_verdict(gold: &str, pred: &str) -> BaseVerdict {
    match (base_numeral(gold), base_numeral(pred)) {
        (None, None) => BaseVerdict::NotBase,
        (Some(x), Some(y)) => BaseVerdict::Decided(x == y),
        (Some(x), None) => BaseVerdict::Decided(plain_digits_match(&x, pred)),
        (None, Some(y)) => match y.value() {
            Some(v) => BaseVerdict::PredValue(v),
            None => BaseVerdict::Decided(false),
        },
    }
}

/// Case- and space-insensitive key for text answers.
pub(crate) fn text_key(s: &str) -> String {
    s.chars()
        .filter(|c| !c.is_whitespace() && !matches!(c, '{' | '}' | '\\' | '.'))
        .flat_map(char::to_lowercase)
        .collect()
}

/// `(B)` or `(B) label` at the start of a normalised answer: the letter and the label (empty
/// when there is none).
fn labelled_choice(norm: &str) -> Option<(char, &str)> {
    let rest = norm.trim().strip_prefix('(')?;
    let mut chars = rest.chars();
    let letter = chars.next().filter(char::is_ascii_uppercase)?;
    let label = chars.as_str().strip_prefix(')')?;
    Some((letter, label.trim()))
}

/// The choice letter an answer names: `(B)…`, `B`, `B)…`, `Option B`, `Choice (B)`.
fn choice_letter(norm: &str) -> Option<char> {
    let mut t = norm.trim();
    for prefix in ["option", "choice", "answer"] {
        if t.len() > prefix.len() && t.is_char_boundary(prefix.len()) {
            let (head, tail) = t.split_at(prefix.len());
            if head.eq_ignore_ascii_case(prefix) {
                t = tail.trim_start_matches([' ', ':']);
            }
        }
    }
    if let Some((letter, _)) = labelled_choice(t) {
        return Some(letter);
    }
    let mut chars = t.chars();
    let letter = chars.next().filter(char::is_ascii_uppercase)?;
    let rest = chars.as_str();
    (rest.is_empty() || rest.starts_with(')')).then_some(letter)
}

/// `Some(verdict)` when either answer is a labelled choice `(X)…` (see the module docs).
pub(crate) fn choice_verdict(a: &str, b: &str) -> Option<bool> {
    let (la, lb) = (labelled_choice(a), labelled_choice(b));
    if la.is_none() && lb.is_none() {
        return None;
    }
    let label_of = |l: Option<(char, &str)>| l.map(|(_, label)| text_key(label));
    let (label_a, label_b) = (label_of(la), label_of(lb));
    let labels_agree = match (&label_a, &label_b) {
        (Some(x), Some(y)) if !x.is_empty() && !y.is_empty() => x == y,
        _ => true,
    };
    Some(match (choice_letter(a), choice_letter(b)) {
        (Some(x), Some(y)) => x == y && labels_agree,
        // One side names no letter: it may be the label itself.
        _ => {
            let (label, other) = match (label_a, label_b) {
                (Some(l), _) if !l.is_empty() => (l, b),
                (_, Some(l)) => (l, a),
                _ => return Some(false),
            };
            !label.is_empty() && label == text_key(other)
        }
    })
}

const UNITS: &[&str] = &[
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
];
const TENS: &[(&str, u64)] = &[
    ("twenty", 20),
    ("thirty", 30),
    ("forty", 40),
    ("fifty", 50),
    ("sixty", 60),
    ("seventy", 70),
    ("eighty", 80),
    ("ninety", 90),
];
const SCALES: &[(&str, u64)] = &[
    ("thousand", 1_000),
    ("million", 1_000_000),
    ("billion", 1_000_000_000),
];
const DENOMINATORS: &[(&str, u64)] = &[
    ("half", 2),
    ("halves", 2),
    ("third", 3),
    ("thirds", 3),
    ("quarter", 4),
    ("quarters", 4),
    ("fourth", 4),
    ("fourths", 4),
    ("fifth", 5),
    ("fifths", 5),
    ("sixth", 6),
    ("sixths", 6),
    ("seventh", 7),
    ("sevenths", 7),
    ("eighth", 8),
    ("eighths", 8),
    ("ninth", 9),
    ("ninths", 9),
    ("tenth", 10),
    ("tenths", 10),
    ("twelfth", 12),
    ("twelfths", 12),
    ("hundredth", 100),
    ("hundredths", 100),
];

/// Whether `w` (lower case) is a word of a whole number: a unit, a ten, `hundred` or a scale.
pub(crate) fn is_cardinal_word(w: &str) -> bool {
    UNITS.contains(&w)
        || TENS.iter().any(|(t, _)| *t == w)
        || w == "hundred"
        || SCALES.iter().any(|(t, _)| *t == w)
}

/// A whole number in words (`twenty one`, `one hundred five`, `two thousand twenty`), with the
/// grammar checked: no `two three`, no `hundred` without a digit before it.
pub(crate) fn cardinal(words: &[&str]) -> Option<u64> {
    if words == ["zero"] {
        return Some(0);
    }
    let (mut total, mut chunk) = (0u64, 0u64);
    let (mut hundreds, mut tens, mut units) = (false, false, false);
    let mut last_scale = u64::MAX;
    for w in words {
        if let Some(v) = UNITS.iter().position(|u| u == w).filter(|v| *v > 0) {
            let v = v as u64;
            let teen = v >= 10;
            if units || (teen && tens) {
                return None;
            }
            chunk += v;
            units = true;
            tens |= teen;
        } else if let Some((_, v)) = TENS.iter().find(|(t, _)| t == w) {
            if tens || units {
                return None;
            }
            chunk += v;
            tens = true;
        } else if *w == "hundred" {
            if hundreds || tens || !(1..=9).contains(&chunk) {
                return None;
            }
            chunk *= 100;
            hundreds = true;
            units = false;
        } else if let Some((_, s)) = SCALES.iter().find(|(t, _)| t == w) {
            if chunk == 0 || *s >= last_scale {
                return None;
            }
            total += chunk * s;
            last_scale = *s;
            chunk = 0;
            (hundreds, tens, units) = (false, false, false);
        } else {
            return None;
        }
    }
    (total + chunk > 0).then_some(total + chunk)
}

/// The number a normalised answer names in English words, if it is one.
pub(crate) fn number_words(norm: &str) -> Option<BigRational> {
    let lower = norm.trim().to_ascii_lowercase();
    if lower.is_empty()
        || !lower
            .chars()
            .all(|c| c.is_ascii_lowercase() || " -,".contains(c))
    {
        return None;
    }
    let mut words: Vec<&str> = lower
        .split([' ', '-', ','])
        .filter(|w| !w.is_empty() && *w != "and")
        .collect();
    let negative = matches!(words.first(), Some(&("negative" | "minus")));
    if negative {
        words.remove(0);
    }
    let value = match words.split_last() {
        Some((last, init)) if DENOMINATORS.iter().any(|(d, _)| d == last) => {
            let den = DENOMINATORS
                .iter()
                .find(|(d, _)| d == last)
                .map(|(_, v)| *v)?;
            match init {
                // `a half`, `one half`, `two and a half` (the `and` dropped above).
                [.., "a"] | [] => {
                    let whole = match init.split_last() {
                        Some((_, rest)) if !rest.is_empty() => cardinal(rest)?,
                        _ => 0,
                    };
                    if init.is_empty() && !matches!(*last, "half") {
                        return None;
                    }
                    BigRational::new(BigInt::from(whole * den + 1), BigInt::from(den))
                }
                numerator => {
                    let n = cardinal(numerator)?;
                    // `one third` but not `two third`; `two thirds` but not `one thirds`.
                    let plural = last.ends_with('s');
                    if (n == 1) == plural {
                        return None;
                    }
                    BigRational::new(BigInt::from(n), BigInt::from(den))
                }
            }
        }
        _ => BigRational::from_integer(BigInt::from(cardinal(&words)?)),
    };
    Some(if negative { -value } else { value })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(n: i64, d: i64) -> Option<BigRational> {
        Some(BigRational::new(BigInt::from(n), BigInt::from(d)))
    }

    fn decided(gold: &str, pred: &str) -> Option<bool> {
        match base_verdict(gold, pred) {
            BaseVerdict::Decided(v) => Some(v),
            _ => None,
        }
    }

    #[test]
    fn bases() {
        assert_eq!(decided("1011_2", "1011"), Some(true));
        assert_eq!(decided("1011_2", "11"), Some(false));
        assert_eq!(decided("1011_2", "1011_3"), Some(false));
        assert_eq!(
            decided("1011_2", "13_8"),
            Some(false),
            "the base asked decides"
        );
        assert_eq!(decided("3A_{16}", "3a"), Some(true));
        assert_eq!(decided("3A_{16}", "58"), Some(false));
        assert_eq!(decided("204_5", "(204)_{five}"), Some(true));
        assert_eq!(decided("204_5", "0204"), Some(true));
        assert!(
            matches!(base_verdict("11", "1011_2"), BaseVerdict::PredValue(v) if v == q(11, 1).unwrap())
        );
        assert!(matches!(
            base_verdict("11_{10}", "11"),
            BaseVerdict::NotBase
        ));
        assert!(matches!(base_verdict("x_2", "x"), BaseVerdict::NotBase));
        assert!(
            matches!(base_verdict("129_2", "129"), BaseVerdict::NotBase),
            "9: no binary digit"
        );
    }

    #[test]
    fn choices() {
        assert_eq!(choice_verdict("(B)", "B"), Some(true));
        assert_eq!(choice_verdict("(B)", "(B)Parabola"), Some(true));
        assert_eq!(choice_verdict("(B)Parabola", "Parabola"), Some(true));
        assert_eq!(choice_verdict("(B)Parabola", "(B)Circle"), Some(false));
        assert_eq!(choice_verdict("(B)", "C"), Some(false));
        assert_eq!(choice_verdict("(B)", "Option B"), Some(true));
        assert_eq!(choice_verdict("(B)", "Parabola"), Some(false));
        assert_eq!(choice_verdict("B", "b"), None);
    }

    #[test]
    fn words() {
        assert_eq!(number_words("seven"), q(7, 1));
        assert_eq!(number_words("Twenty-one"), q(21, 1));
        assert_eq!(number_words("one hundred, five"), q(105, 1));
        assert_eq!(number_words("two thousand twenty"), q(2020, 1));
        assert_eq!(number_words("negative three"), q(-3, 1));
        assert_eq!(number_words("one half"), q(1, 2));
        assert_eq!(number_words("three quarters"), q(3, 4));
        assert_eq!(number_words("two, a half"), q(5, 2));
        assert_eq!(number_words("zero"), q(0, 1));
        for not in [
            "two three",
            "one, two",
            "hundred",
            "even",
            "third",
            "one thirds",
            "",
        ] {
            assert_eq!(number_words(not), None, "{not:?}");
        }
    }
}
