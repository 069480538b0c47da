//! Tests of the calculation check: the forms a step writes, units and fragments, algebra with
//! bindings, the final-answer check, grounding and coverage against the question, and
//! properties (true generated equalities score 1, perturbed ones lower, a made-up operand never
//! helps, arbitrary text never panics).

use super::*;
use num_traits::Signed;
use proptest::prelude::*;

fn q(n: i64, d: i64) -> BigRational {
    BigRational::new(BigInt::from(n), BigInt::from(d))
}

/// Steps as the verifier is given them.
fn steps(xs: &[&str]) -> Vec<String> {
    xs.iter().map(|s| s.to_string()).collect()
}

#[track_caller]
fn verdicts(text: &str) -> Vec<bool> {
    check_text(text)
        .equalities
        .iter()
        .map(|e| e.holds)
        .collect()
}

#[test]
fn the_written_forms_of_arithmetic_are_evaluated_exactly() {
    assert_eq!(verdicts("6 × 7 = 42"), vec![true]);
    assert_eq!(verdicts("12 - 5 = 7"), vec![true]);
    assert_eq!(verdicts(r"\frac{3}{4} \cdot 8 = 6"), vec![true]);
    assert_eq!(verdicts("3 * 4 + 2 = 14"), vec![true]);
    assert_eq!(verdicts("3 x 4 = 12 and 20 ÷ 4 = 5"), vec![true, true]);
    assert_eq!(verdicts(r"$1,200 / 4 = $300"), vec![true]);
    assert_eq!(verdicts(r"\$1,200 \div 4 = \$301"), vec![false]);
    assert_eq!(verdicts("0.5 * 3 = 1.5"), vec![true]);
    assert_eq!(verdicts("(2 + 3) * 4 = 20 = 4 * 5"), vec![true, true]);
    assert_eq!(verdicts("2 + 3 = 5 = 6"), vec![true, false]);
    assert_eq!(verdicts("20% of 50 is 10, and 50 × 20% = 10"), vec![true]);
    assert_eq!(
        verdicts("3² = 9, 2^{10} = 1024, 2^-1 = 0.5"),
        vec![true, true, true]
    );
    assert_eq!(verdicts(r"\[ 3 \times 4 = 12 \]"), vec![true]);
    assert_eq!(verdicts(r"5 + 7 = \boxed{12}"), vec![true]);
    assert_eq!(verdicts("5 − 7 = -2"), vec![true], "unicode minus");
    assert_eq!(
        verdicts("1/3 + 1/6 = 1/2"),
        vec![true],
        "exact, not floating point"
    );
    assert_eq!(verdicts("0.1 + 0.2 = 0.3"), vec![true]);
}

#[test]
fn units_are_skipped_and_fragments_are_not_judged() {
    assert_eq!(verdicts("5 apples + 7 apples = 12 apples"), vec![true]);
    assert_eq!(verdicts(r"4 \text{ boxes} \times 6 = 24"), vec![true]);
    // `x` between a value with its unit and a number is a times sign.
    assert_eq!(verdicts("7 boxes x 4 apples = 28 apples"), vec![true]);
    assert_eq!(verdicts("7 boxes x 4 apples = 27 apples"), vec![false]);
    // `4 = 12` is the tail of a phrase, not a claim that 4 equals 12.
    assert_eq!(verdicts("3 boxes of 4 = 12 crayons"), Vec::<bool>::new());
    // An operator left dangling by a word is not a side.
    assert_eq!(verdicts("boxes × 4 = 12"), Vec::<bool>::new());
    // Division by zero, words, approximations and inequalities are not judged.
    assert_eq!(verdicts("5 / 0 = 3"), Vec::<bool>::new());
    assert_eq!(verdicts("the cost = price times count"), Vec::<bool>::new());
    assert_eq!(verdicts("3 < 4, 7 ≈ 7.1"), Vec::<bool>::new());
}

#[test]
fn variables_bound_anywhere_check_the_algebra() {
    let check = CalcCheck::default();
    // 2x + 3 = 13 holds once x = 5 is known, even though it is written first.
    let s = check.score_steps(&steps(&["2x + 3 = 13", "so x = 5"]), false);
    assert_eq!(s.steps, vec![1.0, 1.0]);
    let s = check.score_steps(&steps(&["2x + 3 = 15", "so x = 5"]), false);
    assert_eq!(s.steps, vec![0.5, 1.0]);
    // A second, different binding is a false claim.
    let s = check.score_steps(&steps(&["x = 5", "x = 6"]), false);
    assert_eq!(s.steps, vec![1.0, 0.5]);
    // Unbound variables are not judged.
    let s = check.score_steps(&steps(&["y + 2 = z"]), false);
    assert_eq!(s.steps, vec![1.0]);
}

#[test]
fn the_final_answer_is_checked_against_the_last_computed_quantity() {
    let check = CalcCheck::default();
    let agree = check.score_steps(&steps(&["5 + 7 = 12", "The answer is 12 dollars."]), true);
    assert_eq!(agree.overall, 1.0);
    let disagree = check.score_steps(&steps(&["5 + 7 = 12", "The answer is 13."]), true);
    assert_eq!(disagree.overall, 0.5);
    assert_eq!(
        disagree.steps,
        vec![1.0, 1.0],
        "the steps themselves are right"
    );
    // Partial solutions are not held to an answer.
    let partial = check.score_steps(&steps(&["5 + 7 = 12", "The answer is 13."]), false);
    assert_eq!(partial.overall, 1.0);
    // A finished solution with no answer at all scores as "no answer".
    let none = check.score_steps(&steps(&["I do not know."]), true);
    assert_eq!(none.overall, NO_ANSWER_SCORE);
}

#[test]
fn numbers_the_question_does_not_give_are_ungrounded() {
    let question = "A jug holds 3 liters. How many glasses of 250 milliliters can it fill?";
    let check = CalcCheck::default();
    // Question numbers, a conversion constant and a result computed before: all grounded,
    // every question number used.
    let right = steps(&[
        "3 liters is 3 × 1000 = 3000 milliliters.",
        "3000 / 250 = 12",
        "The answer is \\boxed{12}.",
    ]);
    let s = check.score_solution(question, &right, true);
    assert_eq!((s.steps.clone(), s.overall), (vec![1.0, 1.0, 1.0], 1.0));
    // The same true arithmetic over a made-up 200: its step halves, and 250 is never used.
    let made_up = steps(&[
        "3 × 1000 = 3000",
        "3000 / 200 = 15",
        "The answer is \\boxed{15}.",
    ]);
    let s = check.score_solution(question, &made_up, true);
    assert_eq!(s.steps, vec![1.0, 0.5, 1.0]);
    assert_eq!(
        s.overall, 0.25,
        "one ungrounded number, one question number unused"
    );
    let g = grounding(
        question,
        &check_all(&made_up.iter().map(String::as_str).collect::<Vec<_>>()),
    );
    assert_eq!((g.ungrounded, g.question_numbers, g.uncovered), (1, 2, 1));
    // A finished solution that computes nothing leaves every question number unused.
    let bare = steps(&["The answer is \\boxed{12}."]);
    assert_eq!(check.score_solution(question, &bare, true).overall, 0.25);
    // Partial solutions are not held to coverage; without a question nothing is grounded.
    assert_eq!(
        check.score_solution(question, &made_up[..2], false).overall,
        0.5
    );
    assert_eq!(check.score_steps(&made_up, true).overall, 1.0);
}

#[test]
fn a_result_nothing_uses_lowers_a_finished_solution() {
    let question =
        "Ava buys 5 notebooks at $6 each and 9 pens at $6 each. How much does she spend?";
    let check = CalcCheck::default();
    let whole = steps(&[
        "5 × 6 = 30",
        "9 × 6 = 54",
        "30 + 54 = 84",
        "The answer is \\boxed{84}.",
    ]);
    assert_eq!(check.score_solution(question, &whole, true).overall, 1.0);
    // Two subtotals and one of them as the answer: 30 is computed and never used.
    let cut = steps(&["5 × 6 = 30", "9 × 6 = 54", "The answer is \\boxed{54}."]);
    let texts: Vec<&str> = cut.iter().map(String::as_str).collect();
    let reports = check_all(&texts);
    assert_eq!(unused_results(&reports, stated_number("54").as_ref()), 1);
    assert_eq!(check.score_solution(question, &cut, true).overall, 0.5);
    // Results used later, or the answer, are not counted; without an answer the last is.
    let reports = check_all(&["5 × 6 = 30", "9 × 6 = 54", "30 + 54 = 84"]);
    assert_eq!(unused_results(&reports, None), 0);
    assert!(reports[0].results[0].used_later && !reports[2].results[0].used_later);
    // A partial solution is not judged for what it has not used yet.
    assert_eq!(
        check.score_solution(question, &cut[..2], false).overall,
        1.0
    );
}

#[test]
fn question_numbers_include_words_and_each_number_once() {
    let ints = |q: &str| -> Vec<i64> {
        question_numbers(q)
            .iter()
            .map(|v| v.to_integer().try_into().unwrap_or(-1))
            .collect()
    };
    assert_eq!(
        ints("Cows have four legs and chickens have two."),
        vec![4, 2]
    );
    assert_eq!(
        ints("A quarter is worth twenty-five cents; 25 quarters."),
        vec![25]
    );
    assert_eq!(ints("a dozen eggs, twice, 3/4 of 12"), vec![3, 4, 12, 2]);
    assert!(question_numbers("What is the capital of France?").is_empty());
    // A question without numbers grounds nothing and leaves nothing uncovered.
    let g = grounding("Why?", &[check_text("7 × 8 = 56")]);
    assert_eq!(g, Grounding::default());
}

#[test]
fn stated_numbers_read_phrases_units_and_forms() {
    assert_eq!(stated_number("45 minutes"), Some(q(45, 1)));
    assert_eq!(stated_number("$1,200"), Some(q(1200, 1)));
    assert_eq!(stated_number(r"\frac{3}{4}"), Some(q(3, 4)));
    assert_eq!(stated_number("x = 5"), Some(q(5, 1)));
    assert_eq!(stated_number("7 + 5 = 12 dollars"), Some(q(12, 1)));
    assert_eq!(stated_number("the total is 12 dollars"), Some(q(12, 1)));
    assert_eq!(
        stated_number("7 boxes x 4 apples = 28 apples"),
        Some(q(28, 1))
    );
    assert_eq!(stated_number("3 boxes x 4"), Some(q(12, 1)));
    assert_eq!(stated_number("(1, 2)"), None);
    assert_eq!(stated_number("3 boxes for 2 children"), None);
    assert_eq!(stated_number(r"\frac{\pi}{2}"), None);
    assert_eq!(stated_number("Monday"), None);
}

#[test]
fn huge_inputs_are_bounded() {
    let long = "9".repeat(500);
    assert_eq!(verdicts(&format!("{long} = {long}")), Vec::<bool>::new());
    assert_eq!(verdicts("2^100000 = 4"), Vec::<bool>::new());
    let deep = format!("{}1{} = 1", "(".repeat(200), ")".repeat(200));
    assert_eq!(verdicts(&deep), Vec::<bool>::new());
}

/// An arithmetic expression with its exact value.
#[derive(Debug, Clone)]
struct Arith {
    text: String,
    value: BigRational,
}

fn leaf() -> impl Strategy<Value = Arith> {
    (1i64..200).prop_map(|n| Arith {
        text: n.to_string(),
        value: q(n, 1),
    })
}

fn arith() -> impl Strategy<Value = Arith> {
    leaf().prop_recursive(3, 12, 2, |inner| {
        (inner.clone(), inner, 0usize..9).prop_filter_map("no division by zero", |(a, b, op)| {
            let (sym, value) = match op {
                0 => ("+", a.value.clone() + &b.value),
                1 => ("-", a.value.clone() - &b.value),
                2 => ("×", a.value.clone() * &b.value),
                3 => (r"\times", a.value.clone() * &b.value),
                4 => ("*", a.value.clone() * &b.value),
                5 => (r"\cdot", a.value.clone() * &b.value),
                6 | 7 if b.value.is_zero() => return None,
                6 => ("÷", a.value.clone() / &b.value),
                7 => ("/", a.value.clone() / &b.value),
                _ => {
                    if b.value.is_zero() {
                        return None;
                    }
                    return Some(Arith {
                        text: format!(r"\frac{{{}}}{{{}}}", a.text, b.text),
                        value: a.value / b.value,
                    });
                }
            };
            Some(Arith {
                text: format!("({} {sym} {})", a.text, b.text),
                value,
            })
        })
    })
}

/// An expression with at least one operation (a lone number after prose is a fragment).
fn operation() -> impl Strategy<Value = Arith> {
    arith().prop_filter("an operation", |e| {
        !e.text.chars().all(|c| c.is_ascii_digit())
    })
}

/// A value as a step would write it: an integer, or a fraction.
fn written(v: &BigRational) -> String {
    if v.is_integer() {
        v.to_integer().to_string()
    } else if v.is_negative() {
        format!(r"-\frac{{{}}}{{{}}}", -v.numer(), v.denom())
    } else {
        format!(r"\frac{{{}}}{{{}}}", v.numer(), v.denom())
    }
}

/// Regression (a fresh-seed CI run drew it): 2,350 is what the solution computed (50 × 47), so
/// using it again is grounded, not made up, and is not penalised as the property's made-up
/// operand is.
#[test]
fn a_computed_result_used_again_is_not_a_made_up_operand_regression_2350() {
    let question = "Compute 50 × 47 please.";
    let check = CalcCheck::default();
    let grounded = vec!["50 × 47 = 2350".to_string(), "The answer is 0.".to_string()];
    let reused = vec![
        "50 × 47 = 2350".to_string(),
        "2350 + 1 = 2351".to_string(),
        "The answer is 0.".to_string(),
    ];
    let a = check.score_solution(question, &grounded, true).overall;
    let b = check.score_solution(question, &reused, true).overall;
    assert!(
        b >= a || a == 0.0,
        "{b} vs {a}: a computed result counted as made up"
    );
}

proptest! {
    #[test]
    fn true_generated_equalities_score_one(e in operation(), prose in "[A-Za-z ]{0,12}") {
        let step = format!("{prose}: {} = {}. Done", e.text, written(&e.value));
        let s = CalcCheck::default().score_steps(std::slice::from_ref(&step), false);
        prop_assert_eq!(s.steps.clone(), vec![1.0], "{}", step);
        prop_assert_eq!(check_text(&step).holding(), 1, "{}", step);
    }

    #[test]
    fn perturbed_equalities_score_lower(e in operation(), delta in prop_oneof![-50i64..0, 1i64..50]) {
        let wrong = e.value.clone() + q(delta, 1);
        let step = format!("so {} = {}.", e.text, written(&wrong));
        let s = CalcCheck::default().score_steps(std::slice::from_ref(&step), false);
        prop_assert!(s.steps[0] < 1.0, "{} scored {:?}", step, s.steps);
        prop_assert_eq!(check_text(&step).false_count(), 1);
    }

    #[test]
    fn arbitrary_text_never_panics_and_scores_stay_in_range(
        steps in proptest::collection::vec(".{0,80}", 0..5),
        complete in any::<bool>(),
    ) {
        let s = CalcCheck::default().score_steps(&steps, complete);
        prop_assert_eq!(s.steps.len(), steps.len());
        prop_assert!((0.0..=1.0).contains(&s.overall));
        prop_assert!(s.steps.iter().all(|x| (0.0..=1.0).contains(x)));
    }

    #[test]
    fn a_made_up_operand_never_raises_the_score(e in operation(), extra in 2000i64..9000) {
        // The same true computation, once over the question's numbers and once with a number
        // the question does not give: the second never scores higher. A number the solution
        // computed (its result, or one of its operands) is not made up: those draws say
        // nothing about this property (the 50 × 47 = 2350 regression below).
        prop_assume!(e.value != q(extra, 1) && !e.text.contains(&extra.to_string()));
        let question = format!("Compute {} please.", e.text);
        let grounded = vec![format!("{} = {}", e.text, written(&e.value)), "The answer is 0.".to_string()];
        let invented = vec![
            format!("{} = {}", e.text, written(&e.value)),
            format!("{extra} + 1 = {}", extra + 1),
            "The answer is 0.".to_string(),
        ];
        let check = CalcCheck::default();
        let a = check.score_solution(&question, &grounded, true).overall;
        let b = check.score_solution(&question, &invented, true).overall;
        prop_assert!(b < a || a == 0.0, "{} vs {} for {:?}", b, a, invented);
    }

    #[test]
    fn math_like_noise_never_panics(text in r"[0-9 +\-*/^=().,%${}\\a-z×÷²]{0,60}") {
        let _ = check_text(&text);
        let _ = stated_number(&text);
    }
}
