//! Final-answer extraction from a model's output.
//!
//! Looks, in order, for: the last `\boxed{…}` / `\fbox{…}` (nested braces allowed; `\boxed 5`
//! too), a GSM8K `#### n` line, a "final answer is …" / "the answer is …" / "Answer: …"
//! phrase, a whole output that is itself a short answer (`$\frac{1}{2}$`, `x = 3`, `Monday`),
//! and finally the last number. For thinking models (DeepSeek-R1 style) the search runs only on
//! the text after the last `</think>`: what the model thought is not what it answered.
//!
//! Invariants: total (never panics on any string), returns the raw answer substring, trimmed,
//! or `None` when there is no answer (an empty output, an unfinished think block).
#![deny(clippy::indexing_slicing)]

use std::collections::HashMap;

/// Pulls the final answer out of `text`. The result is the answer as written (trimmed);
/// normalise it with [`normalize_answer`](crate::normalize_answer) or compare it with
/// [`equivalent`](crate::equivalent).
///
/// ```
/// use ponder_verifiers::extract_answer;
///
/// assert_eq!(extract_answer(r"so \boxed{\frac{1}{2}}.").as_deref(), Some(r"\frac{1}{2}"));
/// assert_eq!(extract_answer("<think>maybe 3</think> The answer is 4.").as_deref(), Some("4"));
/// assert_eq!(extract_answer("She pays 5 + 7 = 12 dollars.\n#### 12").as_deref(), Some("12"));
/// assert_eq!(extract_answer("<think>still thinking about 7"), None);
/// assert_eq!(extract_answer("<think>done</think>"), None);
/// ```
pub fn extract_answer(text: &str) -> Option<String> {
    let region = match text.rfind("</think>") {
        Some(at) => &text[at + "</think>".len()..],
        // An open think block that never closed: the model has not answered yet.
        None if text.contains("<think>") => return None,
        None => text,
    };
    last_boxed(region)
        .or_else(|| gsm8k(region))
        .or_else(|| answer_phrase(region))
        .or_else(|| bare_answer(region))
        .or_else(|| last_math_or_number(region))
}

/// The later of the last `$…$` / `\(…\)` / `\[…\]` span and the last number outside it.
fn last_math_or_number(text: &str) -> Option<String> {
    let span = last_math_span(text);
    let number = last_number(text);
    match (span, number) {
        (Some((_, end, _)), Some((at, n))) if at >= end => Some(n),
        (Some((_, _, s)), _) => Some(s),
        (None, n) => n.map(|(_, n)| n),
    }
}

/// The last non-empty inline-math span: (start, end, content).
fn last_math_span(text: &str) -> Option<(usize, usize, String)> {
    let mut spans: Vec<(usize, usize, &str)> = Vec::new();
    // Unescaped dollars, `$$` counting as one delimiter, paired in order.
    let b = text.as_bytes();
    let mut delims: Vec<(usize, usize)> = Vec::new();
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        if c == b'\\' {
            i += 2;
            continue;
        }
        if c == b'$' {
            let len = if b.get(i + 1) == Some(&b'$') { 2 } else { 1 };
            delims.push((i, i + len));
            i += len;
            continue;
        }
        i += 1;
    }
    for pair in delims.chunks_exact(2) {
        if let &[(start, body), (body_end, end)] = pair {
            spans.push((start, end, &text[body..body_end]));
        }
    }
    for (open, close) in [("\\(", "\\)"), ("\\[", "\\]")] {
        let mut from = 0;
        while let Some(o) = text[from..].find(open).map(|o| o + from) {
            let body = o + open.len();
            let Some(c) = text[body..].find(close).map(|c| c + body) else {
                break;
            };
            spans.push((o, c + close.len(), &text[body..c]));
            from = c + close.len();
        }
    }
    spans
        .into_iter()
        .filter(|(_, _, s)| !s.trim().is_empty())
        .max_by_key(|&(_, end, _)| end)
        .map(|(start, end, s)| (start, end, s.trim().to_string()))
}

/// The content of the last well-formed, non-empty `\boxed`/`\fbox`.
fn last_boxed(text: &str) -> Option<String> {
    let mut starts: Vec<usize> = ["\\boxed", "\\fbox"]
        .iter()
        .flat_map(|pat| text.match_indices(pat).map(|(i, p)| i + p.len()))
        .collect();
    if starts.is_empty() {
        return None;
    }
    starts.sort_unstable();
    let pairs = brace_pairs(text);
    starts
        .iter()
        .rev()
        .find_map(|&after| boxed_content(text, after, &pairs))
}

/// For every `{` (not escaped) that is closed, the index of its `}`: one pass with a stack, so
/// trying many unbalanced boxes stays linear.
fn brace_pairs(text: &str) -> HashMap<usize, usize> {
    let b = text.as_bytes();
    let mut stack = Vec::new();
    let mut pairs = HashMap::new();
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        match c {
            b'\\' => i += 1,
            b'{' => stack.push(i),
            b'}' => {
                if let Some(open) = stack.pop() {
                    pairs.insert(open, i);
                }
            }
            _ => {}
        }
        i += 1;
    }
    pairs
}

fn boxed_content(text: &str, after: usize, pairs: &HashMap<usize, usize>) -> Option<String> {
    let rest = &text[after..];
    if rest.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return None; // `\boxedness`, not `\boxed`
    }
    let trimmed = rest.trim_start();
    let open = after + (rest.len() - trimmed.len());
    let content = if trimmed.starts_with('{') {
        let close = *pairs.get(&open)?;
        &text[open + 1..close]
    } else if rest.starts_with(' ') {
        // `\boxed 5`: up to the next space or dollar.
        let end = trimmed
            .find(|c: char| c.is_whitespace() || c == '$')
            .unwrap_or(trimmed.len());
        &trimmed[..end]
    } else {
        return None;
    };
    let content = content.trim();
    (!content.is_empty()).then(|| content.to_string())
}

fn gsm8k(text: &str) -> Option<String> {
    let at = text.rfind("####")?;
    let line = text[at + 4..].lines().next().unwrap_or("");
    let answer = line.trim().trim_end_matches('.').trim();
    (!answer.is_empty()).then(|| answer.to_string())
}

/// After the last "final answer is", "the answer is", "answer:": a `$…$` span, or the rest of
/// the sentence.
fn answer_phrase(text: &str) -> Option<String> {
    let lower = text.to_ascii_lowercase();
    let end = [
        "final answer is",
        "the answer is",
        "final answer:",
        "answer:",
        "final answer",
    ]
    .iter()
    .filter_map(|p| lower.rfind(p).map(|i| (i, i + p.len())))
    .max()
    .map(|(_, end)| end)?;
    let rest = text[end..].trim_start_matches(|c: char| c.is_whitespace() || c == ':' || c == '*');
    let rest = rest
        .strip_prefix("is ")
        .or_else(|| rest.strip_prefix("is:"))
        .unwrap_or(rest)
        .trim_start();
    for (open, close) in [("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]")] {
        if let Some(inner) = rest.strip_prefix(open) {
            if let Some(stop) = find_unescaped(inner, close) {
                let a = inner[..stop].trim();
                if !a.is_empty() {
                    return Some(a.to_string());
                }
            }
        }
    }
    let line = rest.lines().next().unwrap_or("");
    let sentence = sentence_end(line);
    let a = line[..sentence]
        .trim()
        .trim_end_matches(['.', ',', ';'])
        .trim();
    (!a.is_empty()).then(|| a.to_string())
}

/// Byte index of the first `pat` in `s` that is not escaped by a backslash (`\$` is a dollar
/// sign inside math, not the end of it).
fn find_unescaped(s: &str, pat: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(rel) = s.get(from..)?.find(pat) {
        let at = from + rel;
        let backslashes = s[..at].bytes().rev().take_while(|&c| c == b'\\').count();
        if backslashes % 2 == 0 {
            return Some(at);
        }
        from = at + pat.len();
    }
    None
}

/// Byte index where the first sentence of `line` ends: a `.` not between digits and followed
/// by a space or the end.
fn sentence_end(line: &str) -> usize {
    let b = line.as_bytes();
    for (i, &c) in b.iter().enumerate() {
        if c == b'.' {
            let next_is_space = b.get(i + 1).is_none_or(|n| n.is_ascii_whitespace());
            let prev_digit = i > 0 && b.get(i - 1).is_some_and(u8::is_ascii_digit);
            let next_digit = b.get(i + 1).is_some_and(u8::is_ascii_digit);
            if next_is_space && !(prev_digit && next_digit) {
                return i;
            }
        }
    }
    line.len()
}

/// The whole output, when it is one short line that is itself an answer: a `$…$` span, a math
/// expression the parser reads, or a word or two without digits.
fn bare_answer(text: &str) -> Option<String> {
    let t = text.trim();
    if t.is_empty() || t.contains('\n') || t.chars().count() > 200 || t.contains("\\boxed") {
        return None;
    }
    for (open, close) in [("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]")] {
        if let Some(inner) = t.strip_prefix(open).and_then(|i| i.strip_suffix(close)) {
            if !inner.contains(open) && !inner.trim().is_empty() {
                return Some(inner.trim().to_string());
            }
        }
    }
    if crate::latex::parse(&crate::normalize_answer(t)).is_ok() {
        return Some(t.to_string());
    }
    let words = t.split_whitespace().count();
    (words <= 2 && !t.contains(|c: char| c.is_ascii_digit())).then(|| t.to_string())
}

/// The last number in the text: an integer, a decimal, `1,234` with thousands separators, or a
/// simple fraction `a/b`.
fn last_number(text: &str) -> Option<(usize, String)> {
    let b = text.as_bytes();
    let mut best: Option<(usize, usize)> = None;
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        let starts =
            c.is_ascii_digit() || (c == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit));
        if !starts {
            i += 1;
            continue;
        }
        let start = i;
        while b
            .get(i)
            .is_some_and(|&c| c.is_ascii_digit() || matches!(c, b'.' | b',' | b'/'))
        {
            i += 1;
        }
        best = Some((start, i));
    }
    let (mut start, end) = best?;
    let mut run = text[start..end].trim_end_matches(['.', ',', '/']);
    if run.contains(',') && !thousands_ok(run) {
        let cut = run.rfind(',').map_or(0, |c| c + 1);
        start += cut;
        run = &run[cut..];
    }
    if run.matches('/').count() > 1 || run.matches('.').count() > 1 {
        let cut = run.rfind(['/', '.']).map_or(0, |c| c + 1);
        start += cut;
        run = &run[cut..];
    }
    if run.is_empty() {
        return None;
    }
    // A `-` right before the number, not after a word or a `)`.
    let negative = match b.get(..start) {
        Some([.., before, b'-']) => !(before.is_ascii_alphanumeric() || *before == b')'),
        Some([b'-']) => true,
        _ => false,
    };
    Some(if negative {
        (start - 1, format!("-{run}"))
    } else {
        (start, run.to_string())
    })
}

fn thousands_ok(run: &str) -> bool {
    let int = run.split('.').next().unwrap_or("");
    let groups: Vec<&str> = int.split(',').collect();
    let [first, rest @ ..] = groups.as_slice() else {
        return false;
    };
    !rest.is_empty()
        && (1..=3).contains(&first.len())
        && rest
            .iter()
            .all(|g| g.len() == 3 && g.bytes().all(|c| c.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check(text: &str, want: Option<&str>) {
        assert_eq!(
            extract_answer(text).as_deref(),
            want,
            "extracting from {text:?}"
        );
    }

    #[test]
    fn boxed_last_wins_with_nesting() {
        check(
            r"first \boxed{1} then \boxed{\frac{2}{3}}",
            Some(r"\frac{2}{3}"),
        );
        check(r"\boxed{\{1, 2\}}", Some(r"\{1, 2\}"));
        check(r"\fbox{7}", Some("7"));
        check(r"$\boxed 5$", Some("5"));
        check(r"ok \boxed{3} and broken \boxed{4", Some("3"));
        check(r"\boxed{}", None);
    }

    #[test]
    fn thinking_models_answer_after_think() {
        check(r"<think>\boxed{1}</think>So \boxed{2}", Some("2"));
        check(
            "<think>a lot of 12 and 13</think>\n\nThe answer is $14$.",
            Some("14"),
        );
        check("<think>12</think>   ", None);
        check("<think>truncated at 12", None);
        check(
            "reasoning without an opening tag</think> \\boxed{9}",
            Some("9"),
        );
    }

    #[test]
    fn phrases() {
        check(
            "The final answer is $\\frac{1}{2}$. I hope it is correct.",
            Some("\\frac{1}{2}"),
        );
        check("Thus the answer is 3.5.", Some("3.5"));
        check("Final Answer: 42", Some("42"));
        check(r"The answer is $\$18.90$.", Some(r"\$18.90"));
        check("So the answer is: Monday.", Some("Monday"));
    }

    #[test]
    fn gsm8k_and_numbers() {
        check("so 3 + 4 = 7\n#### 7", Some("7"));
        check("#### 1,000", Some("1,000"));
        check("It costs 12 dollars, then 1,250 more.", Some("1,250"));
        check("the points are (1,2)", Some("2"));
        check("he is -3 now", Some("-3"));
        check("from 3-5 years", Some("5"));
        check("probability 3/4 overall", Some("3/4"));
        check("no digits here at all", None);
        check("", None);
    }

    #[test]
    fn bare_answers() {
        check(r"\frac{1}{2}", Some(r"\frac{1}{2}"));
        check(r"$(1, 2)$", Some("(1, 2)"));
        check("x = 5", Some("x = 5"));
        check("Monday", Some("Monday"));
        check("I think 5", Some("5"));
        check(r"The probability is $\frac{1}{3}$.", Some(r"\frac{1}{3}"));
        check(r"We know $a=2$ and $b=3$, so the sum is 5.", Some("5"));
        check("It costs $5 and then $7.", Some("7"));
        check("**Answer:** 12", Some("12"));
    }
}
