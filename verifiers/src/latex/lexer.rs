//! Tokens of the LaTeX math subset the parser reads.
//!
//! The lexer is total: every input either becomes a token list or a [`ParseError`]; it never
//! panics. Spacing commands (`\,`, `\!`, `\quad`, `\left`, `\right`, …) are dropped here so the
//! parser never sees them. Runs of ASCII letters become one [`Tok::Word`]; the parser decides
//! whether a word is a function name, a product of one-letter variables, or text.
#![deny(clippy::indexing_slicing)]

use super::ParseError;

/// Most tokens one answer may have; longer inputs are not math answers.
pub(crate) const MAX_TOKENS: usize = 4_000;

/// One token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Tok {
    /// Digits with at most one decimal point (`12`, `3.5`, `.5`).
    Num(String),
    /// A run of ASCII letters (`x`, `sin`, `Monday`).
    Word(String),
    /// A control word without its backslash (`frac`, `pi`, `alpha`).
    Cmd(String),
    LBrace,
    RBrace,
    LParen,
    RParen,
    LBrack,
    RBrack,
    /// `\{`
    LSet,
    /// `\}`
    RSet,
    Comma,
    Plus,
    Minus,
    /// `*`, `\cdot`, `\times`, `\ast`
    Star,
    /// `/`, `\div`
    Slash,
    Caret,
    Underscore,
    Eq,
    Lt,
    Gt,
    Le,
    Ge,
    Ne,
    Bang,
    /// `|`, `\vert`, `\lvert`, `\rvert`, `\mid`
    Pipe,
    Amp,
    /// `\\`
    RowSep,
    Prime,
    Semicolon,
}

/// Splits `src` into tokens.
pub(crate) fn lex(src: &str) -> Result<Vec<Tok>, ParseError> {
    let chars: Vec<char> = src.chars().collect();
    let mut toks = Vec::new();
    let mut i = 0;
    while let Some(&c) = chars.get(i) {
        if toks.len() > MAX_TOKENS {
            return Err(ParseError::TooLong);
        }
        if c.is_whitespace() || c == '~' {
            i += 1;
            continue;
        }
        if c.is_ascii_digit() || (c == '.' && chars.get(i + 1).is_some_and(|d| d.is_ascii_digit()))
        {
            let start = i;
            let mut seen_dot = false;
            while let Some(&d) = chars.get(i) {
                if d.is_ascii_digit() {
                    i += 1;
                } else if d == '.'
                    && !seen_dot
                    && chars.get(i + 1).is_some_and(|n| n.is_ascii_digit())
                {
                    seen_dot = true;
                    i += 1;
                } else {
                    break;
                }
            }
            toks.push(Tok::Num(substring(&chars, start, i)));
            continue;
        }
        if c.is_ascii_alphabetic() {
            let start = i;
            while chars.get(i).is_some_and(char::is_ascii_alphabetic) {
                i += 1;
            }
            toks.push(Tok::Word(substring(&chars, start, i)));
            continue;
        }
        if c == '\\' {
            i += 1;
            let Some(&n) = chars.get(i) else {
                return Err(ParseError::Unexpected("trailing backslash".into()));
            };
            if n.is_ascii_alphabetic() {
                let start = i;
                while chars.get(i).is_some_and(char::is_ascii_alphabetic) {
                    i += 1;
                }
                let name = substring(&chars, start, i);
                if let Some(t) = command_token(&name) {
                    toks.extend(t);
                } else {
                    toks.push(Tok::Cmd(name));
                }
                continue;
            }
            i += 1;
            match n {
                '{' => toks.push(Tok::LSet),
                '}' => toks.push(Tok::RSet),
                '\\' => toks.push(Tok::RowSep),
                '|' => toks.push(Tok::Pipe),
                ',' | '!' | ';' | ':' | ' ' | '>' => {}
                '%' | '$' | '#' | '&' | '_' => {}
                other => return Err(ParseError::Unexpected(format!("\\{other}"))),
            }
            continue;
        }
        let t = match c {
            '{' => Tok::LBrace,
            '}' => Tok::RBrace,
            '(' => Tok::LParen,
            ')' => Tok::RParen,
            '[' => Tok::LBrack,
            ']' => Tok::RBrack,
            ',' => Tok::Comma,
            '+' => Tok::Plus,
            '-' => Tok::Minus,
            '*' => Tok::Star,
            '/' => Tok::Slash,
            '^' => Tok::Caret,
            '_' => Tok::Underscore,
            '=' => Tok::Eq,
            '<' => Tok::Lt,
            '>' => Tok::Gt,
            '!' => Tok::Bang,
            '|' => Tok::Pipe,
            '&' => Tok::Amp,
            '\'' => Tok::Prime,
            ';' => Tok::Semicolon,
            other => return Err(ParseError::Unexpected(other.to_string())),
        };
        toks.push(t);
        i += 1;
    }
    Ok(toks)
}

/// `chars[start..end]` as a string (empty when the range is).
fn substring(chars: &[char], start: usize, end: usize) -> String {
    chars.iter().take(end).skip(start).collect()
}

/// Control words that are plain tokens (or nothing at all).
fn command_token(name: &str) -> Option<Vec<Tok>> {
    let t = match name {
        "cdot" | "times" | "ast" => Tok::Star,
        "div" => Tok::Slash,
        "le" | "leq" | "leqslant" => Tok::Le,
        "ge" | "geq" | "geqslant" => Tok::Ge,
        "lt" => Tok::Lt,
        "gt" => Tok::Gt,
        "ne" | "neq" => Tok::Ne,
        "vert" | "lvert" | "rvert" | "mid" => Tok::Pipe,
        "lbrace" => Tok::LSet,
        // `\langle a, b \rangle`: a vector written as a tuple.
        "langle" => Tok::LParen,
        "rangle" => Tok::RParen,
        "rbrace" => Tok::RSet,
        "left" | "right" | "big" | "Big" | "bigg" | "Bigg" | "bigl" | "bigr" | "Bigl" | "Bigr"
        | "quad" | "qquad" | "displaystyle" | "textstyle" | "limits" | "nolimits" => {
            return Some(Vec::new())
        }
        _ => return None,
    };
    Some(vec![t])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexes_numbers_words_and_commands() -> Result<(), ParseError> {
        let toks = lex(r"2.5x+\frac{1}{2}\cdot .5")?;
        assert_eq!(
            toks,
            vec![
                Tok::Num("2.5".into()),
                Tok::Word("x".into()),
                Tok::Plus,
                Tok::Cmd("frac".into()),
                Tok::LBrace,
                Tok::Num("1".into()),
                Tok::RBrace,
                Tok::LBrace,
                Tok::Num("2".into()),
                Tok::RBrace,
                Tok::Star,
                Tok::Num(".5".into()),
            ]
        );
        Ok(())
    }

    #[test]
    fn drops_spacing_and_sizing() -> Result<(), ParseError> {
        assert_eq!(
            lex(r"\left( 1 \right)\,\!")?,
            vec![Tok::LParen, Tok::Num("1".into()), Tok::RParen]
        );
        Ok(())
    }

    #[test]
    fn rejects_unknown_characters() {
        assert!(lex("1 ? 2").is_err());
        assert!(lex("\\").is_err());
    }
}
