//! A parser for the LaTeX math that answers are written in, and an evaluator for what it parses.
//!
//! `parse` reads the subset of LaTeX that final answers use — numbers (with decimals), `\frac`,
//! `a/b`, `\sqrt{…}` and `\sqrt[n]{…}`, powers, `\pi`, `e`, `\infty`, implicit multiplication
//! (`2\sqrt{3}`, `3x`), `\pm`, `\cdot`/`\times`, functions (`\sin`, `\ln`, `\log_b`, …),
//! factorials, `\binom`, absolute values, intervals with open or closed ends, tuples, sets
//! (`\{1,2\}`, and a bare top-level list `1, 2`), unions of intervals, simple matrices
//! (`\begin{pmatrix}…\end{pmatrix}`), relations, subscripted variables and base-`b` numerals
//! (`1011_2`) — into an [`Expr`]. It is a recursive-descent parser in the style of a textbook
//! expression grammar, with the precedence climbing of sympy's LaTeX reader (which HuggingFace's
//! math-verify builds on) but no grammar generator.
//!
//! Invariants: parsing never panics and is bounded — inputs over [`MAX_INPUT_CHARS`] characters
//! are refused, recursion deeper than [`MAX_DEPTH`] is an error. Evaluation (in `eval`) bounds
//! big-integer work the same way. Words of three or more letters that are not function names are
//! *text*, not products of variables, so `Monday` never equals `dynamo`.
#![deny(clippy::indexing_slicing)]

mod eval;
mod lexer;
mod parser;
#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests;

pub(crate) use eval::{eval_value, is_identity_name, square_size, Env, Num, Value, MAX_IDENTITY};

use num_rational::BigRational;

/// Longest input, in characters, that [`parse`] accepts.
pub const MAX_INPUT_CHARS: usize = 2_000;
/// Deepest bracket or operator nesting the parser follows.
pub const MAX_DEPTH: usize = 64;
/// Deepest expression tree [`parse`] returns (a long chain `1+1+…` is a deep tree); evaluation
/// recurses over the tree, so this bounds its stack use.
pub const MAX_TREE_DEPTH: usize = 256;

/// Why a string is not an expression this parser reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// The input is empty.
    #[error("empty input")]
    Empty,
    /// The input is longer than [`MAX_INPUT_CHARS`] or has too many tokens.
    #[error("input too long")]
    TooLong,
    /// The input nests deeper than [`MAX_DEPTH`].
    #[error("input nests too deeply")]
    TooDeep,
    /// A word that is not math (`Monday`, `yes`).
    #[error("text, not math: {0}")]
    Text(String),
    /// Something the grammar does not allow here.
    #[error("unexpected {0}")]
    Unexpected(String),
    /// The input ended early.
    #[error("unexpected end of input")]
    UnexpectedEnd,
}

/// A constant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Constant {
    /// π
    Pi,
    /// Euler's number e.
    E,
    /// ∞
    Infinity,
}

/// A one-argument function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Func {
    Sin,
    Cos,
    Tan,
    Sec,
    Csc,
    Cot,
    Asin,
    Acos,
    Atan,
    Sinh,
    Cosh,
    Tanh,
    Exp,
    /// Natural logarithm (`\ln`, and `\log` without a base, as sympy reads it).
    Ln,
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum RelOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl RelOp {
    /// The operator with its sides swapped (`a < b` is `b > a`).
    pub fn mirrored(self) -> Self {
        match self {
            RelOp::Lt => RelOp::Gt,
            RelOp::Gt => RelOp::Lt,
            RelOp::Le => RelOp::Ge,
            RelOp::Ge => RelOp::Le,
            other => other,
        }
    }
}

/// A parsed answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// An exact number from a literal (`3`, `2.75`).
    Number(BigRational),
    /// A numeral in base `base` (`1011_2`), digits as written.
    BaseNumber {
        /// The digits.
        digits: String,
        /// The base, as written in the subscript.
        base: u32,
    },
    /// A named constant.
    Const(Constant),
    /// A variable, with its subscript if any (`x`, `x_1`, `\theta`).
    Var(String),
    /// `-a`
    Neg(Box<Expr>),
    /// `a + b`
    Add(Box<Expr>, Box<Expr>),
    /// `a - b`
    Sub(Box<Expr>, Box<Expr>),
    /// `a · b`, explicit or implicit.
    Mul(Box<Expr>, Box<Expr>),
    /// `a / b`, `\frac{a}{b}`
    Div(Box<Expr>, Box<Expr>),
    /// `a ^ b`
    Pow(Box<Expr>, Box<Expr>),
    /// `a ± b`, or `± b` when the first is `None`: two values.
    PlusMinus(Option<Box<Expr>>, Box<Expr>),
    /// `\sqrt[index]{radicand}`
    Root {
        /// The root's index; `None` for a square root.
        index: Option<Box<Expr>>,
        /// What is under the root.
        radicand: Box<Expr>,
    },
    /// `\log_{base} arg`
    Log {
        /// The base.
        base: Box<Expr>,
        /// The argument.
        arg: Box<Expr>,
    },
    /// `f(a)`
    Apply(Func, Box<Expr>),
    /// `a!`
    Factorial(Box<Expr>),
    /// `\binom{n}{k}`
    Binom(Box<Expr>, Box<Expr>),
    /// `|a|`
    Abs(Box<Expr>),
    /// `(a, b, …)`: an ordered tuple (a two-element one doubles as an open interval).
    Tuple(Vec<Expr>),
    /// An interval with at least one closed end, like `[a, b)`.
    Interval {
        /// Lower end.
        lo: Box<Expr>,
        /// Upper end.
        hi: Box<Expr>,
        /// Whether `lo` belongs to the interval.
        lo_closed: bool,
        /// Whether `hi` belongs to the interval.
        hi_closed: bool,
    },
    /// An unordered set: `\{a, b\}`, or a bare list `a, b`.
    Set(Vec<Expr>),
    /// A union of sets or intervals.
    Union(Vec<Expr>),
    /// A matrix, row by row.
    Matrix(Vec<Vec<Expr>>),
    /// A chain of comparisons, `a < b ≤ c`: operands and the operators between them.
    Relation(Vec<Expr>, Vec<RelOp>),
}

/// Parses `src` as a LaTeX math answer.
///
/// ```
/// use ponder_verifiers::latex::{parse, Expr};
///
/// assert!(matches!(parse(r"\frac{1}{2}"), Ok(Expr::Div(..))));
/// assert!(matches!(parse(r"[1, 2)"), Ok(Expr::Interval { lo_closed: true, hi_closed: false, .. })));
/// assert!(parse("Monday").is_err());
/// ```
pub fn parse(src: &str) -> Result<Expr, ParseError> {
    if src.chars().count() > MAX_INPUT_CHARS {
        return Err(ParseError::TooLong);
    }
    let toks = lexer::lex(src)?;
    if toks.is_empty() {
        return Err(ParseError::Empty);
    }
    let expr = parser::Parser::new(toks).parse_top()?;
    if expr.depth() > MAX_TREE_DEPTH {
        return Err(ParseError::TooDeep);
    }
    Ok(expr)
}

impl Expr {
    /// Every variable name in the expression, each once, in sorted order.
    pub fn variables(&self) -> std::collections::BTreeSet<String> {
        let mut out = std::collections::BTreeSet::new();
        self.collect_vars(&mut out);
        out
    }

    /// The height of the expression tree (a leaf is 1).
    pub fn depth(&self) -> usize {
        let children: Vec<&Expr> = match self {
            Expr::Number(_) | Expr::BaseNumber { .. } | Expr::Const(_) | Expr::Var(_) => vec![],
            Expr::Neg(a) | Expr::Apply(_, a) | Expr::Factorial(a) | Expr::Abs(a) => vec![a],
            Expr::Add(a, b)
            | Expr::Sub(a, b)
            | Expr::Mul(a, b)
            | Expr::Div(a, b)
            | Expr::Pow(a, b)
            | Expr::Binom(a, b)
            | Expr::Log { base: a, arg: b } => vec![a, b],
            Expr::PlusMinus(a, b) => a.iter().map(|a| a.as_ref()).chain([b.as_ref()]).collect(),
            Expr::Root { index, radicand } => index
                .iter()
                .map(|i| i.as_ref())
                .chain([radicand.as_ref()])
                .collect(),
            Expr::Interval { lo, hi, .. } => vec![lo, hi],
            Expr::Tuple(items)
            | Expr::Set(items)
            | Expr::Union(items)
            | Expr::Relation(items, _) => items.iter().collect(),
            Expr::Matrix(rows) => rows.iter().flatten().collect(),
        };
        1 + children.into_iter().map(Expr::depth).max().unwrap_or(0)
    }

    fn collect_vars(&self, out: &mut std::collections::BTreeSet<String>) {
        match self {
            Expr::Var(v) => {
                out.insert(v.clone());
            }
            Expr::Number(_) | Expr::BaseNumber { .. } | Expr::Const(_) => {}
            Expr::Neg(a) | Expr::Apply(_, a) | Expr::Factorial(a) | Expr::Abs(a) => {
                a.collect_vars(out)
            }
            Expr::Add(a, b)
            | Expr::Sub(a, b)
            | Expr::Mul(a, b)
            | Expr::Div(a, b)
            | Expr::Pow(a, b)
            | Expr::Binom(a, b)
            | Expr::Log { base: a, arg: b } => {
                a.collect_vars(out);
                b.collect_vars(out);
            }
            Expr::PlusMinus(a, b) => {
                if let Some(a) = a {
                    a.collect_vars(out);
                }
                b.collect_vars(out);
            }
            Expr::Root { index, radicand } => {
                if let Some(i) = index {
                    i.collect_vars(out);
                }
                radicand.collect_vars(out);
            }
            Expr::Interval { lo, hi, .. } => {
                lo.collect_vars(out);
                hi.collect_vars(out);
            }
            Expr::Tuple(items)
            | Expr::Set(items)
            | Expr::Union(items)
            | Expr::Relation(items, _) => items.iter().for_each(|e| e.collect_vars(out)),
            Expr::Matrix(rows) => rows.iter().flatten().for_each(|e| e.collect_vars(out)),
        }
    }
}
