//! Property tests: extraction, normalisation, parsing and grading never panic on arbitrary
//! strings; equivalence is reflexive and symmetric on generated expressions and on every answer
//! form MATH writes (vectors, named components, number words, inequalities, choices, units), an
//! answer is equivalent to its own normalisation, equivalence holds across rewrites that keep the
//! value, and no rule makes a number equal to a different number.
//!
//! Where equivalence is *not* symmetric, by design: a numeral in another base. The gold's form
//! decides (`equivalent("11", "1011_2")`, the number eleven, but not `equivalent("1011_2",
//! "11")`, which is not the base-2 numeral asked for); `bases_follow_the_gold` pins that down.
//! And `x > -1 \text{ and } x < 4` is an interval while its normalised text `x>-1,x<4` is a
//! list (normalising drops the `and`), so the round trip excludes `and`-joined inequalities.

use ponder_verifiers::{equivalent, extract_answer, grade, latex, majority_vote, normalize_answer};
use proptest::prelude::*;

/// Strings made of the pieces graders trip on, so the fuzzing reaches deep into the code.
fn latexish() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("\\boxed{"),
        Just("\\fbox "),
        Just("{"),
        Just("}"),
        Just("\\{"),
        Just("\\}"),
        Just("$"),
        Just("$$"),
        Just("</think>"),
        Just("<think>"),
        Just("####"),
        Just("\\frac"),
        Just("\\dfrac"),
        Just("\\sqrt"),
        Just("["),
        Just("]"),
        Just("("),
        Just(")"),
        Just(","),
        Just("^"),
        Just("_"),
        Just("\\pi"),
        Just("\\pm"),
        Just("\\cdot"),
        Just("\\infty"),
        Just("\\cup"),
        Just("\\left("),
        Just("\\right)"),
        Just("\\text{"),
        Just(" cm"),
        Just("\\%"),
        Just("^\\circ"),
        Just("x"),
        Just("="),
        Just("\\in"),
        Just("-"),
        Just("+"),
        Just("/"),
        Just("!"),
        Just("|"),
        Just("&"),
        Just("\\\\"),
        Just("\\begin{pmatrix}"),
        Just("\\end{pmatrix}"),
        Just("The answer is "),
        Just(". "),
        Just("\n"),
        Just("é"),
        Just("1"),
        Just("23"),
        Just("0.5"),
        Just("9999999999"),
        Just("1,000"),
        Just("\\"),
        Just("\\log_"),
        Just("\\binom"),
        Just("e"),
        Just("Monday"),
        Just(" or "),
        Just(" and "),
        Just("\\langle"),
        Just("\\rangle"),
        Just("_{16}"),
        Just("_2"),
        Just("3A"),
        Just("\\ne"),
        Just("<"),
        Just("\\le"),
        Just("I"),
        Just("\\mathbb{R}"),
        Just("(B) "),
        Just("twenty-"),
        Just("one half"),
        Just("\\text{ m}"),
        Just("\\lor"),
        Just("m = "),
    ];
    prop::collection::vec(piece, 0..40).prop_map(|v| v.concat())
}

/// A scalar expression in the LaTeX the parser reads.
fn scalar() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        (0u32..50).prop_map(|n| n.to_string()),
        (1u32..20, 1u32..20).prop_map(|(a, b)| format!("\\frac{{{a}}}{{{b}}}")),
        (0u32..100).prop_map(|n| format!("{}.{}", n / 10, n % 10)),
        Just("\\pi".to_string()),
        Just("e".to_string()),
        Just("x".to_string()),
        Just("y".to_string()),
        (2u32..30).prop_map(|n| format!("\\sqrt{{{n}}}")),
    ];
    leaf.prop_recursive(4, 24, 2, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("{a}+{b}")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("{a}-({b})")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a})\\cdot({b})")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("\\frac{{{a}}}{{{b}}}")),
            (inner.clone(), 0u32..4).prop_map(|(a, n)| format!("({a})^{{{n}}}")),
            inner.clone().prop_map(|a| format!("-({a})")),
            inner.clone().prop_map(|a| format!("\\sqrt{{{a}}}")),
            (inner.clone(), inner).prop_map(|(a, b)| format!("2({a}) + {b}")),
        ]
    })
}

/// An answer of any shape: a scalar, a tuple, a set, an interval, a ± pair, a matrix.
fn answer() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => scalar(),
        1 => (scalar(), scalar()).prop_map(|(a, b)| format!("({a}, {b})")),
        1 => (scalar(), scalar()).prop_map(|(a, b)| format!("\\{{{a}, {b}\\}}")),
        1 => (scalar(), scalar(), any::<bool>()).prop_map(|(a, b, c)| {
            format!("[{a}, {b}{}", if c { "]" } else { ")" })
        }),
        1 => (scalar(), scalar()).prop_map(|(a, b)| format!("{a} \\pm {b}")),
        1 => (scalar(), scalar()).prop_map(|(a, b)| {
            format!("\\begin{{pmatrix}} {a} & 1 \\\\ 0 & {b} \\end{{pmatrix}}")
        }),
    ]
}

/// English words for 0..=999.
fn words(n: u32) -> String {
    const UNITS: [&str; 20] = [
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
    const TENS: [&str; 10] = [
        "", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety",
    ];
    let below_100 = |n: u32| -> String {
        match (n / 10, n % 10) {
            (0 | 1, _) => UNITS[n as usize].to_string(),
            (t, 0) => TENS[t as usize].to_string(),
            (t, u) => format!("{}-{}", TENS[t as usize], UNITS[u as usize]),
        }
    };
    match (n / 100, n % 100) {
        (0, r) => below_100(r),
        (h, 0) => format!("{} hundred", UNITS[h as usize]),
        (h, r) => format!("{} hundred {}", UNITS[h as usize], below_100(r)),
    }
}

/// An integer written in one of the ways a model or a gold answer writes it (never in another
/// base: see `bases_follow_the_gold`).
fn integer_as(n: i64, form: u8) -> String {
    match form % 8 {
        0 => n.to_string(),
        1 => format!("\\boxed{{{n}}}"),
        2 => format!("${n}$."),
        3 if (0..1000).contains(&n) => format!("\\text{{{}}}", words(n as u32)),
        3 | 4 => format!("x = {n}"),
        5 if n >= 0 => format!("{n:03}"),
        5 => format!("\\frac{{{}}}{{2}}", 2 * n),
        6 => format!("{n} \\text{{ cm}}"),
        _ => format!("{n}.0"),
    }
}

/// An answer in one of the forms MATH writes beyond plain expressions.
fn math_form() -> impl Strategy<Value = String> {
    let n = -30i64..30;
    prop_oneof![
        (n.clone(), n.clone(), n.clone()).prop_map(|(a, b, c)| format!(
            "\\begin{{pmatrix}} {a} \\\\ {b} \\\\ {c} \\end{{pmatrix}}"
        )),
        (n.clone(), n.clone(), n.clone()).prop_map(|(a, b, c)| format!("({a}, {b}, {c})")),
        (n.clone(), n.clone(), n.clone())
            .prop_map(|(a, b, c)| format!("a = {a}, b = {b}, c = {c}")),
        (n.clone(), n.clone()).prop_map(|(k, a)| format!(
            "{k}\\begin{{pmatrix}} {a} & 1 \\\\ 0 & {a} \\end{{pmatrix}}"
        )),
        n.clone().prop_map(|k| format!("{k}I")),
        n.clone()
            .prop_map(|k| format!("\\begin{{pmatrix}} {k} & 0 \\\\ 0 & {k} \\end{{pmatrix}}")),
        (0u32..1000).prop_map(|k| format!("\\text{{{}}}", words(k))),
        (0u32..1000).prop_map(|k| k.to_string()),
        (n.clone(), n.clone()).prop_map(|(a, b)| format!("x < {a} \\text{{ or }} x > {b}")),
        (n.clone(), n.clone()).prop_map(|(a, b)| format!("(-\\infty, {a}) \\cup ({b}, \\infty)")),
        (n.clone(), n.clone()).prop_map(|(a, b)| format!("{a} \\le x < {b}")),
        (n.clone(), n.clone()).prop_map(|(a, b)| format!("[{a}, {b})")),
        n.clone().prop_map(|a| format!("x \\ne {a}")),
        (0u8..5, "[A-Za-z ]{0,8}")
            .prop_map(|(c, label)| { format!("\\text{{({}) {label}}}", char::from(b'A' + c)) }),
        (0u8..5).prop_map(|c| char::from(b'A' + c).to_string()),
        (
            n.clone(),
            prop_oneof![Just("cm"), Just("m"), Just("inches"), Just("feet")]
        )
            .prop_map(|(a, u)| format!("{a} \\text{{ {u}}}")),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn math_forms_are_reflexive_and_symmetric(a in math_form(), b in math_form()) {
        prop_assert!(equivalent(&a, &a), "{a:?} is not equivalent to itself");
        prop_assert_eq!(equivalent(&a, &b), equivalent(&b, &a), "{:?} vs {:?}", a, b);
    }

    #[test]
    fn an_answer_is_equivalent_to_its_normalisation(a in prop_oneof![answer(), math_form()]) {
        let once = normalize_answer(&a);
        prop_assume!(!once.is_empty());
        prop_assert!(equivalent(&a, &once), "{a:?} vs its normalisation {once:?}");
        prop_assert!(equivalent(&once, &a), "{once:?} vs {a:?}");
        prop_assert!(equivalent(&once, &normalize_answer(&once)));
    }

    #[test]
    fn no_rule_makes_different_numbers_equal(
        p in -1200i64..1200, q in -1200i64..1200, fp in any::<u8>(), fq in any::<u8>()
    ) {
        let (a, b) = (integer_as(p, fp), integer_as(q, fq));
        prop_assert_eq!(equivalent(&a, &b), p == q, "{:?} vs {:?}", a, b);
        prop_assert_eq!(grade(&a, &format!("The answer is $\\boxed{{{b}}}$.")).equivalent, p == q);
    }

    #[test]
    fn vectors_equal_only_with_the_same_entries_in_order(
        v in prop::collection::vec(-20i64..20, 2..4),
        w in prop::collection::vec(-20i64..20, 2..4),
        fv in 0u8..4, fw in 0u8..4,
    ) {
        let as_form = |v: &[i64], f: u8| -> String {
            let items: Vec<String> = v.iter().map(i64::to_string).collect();
            match f {
                0 => format!("({})", items.join(", ")),
                1 => format!("\\begin{{pmatrix}} {} \\end{{pmatrix}}", items.join(" \\\\ ")),
                2 => format!("\\langle {} \\rangle", items.join(", ")),
                _ => {
                    let named: Vec<String> =
                        items.iter().enumerate().map(|(i, x)| format!("x_{i} = {x}")).collect();
                    named.join(", ")
                }
            }
        };
        // A named list against a named list is a list of values, not a tuple: skip that pair.
        prop_assume!(!(fv == 3 && fw == 3));
        let (a, b) = (as_form(&v, fv), as_form(&w, fw));
        prop_assert_eq!(equivalent(&a, &b), v == w, "{:?} vs {:?}", a, b);
    }

    #[test]
    fn bases_follow_the_gold(n in 0u32..5000, base in 2u32..17, other in 2u32..17) {
        let digits = to_base(n, base);
        let numeral = if base == 10 { digits.clone() } else { format!("{digits}_{{{base}}}") };
        // The digits, with or without the subscript, are the numeral asked for.
        prop_assert!(equivalent(&numeral, &digits));
        // A base-ten gold takes the numeral by its value.
        prop_assert!(equivalent(&n.to_string(), &numeral));
        // A base-b gold rejects the decimal value unless it is written with the same digits,
        // and the same digits in another base.
        prop_assert_eq!(equivalent(&numeral, &n.to_string()), digits == n.to_string());
        if other != base && base != 10 && other != 10 {
            let elsewhere = format!("{digits}_{{{other}}}");
            prop_assert!(!equivalent(&numeral, &elsewhere));
        }
    }

    #[test]
    fn nothing_panics_on_arbitrary_strings(s in ".*") {
        let _ = extract_answer(&s);
        let _ = normalize_answer(&s);
        let _ = latex::parse(&s);
        let _ = grade(&s, &s);
        let _ = equivalent(&s, "1");
    }

    #[test]
    fn nothing_panics_on_latexish_strings(s in latexish(), t in latexish()) {
        let _ = extract_answer(&s);
        let _ = latex::parse(&normalize_answer(&s));
        let _ = grade(&s, &t);
        let _ = equivalent(&s, &t);
        let _ = majority_vote([s.as_str(), t.as_str()]);
    }

    #[test]
    fn equivalence_is_reflexive(a in answer()) {
        prop_assert!(equivalent(&a, &a));
        // Reflexive through presentation too: boxed, in math mode, spaced out.
        let boxed = format!("\\boxed{{{a}}}");
        let dollars = format!("$ {a} $");
        prop_assert!(equivalent(&a, &boxed));
        prop_assert!(equivalent(&dollars, &a));
    }

    #[test]
    fn normalisation_is_idempotent(a in answer()) {
        let once = normalize_answer(&a);
        prop_assert_eq!(normalize_answer(&once), once);
    }

    #[test]
    fn equivalence_is_symmetric(a in answer(), b in answer()) {
        prop_assert_eq!(equivalent(&a, &b), equivalent(&b, &a));
    }

    #[test]
    fn equivalence_survives_value_preserving_rewrites(a in scalar()) {
        // Only where `a` is defined: an undefined value equals nothing but its own text.
        let (plus_zero, zero_plus) = (format!("{a}+0"), format!("0+{a}"));
        prop_assume!(equivalent(&plus_zero, &zero_plus));
        let times_one = format!("({a})\\cdot 1");
        let halved_double = format!("\\frac{{2({a})}}{{2}}");
        let (sum, double) = (format!("{a}+{a}"), format!("2({a})"));
        prop_assert!(equivalent(&a, &times_one));
        prop_assert!(equivalent(&a, &halved_double));
        prop_assert!(equivalent(&sum, &double));
    }

    #[test]
    fn fractions_equal_their_scalings(p in -500i64..500, q in 1i64..500, k in 1i64..50) {
        let a = format!("\\frac{{{p}}}{{{q}}}");
        let b = format!("\\frac{{{}}}{{{}}}", p * k, q * k);
        prop_assert!(equivalent(&a, &b));
        let c = format!("\\frac{{{}}}{{{}}}", p * k + 1, q * k);
        prop_assert!(!equivalent(&a, &c));
    }
}

/// `n` written in base `base` (digits 0-9 then A-F).
fn to_base(mut n: u32, base: u32) -> String {
    let mut out = Vec::new();
    loop {
        // `from_digit` is `None` only for a digit ≥ base, which `n % base` never is.
        out.push(std::char::from_digit(n % base, base).map_or('?', |c| c.to_ascii_uppercase()));
        n /= base;
        if n == 0 {
            break;
        }
    }
    out.iter().rev().collect()
}

#[test]
fn long_chains_are_refused_not_overflowed() {
    let chain = vec!["1"; 900].join("+");
    assert!(latex::parse(&chain).is_err());
    assert!(!equivalent(&chain, "900"));
    let short = vec!["1"; 100].join("+");
    assert!(equivalent(&short, "100"));
}

/// Outputs made of thinking tags, pieces of them, whitespace and multi-byte text.
fn thinking_output() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        prop::sample::select(vec![
            "<think>", "</think>", "<thi", "nk>", "</", "\n", "  ", "é", "答", "4", "x < y",
        ])
        .prop_map(String::from),
        "[a-z ]{0,6}",
    ];
    prop::collection::vec(piece, 0..16).prop_map(|p| p.concat())
}

proptest! {
    /// A streamed output split chunk by chunk, cut anywhere (inside a tag or a character's
    /// bytes are never cut: chunks are whole characters, as a tokenizer's decoded text is),
    /// gives the same thinking and content as the whole output split at once; an output with
    /// no block is all content, untouched.
    #[test]
    fn a_streamed_split_equals_the_whole_split(
        text in thinking_output(),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
        opened in any::<bool>(),
    ) {
        let parser = ponder_verifiers::ReasoningParser::think();
        let whole = parser.split(&text, opened);
        let bounds: Vec<usize> = (0..=text.len()).filter(|i| text.is_char_boundary(*i)).collect();
        let mut at: Vec<usize> = cuts.iter().map(|c| bounds[c.index(bounds.len())]).collect();
        at.push(0);
        at.push(text.len());
        at.sort_unstable();
        at.dedup();
        let mut stream = parser.stream(opened);
        let (mut reasoning, mut content) = (String::new(), String::new());
        for w in at.windows(2) {
            let d = stream.push(&text[w[0]..w[1]]);
            reasoning.push_str(&d.reasoning);
            content.push_str(&d.content);
        }
        let d = stream.finish();
        reasoning.push_str(&d.reasoning);
        content.push_str(&d.content);
        prop_assert_eq!(&reasoning, &whole.reasoning);
        prop_assert_eq!(&content, &whole.content);
        prop_assert_eq!(stream.closed(), whole.closed);
        // Without a block, nothing is taken from the output.
        prop_assert!(whole.reasoning.len() + whole.content.len() <= text.len());
        if !whole.thought {
            prop_assert_eq!(&whole.content, &text);
        }
    }
}
