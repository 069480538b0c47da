//! Evaluates an [`Expr`] to a [`Value`]: exactly (big rationals) where it can, in `f64` where it
//! must.
//!
//! Numbers stay exact through `+ − × ÷`, integer powers, perfect roots (`\sqrt{8/18} = 2/3`),
//! factorials and binomials; π, e, non-perfect roots and functions fall back to `f64`. `±`
//! makes an expression multi-valued: every scalar evaluates to a short list of branches.
//!
//! Invariants: no operation can blow up. Exact results are kept only while they fit in
//! [`MAX_BITS`] bits (else they become floats), exponents, factorials and binomials are bounded,
//! and a `±`-expression has at most [`MAX_BRANCHES`] values.
#![deny(clippy::indexing_slicing)]

use super::{Constant, Expr, Func, RelOp};
use num_bigint::BigInt;
use num_integer::Integer;
use num_rational::BigRational;
use num_traits::{One, Signed, ToPrimitive, Zero};
use std::collections::BTreeMap;

/// Largest exact number kept, in bits of numerator plus denominator.
pub(crate) const MAX_BITS: u64 = 16_384;
/// Most values a `±` expression may take.
pub(crate) const MAX_BRANCHES: usize = 16;
/// Largest `n` for which `n!` is computed.
const MAX_FACTORIAL: u64 = 1_000;
/// Largest root index tried exactly.
const MAX_EXACT_ROOT: u32 = 64;

/// Why an expression has no value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum EvalError {
    /// Division by zero, a factorial of a non-integer, …
    Undefined,
    /// Too many `±` branches.
    TooComplex,
    /// A tuple, set or interval where a number was needed.
    NotScalar,
    /// A variable with no value in the environment.
    UnknownVar,
}

type EResult<T> = Result<T, EvalError>;

/// A number: exact, or a float (which may be ±∞ or NaN).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Num {
    Exact(BigRational),
    Float(f64),
}

/// The value of a whole answer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Scalar(Num),
    Tuple(Vec<Value>),
    Interval {
        lo: Num,
        hi: Num,
        lo_closed: bool,
        hi_closed: bool,
    },
    Set(Vec<Value>),
    Union(Vec<Value>),
    Matrix(Vec<Vec<Num>>),
    Relation(Vec<Value>, Vec<RelOp>),
}

/// Values of the variables at one evaluation point.
#[derive(Debug, Clone, Default)]
pub(crate) struct Env {
    vars: BTreeMap<String, BigRational>,
    /// When set, `I` is the identity matrix of this size (`-I`, `2I` against a matrix).
    identity: Option<usize>,
}

impl Env {
    pub(crate) fn new(vars: BTreeMap<String, BigRational>) -> Self {
        Self {
            vars,
            identity: None,
        }
    }

    /// The same point with `I` read as the `n`×`n` identity matrix.
    pub(crate) fn with_identity(mut self, n: usize) -> Self {
        self.identity = Some(n);
        self
    }

    fn is_identity(&self, e: &Expr) -> bool {
        match (self.identity, e) {
            (Some(n), Expr::Var(v)) => is_identity_name(v, n),
            _ => false,
        }
    }
}

/// `I`, or `I_n` naming the `n`×`n` identity.
pub(crate) fn is_identity_name(v: &str, n: usize) -> bool {
    v == "I" || v.strip_prefix("I_").is_some_and(|k| k.parse() == Ok(n))
}

/// Largest matrix side [`Env::with_identity`] builds.
pub(crate) const MAX_IDENTITY: usize = 16;

/// A scalar or a matrix, while evaluating arithmetic that involves matrices.
enum Lin {
    S(Num),
    M(Vec<Vec<Num>>),
}

/// Whether arithmetic (`-`, `+`, `−`, `·`, `/`) in `e` reaches a matrix (or `I` read as one).
fn has_matrix(e: &Expr, env: &Env) -> bool {
    match e {
        Expr::Matrix(_) => true,
        Expr::Neg(a) => has_matrix(a, env),
        Expr::Add(a, b) | Expr::Sub(a, b) | Expr::Mul(a, b) | Expr::Div(a, b) => {
            has_matrix(a, env) || has_matrix(b, env)
        }
        other => env.is_identity(other),
    }
}

/// The side of the first square matrix that arithmetic in `e` reaches, if any.
pub(crate) fn square_size(e: &Expr) -> Option<usize> {
    match e {
        Expr::Matrix(rows) => {
            Some(rows.len()).filter(|n| rows.iter().all(|r| r.len() == *n) && *n > 0)
        }
        Expr::Neg(a) => square_size(a),
        Expr::Add(a, b) | Expr::Sub(a, b) | Expr::Mul(a, b) | Expr::Div(a, b) => {
            square_size(a).or_else(|| square_size(b))
        }
        _ => None,
    }
}

fn map_matrix(m: Vec<Vec<Num>>, f: impl Fn(&Num) -> EResult<Num>) -> EResult<Lin> {
    m.iter()
        .map(|r| r.iter().map(&f).collect::<EResult<Vec<_>>>())
        .collect::<EResult<Vec<_>>>()
        .map(Lin::M)
}

fn zip_matrix(a: Vec<Vec<Num>>, b: Vec<Vec<Num>>, f: impl Fn(&Num, &Num) -> Num) -> EResult<Lin> {
    let same_shape = a.len() == b.len() && a.iter().zip(&b).all(|(r, s)| r.len() == s.len());
    if !same_shape {
        return Err(EvalError::Undefined);
    }
    Ok(Lin::M(
        a.iter()
            .zip(&b)
            .map(|(r, s)| r.iter().zip(s).map(|(x, y)| f(x, y)).collect())
            .collect(),
    ))
}

fn mat_mul(a: &[Vec<Num>], b: &[Vec<Num>]) -> EResult<Lin> {
    let inner = b.len();
    if a.iter().any(|r| r.len() != inner) || inner == 0 {
        return Err(EvalError::Undefined);
    }
    let cols = b.first().map_or(0, Vec::len);
    let mut out = Vec::with_capacity(a.len());
    for row in a {
        let mut out_row = Vec::with_capacity(cols);
        for j in 0..cols {
            let mut acc = Num::int(0);
            for (k, x) in row.iter().enumerate() {
                let y = b
                    .get(k)
                    .and_then(|r| r.get(j))
                    .ok_or(EvalError::Undefined)?;
                acc = acc.add(&x.mul(y));
            }
            out_row.push(acc);
        }
        out.push(out_row);
    }
    Ok(Lin::M(out))
}

/// Evaluates arithmetic over scalars and matrices: a scalar times a matrix scales it,
/// matrices of one shape add, conforming matrices multiply.
fn eval_lin(e: &Expr, env: &Env) -> EResult<Lin> {
    if !has_matrix(e, env) {
        return single(e, env).map(Lin::S);
    }
    match e {
        Expr::Matrix(rows) => rows
            .iter()
            .map(|r| {
                r.iter()
                    .map(|c| single(c, env))
                    .collect::<EResult<Vec<_>>>()
            })
            .collect::<EResult<Vec<_>>>()
            .map(Lin::M),
        Expr::Var(_) => {
            let n = env.identity.ok_or(EvalError::UnknownVar)?;
            if n == 0 || n > MAX_IDENTITY {
                return Err(EvalError::TooComplex);
            }
            Ok(Lin::M(
                (0..n)
                    .map(|i| (0..n).map(|j| Num::int(i64::from(i == j))).collect())
                    .collect(),
            ))
        }
        Expr::Neg(a) => match eval_lin(a, env)? {
            Lin::S(x) => Ok(Lin::S(x.neg())),
            Lin::M(m) => map_matrix(m, |x| Ok(x.neg())),
        },
        Expr::Add(a, b) | Expr::Sub(a, b) => {
            let sub = matches!(e, Expr::Sub(..));
            match (eval_lin(a, env)?, eval_lin(b, env)?) {
                (Lin::M(x), Lin::M(y)) => {
                    zip_matrix(x, y, |p, q| if sub { p.sub(q) } else { p.add(q) })
                }
                _ => Err(EvalError::Undefined),
            }
        }
        Expr::Mul(a, b) => match (eval_lin(a, env)?, eval_lin(b, env)?) {
            (Lin::S(x), Lin::M(m)) | (Lin::M(m), Lin::S(x)) => map_matrix(m, |y| Ok(x.mul(y))),
            (Lin::M(x), Lin::M(y)) => mat_mul(&x, &y),
            (Lin::S(x), Lin::S(y)) => Ok(Lin::S(x.mul(&y))),
        },
        Expr::Div(a, b) => match (eval_lin(a, env)?, eval_lin(b, env)?) {
            (Lin::M(m), Lin::S(x)) => map_matrix(m, |y| y.div(&x)),
            _ => Err(EvalError::Undefined),
        },
        other => single(other, env).map(Lin::S),
    }
}

fn bits(r: &BigRational) -> u64 {
    r.numer().bits() + r.denom().bits()
}

impl Num {
    fn int(i: i64) -> Self {
        Num::Exact(BigRational::from_integer(BigInt::from(i)))
    }

    pub(crate) fn to_f64(&self) -> f64 {
        match self {
            Num::Exact(r) => r.to_f64().unwrap_or(f64::NAN),
            Num::Float(f) => *f,
        }
    }

    pub(crate) fn is_nan(&self) -> bool {
        matches!(self, Num::Float(f) if f.is_nan())
    }

    /// Keeps an exact result only while it is small enough.
    fn exact(r: BigRational) -> Self {
        if bits(&r) > MAX_BITS {
            Num::Float(r.to_f64().unwrap_or(f64::NAN))
        } else {
            Num::Exact(r)
        }
    }

    fn as_integer(&self) -> Option<&BigInt> {
        match self {
            Num::Exact(r) if r.is_integer() => Some(r.numer()),
            _ => None,
        }
    }

    fn add(&self, o: &Num) -> Num {
        match (self, o) {
            (Num::Exact(a), Num::Exact(b)) => Num::exact(a + b),
            _ => Num::Float(self.to_f64() + o.to_f64()),
        }
    }

    fn sub(&self, o: &Num) -> Num {
        self.add(&o.neg())
    }

    fn mul(&self, o: &Num) -> Num {
        match (self, o) {
            (Num::Exact(a), Num::Exact(b)) => Num::exact(a * b),
            _ => Num::Float(self.to_f64() * o.to_f64()),
        }
    }

    fn div(&self, o: &Num) -> EResult<Num> {
        match (self, o) {
            (_, Num::Exact(b)) if b.is_zero() => Err(EvalError::Undefined),
            (Num::Exact(a), Num::Exact(b)) => Ok(Num::exact(a / b)),
            _ => Ok(Num::Float(self.to_f64() / o.to_f64())),
        }
    }

    fn neg(&self) -> Num {
        match self {
            Num::Exact(a) => Num::Exact(-a),
            Num::Float(f) => Num::Float(-f),
        }
    }

    pub(crate) fn sub_num(&self, o: &Num) -> Num {
        self.sub(o)
    }

    pub(crate) fn div_num(&self, o: &Num) -> Option<Num> {
        self.div(o).ok()
    }

    pub(crate) fn scale(&self, by: &Num) -> Num {
        self.mul(by)
    }

    fn pow(&self, e: &Num) -> EResult<Num> {
        if let (Num::Exact(b), Num::Exact(x)) = (self, e) {
            if x.is_integer() {
                return exact_int_pow(b, x.numer());
            }
            // A rational exponent p/q: exact when the base is a perfect q-th power.
            if let Some(q) = x.denom().to_u32().filter(|q| *q <= MAX_EXACT_ROOT) {
                if let Some(root) = exact_root(b, q) {
                    return exact_int_pow(&root, x.numer());
                }
                if b.is_negative() && q % 2 == 1 {
                    let mag = (-b)
                        .to_f64()
                        .unwrap_or(f64::NAN)
                        .powf(x.abs().to_f64().unwrap_or(f64::NAN));
                    let odd_p = x.numer().is_odd();
                    let signed = if odd_p { -mag } else { mag };
                    return Ok(Num::Float(if x.is_negative() {
                        1.0 / signed
                    } else {
                        signed
                    }));
                }
            }
        }
        Ok(Num::Float(self.to_f64().powf(e.to_f64())))
    }

    fn root(&self, index: &Num) -> EResult<Num> {
        if let (Num::Exact(b), Some(n)) = (self, index.as_integer().and_then(|n| n.to_u32())) {
            if n == 0 {
                return Err(EvalError::Undefined);
            }
            if n <= MAX_EXACT_ROOT {
                if let Some(r) = exact_root(b, n) {
                    return Ok(Num::Exact(r));
                }
                let f = b.to_f64().unwrap_or(f64::NAN);
                if f < 0.0 && n % 2 == 1 {
                    return Ok(Num::Float(-(-f).powf(1.0 / f64::from(n))));
                }
                return Ok(Num::Float(f.powf(1.0 / f64::from(n))));
            }
        }
        let i = index.to_f64();
        if i == 0.0 {
            return Err(EvalError::Undefined);
        }
        Ok(Num::Float(self.to_f64().powf(1.0 / i)))
    }
}

fn exact_int_pow(b: &BigRational, n: &BigInt) -> EResult<Num> {
    if b.is_zero() && n.is_negative() {
        return Err(EvalError::Undefined);
    }
    if b.is_zero() || b.is_one() {
        return Ok(Num::Exact(b.clone()));
    }
    if *b == -BigRational::one() {
        let odd = n.is_odd();
        return Ok(Num::int(if odd { -1 } else { 1 }));
    }
    let fits = n
        .abs()
        .to_u64()
        .filter(|m| m.saturating_mul(bits(b)) <= MAX_BITS)
        .and_then(|m| i32::try_from(m).ok());
    match fits {
        Some(m) => {
            let p = num_traits::pow(b.clone(), m as usize);
            Ok(Num::exact(if n.is_negative() { p.recip() } else { p }))
        }
        None => Ok(Num::Float(
            b.to_f64()
                .unwrap_or(f64::NAN)
                .powf(n.to_f64().unwrap_or(f64::NAN)),
        )),
    }
}

/// The exact `n`-th root of `r`, when there is a rational one.
fn exact_root(r: &BigRational, n: u32) -> Option<BigRational> {
    if n == 0 || n > MAX_EXACT_ROOT {
        return None;
    }
    let neg = r.is_negative();
    if neg && n.is_multiple_of(2) {
        return None;
    }
    let a = r.abs();
    let root = |x: &BigInt| -> Option<BigInt> {
        let c = x.nth_root(n);
        (num_traits::pow(c.clone(), n as usize) == *x).then_some(c)
    };
    let num = root(a.numer())?;
    let den = root(a.denom())?;
    let out = BigRational::new(num, den);
    Some(if neg { -out } else { out })
}

fn factorial(n: &Num) -> EResult<Num> {
    let k = n
        .as_integer()
        .and_then(|k| k.to_u64())
        .filter(|k| *k <= MAX_FACTORIAL)
        .ok_or(EvalError::Undefined)?;
    let mut acc = BigInt::one();
    for i in 2..=k {
        acc *= i;
    }
    Ok(Num::exact(BigRational::from_integer(acc)))
}

fn binom(n: &Num, k: &Num) -> EResult<Num> {
    let (Some(n), Some(k)) = (n.as_integer(), k.as_integer()) else {
        return Err(EvalError::Undefined);
    };
    let (Some(n), Some(k)) = (n.to_i64(), k.to_i64()) else {
        return Err(EvalError::Undefined);
    };
    if n < 0 || k < 0 {
        return Err(EvalError::Undefined);
    }
    if k > n {
        return Ok(Num::int(0));
    }
    let k = k.min(n - k);
    if k > MAX_FACTORIAL as i64 {
        return Err(EvalError::Undefined);
    }
    let mut acc = BigInt::one();
    for i in 0..k {
        acc = acc * BigInt::from(n - i) / BigInt::from(i + 1);
    }
    Ok(Num::exact(BigRational::from_integer(acc)))
}

fn apply(f: Func, x: &Num) -> Num {
    let v = x.to_f64();
    Num::Float(match f {
        Func::Sin => v.sin(),
        Func::Cos => v.cos(),
        Func::Tan => v.tan(),
        Func::Sec => 1.0 / v.cos(),
        Func::Csc => 1.0 / v.sin(),
        Func::Cot => 1.0 / v.tan(),
        Func::Asin => v.asin(),
        Func::Acos => v.acos(),
        Func::Atan => v.atan(),
        Func::Sinh => v.sinh(),
        Func::Cosh => v.cosh(),
        Func::Tanh => v.tanh(),
        Func::Exp => v.exp(),
        Func::Ln => {
            if v <= 0.0 {
                f64::NAN
            } else {
                v.ln()
            }
        }
    })
}

fn base_number(digits: &str, base: u32) -> EResult<Num> {
    if !(2..=36).contains(&base) {
        return Err(EvalError::Undefined);
    }
    let n = BigInt::parse_bytes(digits.as_bytes(), base).ok_or(EvalError::Undefined)?;
    Ok(Num::exact(BigRational::from_integer(n)))
}

/// Combines every branch of `a` with every branch of `b`.
fn combine(a: Vec<Num>, b: Vec<Num>, f: impl Fn(&Num, &Num) -> EResult<Num>) -> EResult<Vec<Num>> {
    if a.len().saturating_mul(b.len()) > MAX_BRANCHES {
        return Err(EvalError::TooComplex);
    }
    let mut out = Vec::with_capacity(a.len() * b.len());
    for x in &a {
        for y in &b {
            out.push(f(x, y)?);
        }
    }
    Ok(out)
}

fn map(a: Vec<Num>, f: impl Fn(&Num) -> EResult<Num>) -> EResult<Vec<Num>> {
    a.iter().map(f).collect()
}

/// Evaluates a scalar expression to its branches (one, unless `±` is involved).
pub(crate) fn eval_scalar(e: &Expr, env: &Env) -> EResult<Vec<Num>> {
    Ok(match e {
        Expr::Number(r) => vec![Num::Exact(r.clone())],
        Expr::BaseNumber { digits, base } => vec![base_number(digits, *base)?],
        Expr::Const(Constant::Pi) => vec![Num::Float(std::f64::consts::PI)],
        Expr::Const(Constant::E) => vec![Num::Float(std::f64::consts::E)],
        Expr::Const(Constant::Infinity) => vec![Num::Float(f64::INFINITY)],
        Expr::Var(v) => vec![Num::Exact(
            env.vars.get(v).cloned().ok_or(EvalError::UnknownVar)?,
        )],
        Expr::Neg(a) => map(eval_scalar(a, env)?, |x| Ok(x.neg()))?,
        Expr::Add(a, b) => combine(eval_scalar(a, env)?, eval_scalar(b, env)?, |x, y| {
            Ok(x.add(y))
        })?,
        Expr::Sub(a, b) => combine(eval_scalar(a, env)?, eval_scalar(b, env)?, |x, y| {
            Ok(x.sub(y))
        })?,
        Expr::Mul(a, b) => combine(eval_scalar(a, env)?, eval_scalar(b, env)?, |x, y| {
            Ok(x.mul(y))
        })?,
        Expr::Div(a, b) => combine(eval_scalar(a, env)?, eval_scalar(b, env)?, Num::div)?,
        Expr::Pow(a, b) => combine(eval_scalar(a, env)?, eval_scalar(b, env)?, Num::pow)?,
        Expr::PlusMinus(a, b) => {
            let b = eval_scalar(b, env)?;
            let a = match a {
                Some(a) => eval_scalar(a, env)?,
                None => vec![Num::int(0)],
            };
            let mut out = combine(a.clone(), b.clone(), |x, y| Ok(x.add(y)))?;
            out.extend(combine(a, b, |x, y| Ok(x.sub(y)))?);
            if out.len() > MAX_BRANCHES {
                return Err(EvalError::TooComplex);
            }
            out
        }
        Expr::Root { index, radicand } => {
            let idx = match index {
                Some(i) => eval_scalar(i, env)?,
                None => vec![Num::int(2)],
            };
            combine(eval_scalar(radicand, env)?, idx, Num::root)?
        }
        Expr::Log { base, arg } => {
            combine(eval_scalar(arg, env)?, eval_scalar(base, env)?, |x, b| {
                Num::Float(apply(Func::Ln, x).to_f64()).div(&apply(Func::Ln, b))
            })?
        }
        Expr::Apply(f, a) => map(eval_scalar(a, env)?, |x| Ok(apply(*f, x)))?,
        Expr::Factorial(a) => map(eval_scalar(a, env)?, factorial)?,
        Expr::Binom(n, k) => combine(eval_scalar(n, env)?, eval_scalar(k, env)?, binom)?,
        Expr::Abs(a) => map(eval_scalar(a, env)?, |x| {
            Ok(match x {
                Num::Exact(r) => Num::Exact(r.abs()),
                Num::Float(f) => Num::Float(f.abs()),
            })
        })?,
        Expr::Tuple(_)
        | Expr::Interval { .. }
        | Expr::Set(_)
        | Expr::Union(_)
        | Expr::Matrix(_)
        | Expr::Relation(..) => return Err(EvalError::NotScalar),
    })
}

fn single(e: &Expr, env: &Env) -> EResult<Num> {
    let mut v = eval_scalar(e, env)?;
    if v.len() == 1 {
        v.pop().ok_or(EvalError::Undefined)
    } else {
        Err(EvalError::NotScalar)
    }
}

/// Evaluates a whole answer.
pub(crate) fn eval_value(e: &Expr, env: &Env) -> EResult<Value> {
    Ok(match e {
        Expr::Tuple(items) => Value::Tuple(
            items
                .iter()
                .map(|i| eval_value(i, env))
                .collect::<EResult<_>>()?,
        ),
        Expr::Interval {
            lo,
            hi,
            lo_closed,
            hi_closed,
        } => Value::Interval {
            lo: single(lo, env)?,
            hi: single(hi, env)?,
            lo_closed: *lo_closed,
            hi_closed: *hi_closed,
        },
        Expr::Set(items) => {
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                match eval_value(item, env)? {
                    // `\{1 \pm 2\}` is the set {3, -1}, not a set holding a set.
                    Value::Set(inner) if !matches!(item, Expr::Set(_)) => out.extend(inner),
                    v => out.push(v),
                }
            }
            Value::Set(out)
        }
        Expr::Union(items) => Value::Union(
            items
                .iter()
                .map(|i| eval_value(i, env))
                .collect::<EResult<_>>()?,
        ),
        Expr::Relation(operands, ops) => Value::Relation(
            operands
                .iter()
                .map(|i| eval_value(i, env))
                .collect::<EResult<_>>()?,
            ops.clone(),
        ),
        arithmetic if has_matrix(arithmetic, env) => match eval_lin(arithmetic, env)? {
            Lin::S(x) => Value::Scalar(x),
            Lin::M(m) => Value::Matrix(m),
        },
        scalar => {
            let mut branches = eval_scalar(scalar, env)?;
            if branches.len() == 1 {
                Value::Scalar(branches.remove(0))
            } else {
                Value::Set(branches.into_iter().map(Value::Scalar).collect())
            }
        }
    })
}

impl Value {
    /// True when any number inside is NaN (the expression is undefined at this point).
    pub(crate) fn has_nan(&self) -> bool {
        match self {
            Value::Scalar(n) => n.is_nan(),
            Value::Interval { lo, hi, .. } => lo.is_nan() || hi.is_nan(),
            Value::Tuple(v) | Value::Set(v) | Value::Union(v) | Value::Relation(v, _) => {
                v.iter().any(Value::has_nan)
            }
            Value::Matrix(rows) => rows.iter().flatten().any(Num::is_nan),
        }
    }

    /// Multiplies every number inside by `by` (percent and degree conversions).
    pub(crate) fn scaled(&self, by: &Num) -> Value {
        match self {
            Value::Scalar(n) => Value::Scalar(n.scale(by)),
            Value::Interval {
                lo,
                hi,
                lo_closed,
                hi_closed,
            } => Value::Interval {
                lo: lo.scale(by),
                hi: hi.scale(by),
                lo_closed: *lo_closed,
                hi_closed: *hi_closed,
            },
            Value::Tuple(v) => Value::Tuple(v.iter().map(|x| x.scaled(by)).collect()),
            Value::Set(v) => Value::Set(v.iter().map(|x| x.scaled(by)).collect()),
            Value::Union(v) => Value::Union(v.iter().map(|x| x.scaled(by)).collect()),
            Value::Relation(v, ops) => {
                Value::Relation(v.iter().map(|x| x.scaled(by)).collect(), ops.clone())
            }
            Value::Matrix(rows) => Value::Matrix(
                rows.iter()
                    .map(|r| r.iter().map(|x| x.scale(by)).collect())
                    .collect(),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::parse;
    use super::*;

    fn value(s: &str) -> Value {
        match parse(s) {
            Ok(e) => eval_value(&e, &Env::default()).unwrap_or(Value::Scalar(Num::Float(f64::NAN))),
            Err(_) => Value::Scalar(Num::Float(f64::NAN)),
        }
    }

    fn q(n: i64, d: i64) -> Value {
        Value::Scalar(Num::Exact(BigRational::new(
            BigInt::from(n),
            BigInt::from(d),
        )))
    }

    #[test]
    fn exact_arithmetic() {
        assert_eq!(value(r"\frac{1}{2} + \frac{1}{3}"), q(5, 6));
        assert_eq!(value("2^{10}"), q(1024, 1));
        assert_eq!(value("2^{-2}"), q(1, 4));
        assert_eq!(value(r"\sqrt{\frac{8}{18}}"), q(2, 3));
        assert_eq!(value(r"\sqrt[3]{-27}"), q(-3, 1));
        assert_eq!(value("8^{2/3}"), q(4, 1));
        assert_eq!(value("5!"), q(120, 1));
        assert_eq!(value(r"\binom{10}{3}"), q(120, 1));
        assert_eq!(value("1011_2"), q(11, 1));
        assert_eq!(value("0.125"), q(1, 8));
    }

    #[test]
    fn huge_work_is_bounded() {
        // Each of these must return quickly, exactly or as a float, without panicking.
        assert!(matches!(
            value("10^{10^{10}}"),
            Value::Scalar(Num::Float(_))
        ));
        assert!(matches!(
            value("999999999999^{99999999999}"),
            Value::Scalar(Num::Float(_))
        ));
        assert!(value("100000!").has_nan());
        assert!(value(r"\binom{10^{9}}{5*10^{8}}").has_nan());
        assert!(value("1/0").has_nan());
        assert!(value("0^{-1}").has_nan());
    }

    #[test]
    fn plus_minus_branches() {
        match value(r"1 \pm 2") {
            Value::Set(v) => assert_eq!(v, vec![q(3, 1), q(-1, 1)]),
            other => panic!("expected a set, got {other:?}"),
        }
        assert!(value(&format!("1{}", r"\pm 1".repeat(10))).has_nan());
    }
}
