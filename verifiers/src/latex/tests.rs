//! Parser tests: the grammar's corners, through the public `parse`.

use super::parser::decimal;
use super::{parse, Expr, ParseError};
use num_bigint::BigInt;
use num_rational::BigRational;
use num_traits::{One, Zero};

type PResult<T> = Result<T, ParseError>;

fn boxed(e: Expr) -> Box<Expr> {
    Box::new(e)
}

fn n(i: i64) -> Expr {
    Expr::Number(BigRational::from_integer(BigInt::from(i)))
}

#[test]
fn decimals_are_exact() -> PResult<()> {
    assert_eq!(
        decimal("2.50")?,
        BigRational::new(BigInt::from(5), BigInt::from(2))
    );
    assert_eq!(
        decimal(".5")?,
        BigRational::new(BigInt::one(), BigInt::from(2))
    );
    assert!(decimal("0")?.is_zero());
    Ok(())
}

#[test]
fn frac_without_braces() -> PResult<()> {
    assert_eq!(parse(r"\frac12")?, Expr::Div(boxed(n(1)), boxed(n(2))));
    assert_eq!(parse(r"\frac1{23}")?, Expr::Div(boxed(n(1)), boxed(n(23))));
    Ok(())
}

#[test]
fn implicit_multiplication() -> PResult<()> {
    assert!(matches!(parse(r"2\sqrt{3}")?, Expr::Mul(..)));
    assert!(matches!(parse("3x")?, Expr::Mul(..)));
    assert!(matches!(parse("xy")?, Expr::Mul(..)));
    Ok(())
}

#[test]
fn brackets() -> PResult<()> {
    assert!(matches!(parse("(1,2)")?, Expr::Tuple(v) if v.len() == 2));
    assert!(matches!(
        parse("(1,2]")?,
        Expr::Interval {
            lo_closed: false,
            hi_closed: true,
            ..
        }
    ));
    assert!(matches!(parse(r"(-\infty, 3)")?, Expr::Tuple(_)));
    assert!(matches!(parse(r"\{1,2,3\}")?, Expr::Set(v) if v.len() == 3));
    assert!(matches!(parse("1, 2")?, Expr::Set(_)));
    assert!(matches!(parse("(1+2)")?, Expr::Add(..)));
    assert!(matches!(parse(r"(0,1)\cup(2,3]")?, Expr::Union(v) if v.len() == 2));
    Ok(())
}

#[test]
fn matrices() -> PResult<()> {
    let m = parse(r"\begin{pmatrix} 1 & 2 \\ 3 & 4 \end{pmatrix}")?;
    assert!(matches!(m, Expr::Matrix(rows) if rows.len() == 2 && rows[0].len() == 2));
    let v = parse(r"\begin{pmatrix} 1 \\ 2 \\ 3 \\ \end{pmatrix}")?;
    assert!(matches!(v, Expr::Matrix(rows) if rows.len() == 3));
    assert!(parse(r"\begin{pmatrix} 1 & 2 \\ 3 \end{pmatrix}").is_err());
    Ok(())
}

#[test]
fn mixed_numbers() -> PResult<()> {
    let two_and_a_third = Expr::Add(boxed(n(2)), boxed(Expr::Div(boxed(n(1)), boxed(n(3)))));
    assert_eq!(parse(r"2\frac{1}{3}")?, two_and_a_third);
    assert_eq!(parse(r"-2\frac{1}{3}")?, Expr::Neg(boxed(two_and_a_third)));
    // Not mixed numbers: an improper fraction, a symbolic one, a product written out.
    assert!(matches!(parse(r"2\frac{4}{3}")?, Expr::Mul(..)));
    assert!(matches!(parse(r"2\frac{\pi}{3}")?, Expr::Mul(..)));
    assert!(matches!(parse(r"2\cdot\frac{1}{3}")?, Expr::Mul(..)));
    Ok(())
}

#[test]
fn words_are_text() {
    assert!(matches!(parse("Monday"), Err(ParseError::Text(_))));
    assert!(matches!(parse("no"), Err(ParseError::Text(_))));
}

#[test]
fn deep_nesting_is_refused() {
    let deep = format!("{}1{}", "(".repeat(500), ")".repeat(500));
    assert_eq!(parse(&deep), Err(ParseError::TooDeep));
    let tower = "2^".repeat(500) + "2";
    assert_eq!(parse(&tower), Err(ParseError::TooDeep));
}

#[test]
fn subscripts_and_bases() -> PResult<()> {
    assert_eq!(parse("x_1")?, Expr::Var("x_1".into()));
    assert_eq!(parse("x_{12}")?, Expr::Var("x_12".into()));
    assert_eq!(
        parse("1011_2")?,
        Expr::BaseNumber {
            digits: "1011".into(),
            base: 2
        }
    );
    Ok(())
}
