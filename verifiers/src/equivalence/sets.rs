//! Inequalities as the sets they describe: `x > 3` is `(3, \infty)`, `-1 \le x < 4` is
//! `[-1, 4)`, `x < 2 or x > 5` (also `\text{ or }`, `\lor`, `\cup`) is
//! `(-\infty, 2) \cup (5, \infty)` (so is the bare list `x<2, x>5`, which is what normalising
//! the `or` leaves), `x > -1 and x < 4` is `(-1, 4)`, `x \ne 3` is
//! `(-\infty, 3) \cup (3, \infty)`, and `\mathbb{R}` or "all real numbers" is
//! `(-\infty, \infty)`.
//!
//! Only comparisons of one variable with constants are read, and every part of an `or`/`and`
//! must be about the same variable; anything else stays as written (and so equals only what is
//! written the same way). An open interval is a two-element tuple, as the parser reads `(a, b)`.
#![deny(clippy::indexing_slicing)]

use super::forms::text_key;
use crate::latex::{self, Expr, RelOp};
use crate::normalize::Normalized;

/// One end of an interval: the bound and whether it is included.
type End = Option<(Expr, bool)>;

fn inf() -> Expr {
    Expr::Const(latex::Constant::Infinity)
}

fn interval(lo: End, hi: End) -> Expr {
    let (lo, lo_closed) = lo.unwrap_or_else(|| (Expr::Neg(Box::new(inf())), false));
    let (hi, hi_closed) = hi.unwrap_or_else(|| (inf(), false));
    if lo_closed || hi_closed {
        Expr::Interval {
            lo: Box::new(lo),
            hi: Box::new(hi),
            lo_closed,
            hi_closed,
        }
    } else {
        Expr::Tuple(vec![lo, hi])
    }
}

/// A comparison of one variable with constants, read as the variable's name and its bounds;
/// `x \ne c` as the two sides of `c`.
enum Described {
    Bounds(String, End, End),
    Except(String, Expr),
}

fn describe(e: &Expr) -> Option<Described> {
    let Expr::Relation(operands, ops) = e else {
        return None;
    };
    let var = |x: &Expr| match x {
        Expr::Var(v) => Some(v.clone()),
        _ => None,
    };
    let constant = |x: &Expr| x.variables().is_empty();
    let less = |op: &RelOp| matches!(op, RelOp::Lt | RelOp::Le);
    let greater = |op: &RelOp| matches!(op, RelOp::Gt | RelOp::Ge);
    let closed = |op: &RelOp| matches!(op, RelOp::Le | RelOp::Ge);
    match (operands.as_slice(), ops.as_slice()) {
        ([l, r], [op]) => {
            // `x op c`, or `c op x` read as `x (mirrored op) c`.
            let (v, c, op) = match (var(l), var(r)) {
                (Some(v), None) if constant(r) => (v, r, *op),
                (None, Some(v)) if constant(l) => (v, l, op.mirrored()),
                _ => return None,
            };
            let end = Some((c.clone(), closed(&op)));
            match op {
                RelOp::Lt | RelOp::Le => Some(Described::Bounds(v, None, end)),
                RelOp::Gt | RelOp::Ge => Some(Described::Bounds(v, end, None)),
                RelOp::Ne => Some(Described::Except(v, c.clone())),
                RelOp::Eq => None,
            }
        }
        ([a, x, b], [op1, op2]) if constant(a) && constant(b) => {
            let v = var(x)?;
            if less(op1) && less(op2) {
                let lo = Some((a.clone(), closed(op1)));
                Some(Described::Bounds(v, lo, Some((b.clone(), closed(op2)))))
            } else if greater(op1) && greater(op2) {
                let lo = Some((b.clone(), closed(op2)));
                Some(Described::Bounds(v, lo, Some((a.clone(), closed(op1)))))
            } else {
                None
            }
        }
        _ => None,
    }
}

fn as_set(d: Described) -> (String, Expr) {
    match d {
        Described::Bounds(v, lo, hi) => (v, interval(lo, hi)),
        Described::Except(v, c) => {
            let below = interval(None, Some((c.clone(), false)));
            let above = interval(Some((c, false)), None);
            (v, Expr::Union(vec![below, above]))
        }
    }
}

/// Every part described, all about one variable.
fn describe_all(parts: &[Expr]) -> Option<Vec<Described>> {
    let described: Vec<Described> = parts.iter().map(describe).collect::<Option<_>>()?;
    let name = |d: &Described| match d {
        Described::Bounds(v, ..) | Described::Except(v, _) => v.clone(),
    };
    let first = described.first().map(name)?;
    described
        .iter()
        .all(|d| name(d) == first)
        .then_some(described)
}

/// The set an answer describes, when it is an inequality (or several joined by `or`/`and`);
/// otherwise the expression unchanged.
pub(super) fn described_set(e: Expr, norm: &Normalized) -> Expr {
    if let Some(d) = describe(&e) {
        return as_set(d).1;
    }
    let bare_list = !norm.text.starts_with("\\{");
    let (parts, union) = match &e {
        Expr::Union(parts) => (parts, true),
        // A bare list of inequalities is a union unless `and` (and only `and`) joined it: the
        // normalised text of `x < 2 or x > 5` is `x<2,x>5`, and must mean the same.
        Expr::Set(parts) if bare_list && !(norm.or_joined && norm.and_joined) => {
            (parts, !norm.and_joined)
        }
        _ => return e,
    };
    let Some(described) = describe_all(parts) else {
        return e;
    };
    if union {
        return Expr::Union(described.into_iter().map(|d| as_set(d).1).collect());
    }
    // `x > a and x < b`: one lower and one upper bound.
    match described.as_slice() {
        [Described::Bounds(_, lo @ Some(_), None), Described::Bounds(_, None, hi @ Some(_))]
        | [Described::Bounds(_, None, hi @ Some(_)), Described::Bounds(_, lo @ Some(_), None)] => {
            interval(lo.clone(), hi.clone())
        }
        _ => e,
    }
}

/// `\mathbb{R}`, `x \in \mathbb{R}`, "all real numbers": the whole line, `(-\infty, \infty)`.
pub(super) fn all_reals(raw: &str) -> Option<Expr> {
    let key = text_key(raw).replace('$', "");
    let stripped = key
        .strip_prefix("xin")
        .or_else(|| key.strip_prefix("boxed"))
        .unwrap_or(&key);
    let reals = matches!(
        stripped,
        "mathbbr" | "mathbb{r}" | "allrealnumbers" | "allreals" | "textallrealnumbers"
    );
    reals.then(|| interval(None, None))
}
