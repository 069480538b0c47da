//! Recursive-descent parser from tokens to [`Expr`].
//!
//! Grammar, loosest binding first:
//!
//! ```text
//! top      := union (',' union)*            a bare list of two or more is a Set
//! union    := relation ('\cup' relation)*
//! relation := sum (relop sum)*
//! sum      := term (('+' | '-' | '\pm' | '\mp') term)*
//! term     := unary (('*' | '/') unary | power)*     the bare `power` is implicit multiplication
//! unary    := ('-' | '+' | '\pm' | '\mp') unary | power
//! power    := postfix ('^' exponent)?              right associative
//! postfix  := primary '!'*
//! primary  := number ('_' base)? | word | command | '(' list ')' | '[' list ']' | '(' a ',' b ']'
//!           | '{' list '}' | '\{' list '\}' | '|' sum '|' | matrix
//! ```
//!
//! Every recursive entry counts depth and fails with [`ParseError::TooDeep`] past
//! [`MAX_DEPTH`](super::MAX_DEPTH), so no input can overflow the stack.
#![deny(clippy::indexing_slicing)]

use super::lexer::Tok;
use super::{Constant, Expr, Func, ParseError, RelOp, MAX_DEPTH};
use num_bigint::BigInt;
use num_rational::BigRational;
use num_traits::Signed;

type PResult<T> = Result<T, ParseError>;

/// English words of two letters, read as text rather than as a product of two variables.
const TWO_LETTER_WORDS: &[&str] = &[
    "am", "an", "as", "at", "be", "by", "do", "go", "he", "if", "in", "is", "it", "me", "my", "no",
    "of", "ok", "on", "or", "so", "to", "up", "us", "we",
];

const GREEK: &[&str] = &[
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "varepsilon",
    "zeta",
    "eta",
    "theta",
    "vartheta",
    "iota",
    "kappa",
    "lambda",
    "mu",
    "nu",
    "xi",
    "rho",
    "sigma",
    "tau",
    "upsilon",
    "phi",
    "varphi",
    "chi",
    "psi",
    "omega",
    "Gamma",
    "Delta",
    "Theta",
    "Lambda",
    "Xi",
    "Sigma",
    "Phi",
    "Psi",
    "Omega",
];

/// Font and text wrappers whose argument is read as if unwrapped.
const WRAPPERS: &[&str] = &[
    "text",
    "textrm",
    "textbf",
    "textit",
    "textnormal",
    "mathrm",
    "mathbf",
    "mathit",
    "mathsf",
    "mathbb",
    "boldsymbol",
    "mbox",
    "operatorname",
    "hbox",
];

const MATRIX_ENVS: &[&str] = &[
    "matrix",
    "pmatrix",
    "bmatrix",
    "Bmatrix",
    "vmatrix",
    "Vmatrix",
    "smallmatrix",
    "array",
];

fn func_named(name: &str) -> Option<Func> {
    Some(match name {
        "sin" => Func::Sin,
        "cos" => Func::Cos,
        "tan" => Func::Tan,
        "sec" => Func::Sec,
        "csc" => Func::Csc,
        "cot" => Func::Cot,
        "arcsin" => Func::Asin,
        "arccos" => Func::Acos,
        "arctan" => Func::Atan,
        "sinh" => Func::Sinh,
        "cosh" => Func::Cosh,
        "tanh" => Func::Tanh,
        "exp" => Func::Exp,
        "ln" => Func::Ln,
        _ => return None,
    })
}

fn letter(c: char) -> Expr {
    if c == 'e' {
        Expr::Const(Constant::E)
    } else {
        Expr::Var(c.to_string())
    }
}

fn boxed(e: Expr) -> Box<Expr> {
    Box::new(e)
}

/// Reads a decimal literal (`12`, `3.25`, `.5`) exactly.
pub(super) fn decimal(s: &str) -> PResult<BigRational> {
    let (int, frac) = match s.split_once('.') {
        Some((i, f)) => (i, f),
        None => (s, ""),
    };
    let digits = format!("{int}{frac}");
    let digits = if digits.is_empty() {
        "0"
    } else {
        digits.as_str()
    };
    let n: BigInt = digits
        .parse()
        .map_err(|_| ParseError::Unexpected(format!("number {s}")))?;
    let den = num_traits::pow(BigInt::from(10u8), frac.len());
    Ok(BigRational::new(n, den))
}

/// `2\frac{1}{3}` read as the mixed number 2⅓ (not 2 · ⅓): an integer literal directly
/// followed by a `\frac` of two integer literals, numerator below denominator.
fn mixed_number(whole: &Expr, frac: &Expr, frac_next: bool) -> Option<Expr> {
    let int_literal = |e: &Expr| matches!(e, Expr::Number(r) if r.is_integer() && !r.is_negative());
    let (negative, w) = match whole {
        Expr::Neg(inner) => (true, inner.as_ref()),
        other => (false, other),
    };
    let Expr::Div(a, b) = frac else {
        return None;
    };
    let proper = match (a.as_ref(), b.as_ref()) {
        (Expr::Number(a), Expr::Number(b)) => {
            a.is_integer() && b.is_integer() && a.is_positive() && a < b
        }
        _ => false,
    };
    if !(frac_next && int_literal(w) && proper) {
        return None;
    }
    let sum = Expr::Add(boxed(w.clone()), boxed(frac.clone()));
    Some(if negative { Expr::Neg(boxed(sum)) } else { sum })
}

pub(super) struct Parser {
    toks: Vec<Tok>,
    pos: usize,
    depth: usize,
    abs_depth: usize,
}

impl Parser {
    pub(super) fn new(toks: Vec<Tok>) -> Self {
        Self {
            toks,
            pos: 0,
            depth: 0,
            abs_depth: 0,
        }
    }

    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }

    /// Replaces the token [`Self::peek`] returns, if there is one.
    fn replace_peeked(&mut self, tok: Tok) {
        if let Some(t) = self.toks.get_mut(self.pos) {
            *t = tok;
        }
    }

    fn bump(&mut self) -> PResult<Tok> {
        let t = self
            .toks
            .get(self.pos)
            .cloned()
            .ok_or(ParseError::UnexpectedEnd)?;
        self.pos += 1;
        Ok(t)
    }

    fn eat(&mut self, t: &Tok) -> bool {
        if self.peek() == Some(t) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, t: &Tok) -> PResult<()> {
        match self.bump()? {
            ref got if got == t => Ok(()),
            got => Err(ParseError::Unexpected(format!("{got:?}, wanted {t:?}"))),
        }
    }

    fn peek_cmd(&self, name: &str) -> bool {
        matches!(self.peek(), Some(Tok::Cmd(c)) if c == name)
    }

    fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            Err(ParseError::TooDeep)
        } else {
            Ok(())
        }
    }

    fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    pub(super) fn parse_top(mut self) -> PResult<Expr> {
        let mut items = self.parse_list()?;
        if let Some(t) = self.peek() {
            return Err(ParseError::Unexpected(format!("{t:?}")));
        }
        Ok(if items.len() == 1 {
            items.remove(0)
        } else {
            Expr::Set(items)
        })
    }

    fn parse_list(&mut self) -> PResult<Vec<Expr>> {
        let mut items = vec![self.parse_union()?];
        while self.eat(&Tok::Comma) || self.eat(&Tok::Semicolon) {
            items.push(self.parse_union()?);
        }
        Ok(items)
    }

    fn parse_union(&mut self) -> PResult<Expr> {
        let first = self.parse_relation()?;
        if !self.peek_cmd("cup") {
            return Ok(first);
        }
        let mut parts = vec![first];
        while self.peek_cmd("cup") {
            self.pos += 1;
            parts.push(self.parse_relation()?);
        }
        Ok(Expr::Union(parts))
    }

    fn relop(&self) -> Option<RelOp> {
        Some(match self.peek()? {
            Tok::Eq => RelOp::Eq,
            Tok::Ne => RelOp::Ne,
            Tok::Lt => RelOp::Lt,
            Tok::Le => RelOp::Le,
            Tok::Gt => RelOp::Gt,
            Tok::Ge => RelOp::Ge,
            _ => return None,
        })
    }

    fn parse_relation(&mut self) -> PResult<Expr> {
        let first = self.parse_sum()?;
        let mut operands = vec![first];
        let mut ops = Vec::new();
        while let Some(op) = self.relop() {
            self.pos += 1;
            ops.push(op);
            operands.push(self.parse_sum()?);
        }
        if ops.is_empty() {
            Ok(operands.remove(0))
        } else {
            Ok(Expr::Relation(operands, ops))
        }
    }

    fn parse_sum(&mut self) -> PResult<Expr> {
        let mut lhs = self.parse_term()?;
        loop {
            if self.eat(&Tok::Plus) {
                lhs = Expr::Add(boxed(lhs), boxed(self.parse_term()?));
            } else if self.eat(&Tok::Minus) {
                lhs = Expr::Sub(boxed(lhs), boxed(self.parse_term()?));
            } else if self.peek_cmd("pm") || self.peek_cmd("mp") {
                self.pos += 1;
                lhs = Expr::PlusMinus(Some(boxed(lhs)), boxed(self.parse_term()?));
            } else {
                return Ok(lhs);
            }
        }
    }

    fn starts_primary(&self) -> bool {
        match self.peek() {
            Some(Tok::Num(_) | Tok::Word(_) | Tok::LParen | Tok::LBrace | Tok::LSet) => true,
            Some(Tok::Pipe) => self.abs_depth == 0,
            Some(Tok::Cmd(c)) => !matches!(c.as_str(), "pm" | "mp" | "cup" | "end" | "in"),
            _ => false,
        }
    }

    fn parse_term(&mut self) -> PResult<Expr> {
        let mut lhs = self.parse_unary()?;
        loop {
            if self.eat(&Tok::Star) {
                lhs = Expr::Mul(boxed(lhs), boxed(self.parse_unary()?));
            } else if self.eat(&Tok::Slash) {
                lhs = Expr::Div(boxed(lhs), boxed(self.parse_unary()?));
            } else if self.starts_primary() {
                let frac_next = ["frac", "dfrac", "tfrac"].iter().any(|f| self.peek_cmd(f));
                let rhs = self.parse_power()?;
                lhs = match mixed_number(&lhs, &rhs, frac_next) {
                    Some(m) => m,
                    None => Expr::Mul(boxed(lhs), boxed(rhs)),
                };
            } else {
                return Ok(lhs);
            }
        }
    }

    fn parse_unary(&mut self) -> PResult<Expr> {
        self.enter()?;
        let out = if self.eat(&Tok::Minus) {
            self.parse_unary().map(|e| Expr::Neg(boxed(e)))
        } else if self.eat(&Tok::Plus) {
            self.parse_unary()
        } else if self.peek_cmd("pm") || self.peek_cmd("mp") {
            self.pos += 1;
            self.parse_unary().map(|e| Expr::PlusMinus(None, boxed(e)))
        } else {
            self.parse_power()
        };
        self.leave();
        out
    }

    fn parse_power(&mut self) -> PResult<Expr> {
        let base = self.parse_postfix()?;
        if self.eat(&Tok::Caret) {
            let exp = self.parse_exponent()?;
            let e = Expr::Pow(boxed(base), boxed(exp));
            // `x^2!` is rare; factorials after powers are not read.
            Ok(e)
        } else {
            Ok(base)
        }
    }

    fn parse_exponent(&mut self) -> PResult<Expr> {
        self.enter()?;
        let out = if self.eat(&Tok::Minus) {
            self.parse_exponent().map(|e| Expr::Neg(boxed(e)))
        } else if self.eat(&Tok::Plus) {
            self.parse_exponent()
        } else {
            self.split_word();
            self.parse_power()
        };
        self.leave();
        out
    }

    fn parse_postfix(&mut self) -> PResult<Expr> {
        let mut e = self.parse_primary()?;
        while self.eat(&Tok::Bang) {
            e = Expr::Factorial(boxed(e));
        }
        Ok(e)
    }

    /// When the next token is a word of several letters, leaves only its first letter in place
    /// (a LaTeX argument without braces is one character).
    fn split_word(&mut self) {
        if let Some(Tok::Word(w)) = self.toks.get(self.pos) {
            let mut chars = w.chars();
            if let (Some(first), rest) = (chars.next(), chars.as_str()) {
                if !rest.is_empty() {
                    let rest = rest.to_string();
                    self.replace_peeked(Tok::Word(first.to_string()));
                    self.toks.insert(self.pos + 1, Tok::Word(rest));
                }
            }
        }
    }

    /// The argument of `\frac`, `\sqrt`, `\binom`: a braced group, or one character.
    fn parse_arg(&mut self) -> PResult<Expr> {
        self.enter()?;
        let out = self.parse_arg_inner();
        self.leave();
        out
    }

    fn parse_arg_inner(&mut self) -> PResult<Expr> {
        match self.peek() {
            Some(Tok::LBrace) => {
                self.pos += 1;
                let e = self.parse_union()?;
                self.expect(&Tok::RBrace)?;
                Ok(e)
            }
            Some(Tok::Num(s)) if s.chars().count() > 1 => {
                let mut chars = s.chars();
                let first = chars.next().ok_or(ParseError::UnexpectedEnd)?;
                let rest = chars.as_str().to_string();
                self.replace_peeked(Tok::Num(rest));
                if first == '.' {
                    return Err(ParseError::Unexpected("'.' as an argument".into()));
                }
                Ok(Expr::Number(BigRational::from_integer(BigInt::from(
                    first.to_digit(10).unwrap_or(0),
                ))))
            }
            Some(Tok::Word(_)) => {
                self.split_word();
                match self.bump()? {
                    Tok::Word(w) => Ok(w
                        .chars()
                        .next()
                        .map(letter)
                        .ok_or(ParseError::UnexpectedEnd)?),
                    other => Err(ParseError::Unexpected(format!("{other:?}"))),
                }
            }
            _ => self.parse_primary(),
        }
    }

    fn parse_primary(&mut self) -> PResult<Expr> {
        self.enter()?;
        let out = self.parse_primary_inner();
        self.leave();
        out
    }

    fn parse_primary_inner(&mut self) -> PResult<Expr> {
        match self.bump()? {
            Tok::Num(s) => {
                if self.eat(&Tok::Underscore) {
                    let base = self.subscript_text()?;
                    let base: u32 = base
                        .parse()
                        .map_err(|_| ParseError::Unexpected(format!("base {base}")))?;
                    return Ok(Expr::BaseNumber { digits: s, base });
                }
                Ok(Expr::Number(decimal(&s)?))
            }
            Tok::Word(w) => self.parse_word(&w),
            Tok::Cmd(c) => self.parse_command(&c),
            Tok::LParen => self.parse_bracketed(false),
            Tok::LBrack => self.parse_bracketed(true),
            Tok::LBrace => {
                let mut items = self.parse_list()?;
                self.expect(&Tok::RBrace)?;
                Ok(if items.len() == 1 {
                    items.remove(0)
                } else {
                    Expr::Set(items)
                })
            }
            Tok::LSet => {
                if self.eat(&Tok::RSet) {
                    return Ok(Expr::Set(Vec::new()));
                }
                let items = self.parse_list()?;
                self.expect(&Tok::RSet)?;
                Ok(Expr::Set(items))
            }
            Tok::Pipe => {
                self.abs_depth += 1;
                let inner = self.parse_sum();
                self.abs_depth -= 1;
                let inner = inner?;
                self.expect(&Tok::Pipe)?;
                Ok(Expr::Abs(boxed(inner)))
            }
            other => Err(ParseError::Unexpected(format!("{other:?}"))),
        }
    }

    /// `( … )`, `[ … ]` and mixed-end intervals. `open_closed` tells whether it opened with `[`.
    fn parse_bracketed(&mut self, open_closed: bool) -> PResult<Expr> {
        let mut items = self.parse_list()?;
        let close_closed = match self.bump()? {
            Tok::RParen => false,
            Tok::RBrack => true,
            other => return Err(ParseError::Unexpected(format!("{other:?}"))),
        };
        match (items.len(), open_closed, close_closed) {
            (1, a, b) if a == b => Ok(items.remove(0)),
            (2, false, false) => Ok(Expr::Tuple(items)),
            (2, lo_closed, hi_closed) => {
                let hi = items.pop().ok_or(ParseError::UnexpectedEnd)?;
                let lo = items.pop().ok_or(ParseError::UnexpectedEnd)?;
                Ok(Expr::Interval {
                    lo: boxed(lo),
                    hi: boxed(hi),
                    lo_closed,
                    hi_closed,
                })
            }
            (_, a, b) if a == b => Ok(Expr::Tuple(items)),
            _ => Err(ParseError::Unexpected("mismatched brackets".into())),
        }
    }

    /// The text of a subscript: one token, or a braced group of tokens.
    fn subscript_text(&mut self) -> PResult<String> {
        let render = |t: &Tok| -> String {
            match t {
                Tok::Num(s) | Tok::Word(s) => s.clone(),
                Tok::Cmd(c) => format!("\\{c}"),
                other => format!("{other:?}"),
            }
        };
        match self.bump()? {
            Tok::LBrace => {
                let mut out = String::new();
                let mut depth = 1usize;
                loop {
                    let t = self.bump()?;
                    match t {
                        Tok::LBrace => depth += 1,
                        Tok::RBrace => {
                            depth -= 1;
                            if depth == 0 {
                                return Ok(out);
                            }
                        }
                        _ => {}
                    }
                    out.push_str(&render(&t));
                }
            }
            t @ (Tok::Num(_) | Tok::Word(_) | Tok::Cmd(_)) => Ok(render(&t)),
            other => Err(ParseError::Unexpected(format!("subscript {other:?}"))),
        }
    }

    fn variable(&mut self, name: String) -> PResult<Expr> {
        if self.eat(&Tok::Underscore) {
            let sub = self.subscript_text()?;
            return Ok(Expr::Var(format!("{name}_{sub}")));
        }
        Ok(if name == "e" {
            Expr::Const(Constant::E)
        } else {
            Expr::Var(name)
        })
    }

    fn parse_word(&mut self, w: &str) -> PResult<Expr> {
        if let Some(f) = func_named(w) {
            return self.parse_function(f);
        }
        match w {
            "pi" => return Ok(Expr::Const(Constant::Pi)),
            "inf" | "infty" | "infinity" => return Ok(Expr::Const(Constant::Infinity)),
            "sqrt" => return self.parse_root(),
            "log" => return self.parse_log(),
            _ => {}
        }
        let chars: Vec<char> = w.chars().collect();
        match chars.as_slice() {
            [c] => self.variable(c.to_string()),
            [a, b] if !TWO_LETTER_WORDS.contains(&w.to_ascii_lowercase().as_str()) => {
                let second = self.variable(b.to_string())?;
                Ok(Expr::Mul(boxed(letter(*a)), boxed(second)))
            }
            _ => Err(ParseError::Text(w.to_string())),
        }
    }

    fn parse_command(&mut self, c: &str) -> PResult<Expr> {
        if let Some(f) = func_named(c) {
            return self.parse_function(f);
        }
        match c {
            "frac" | "dfrac" | "tfrac" | "cfrac" => {
                let num = self.parse_arg()?;
                let den = self.parse_arg()?;
                Ok(Expr::Div(boxed(num), boxed(den)))
            }
            "sqrt" => self.parse_root(),
            "binom" | "dbinom" | "tbinom" => {
                let n = self.parse_arg()?;
                let k = self.parse_arg()?;
                Ok(Expr::Binom(boxed(n), boxed(k)))
            }
            "log" => self.parse_log(),
            "pi" => Ok(Expr::Const(Constant::Pi)),
            "infty" | "infin" => Ok(Expr::Const(Constant::Infinity)),
            "emptyset" | "varnothing" => Ok(Expr::Set(Vec::new())),
            "begin" => self.parse_matrix(),
            w if WRAPPERS.contains(&w) => self.parse_arg(),
            g if GREEK.contains(&g) => self.variable(format!("\\{g}")),
            other => Err(ParseError::Unexpected(format!("\\{other}"))),
        }
    }

    fn parse_root(&mut self) -> PResult<Expr> {
        let index = if self.eat(&Tok::LBrack) {
            let i = self.parse_sum()?;
            self.expect(&Tok::RBrack)?;
            Some(boxed(i))
        } else {
            None
        };
        let radicand = self.parse_arg()?;
        Ok(Expr::Root {
            index,
            radicand: boxed(radicand),
        })
    }

    fn parse_log(&mut self) -> PResult<Expr> {
        if self.eat(&Tok::Underscore) {
            let base = self.parse_arg()?;
            let arg = self.parse_func_arg()?;
            return Ok(Expr::Log {
                base: boxed(base),
                arg: boxed(arg),
            });
        }
        self.parse_function(Func::Ln)
    }

    /// `f x`, `f(x)`, `f^2 x` (the square of `f x`).
    fn parse_function(&mut self, f: Func) -> PResult<Expr> {
        let power = if self.eat(&Tok::Caret) {
            Some(self.parse_exponent()?)
        } else {
            None
        };
        let arg = self.parse_func_arg()?;
        let applied = Expr::Apply(f, boxed(arg));
        Ok(match power {
            Some(p) => Expr::Pow(boxed(applied), boxed(p)),
            None => applied,
        })
    }

    fn parse_func_arg(&mut self) -> PResult<Expr> {
        self.enter()?;
        let out = if matches!(self.peek(), Some(Tok::LParen | Tok::LBrace)) {
            self.parse_primary()
        } else {
            self.parse_power()
        };
        self.leave();
        out
    }

    fn parse_matrix(&mut self) -> PResult<Expr> {
        self.expect(&Tok::LBrace)?;
        let env = match self.bump()? {
            Tok::Word(w) => w,
            other => return Err(ParseError::Unexpected(format!("environment {other:?}"))),
        };
        self.expect(&Tok::RBrace)?;
        if !MATRIX_ENVS.contains(&env.as_str()) {
            return Err(ParseError::Unexpected(format!("environment {env}")));
        }
        if env == "array" && self.eat(&Tok::LBrace) {
            while !self.eat(&Tok::RBrace) {
                self.bump()?;
            }
        }
        let mut rows: Vec<Vec<Expr>> = Vec::new();
        let mut row = Vec::new();
        loop {
            if self.peek_cmd("end") {
                self.pos += 1;
                self.expect(&Tok::LBrace)?;
                self.bump()?;
                self.expect(&Tok::RBrace)?;
                if !row.is_empty() {
                    rows.push(row);
                }
                break;
            }
            row.push(self.parse_sum()?);
            match self.bump()? {
                Tok::Amp => {}
                Tok::RowSep => rows.push(std::mem::take(&mut row)),
                Tok::Cmd(c) if c == "end" => {
                    self.pos -= 1;
                }
                other => return Err(ParseError::Unexpected(format!("{other:?} in matrix"))),
            }
        }
        let width = rows.first().map_or(0, Vec::len);
        if width == 0 || rows.iter().any(|r| r.len() != width) {
            return Err(ParseError::Unexpected("ragged matrix".into()));
        }
        Ok(Expr::Matrix(rows))
    }
}
