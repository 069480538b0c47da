//! Property tests: extraction, normalisation, parsing and grading never panic on arbitrary
//! strings; equivalence is reflexive and symmetric on generated expressions, and holds across
//! rewrites that keep the value.

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

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

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

#[test]
fn long_chains_are_refused_not_overflowed() {
    let chain = vec!["1"; 900].join("+");
    assert!(latex::parse(&chain).is_err());
    assert!(!equivalent(&chain, "900"));
    let short = vec!["1"; 100].join("+");
    assert!(equivalent(&short, "100"));
}
