//! Grading JSONL pairs: the engine behind `ponder-eval grade`.
//!
//! Each input line is a JSON object with a `gold` answer and a `pred` (a model's output; both
//! strings, or numbers for GSM8K-style golds). Each output line is the same object with four
//! fields added — `equivalent` (bool), `extracted` (the answer found in `pred`, or null),
//! `normalized_gold`, `normalized_pred` — computed by [`ponder_verifiers::grade`], so anyone can
//! audit the grader on their own pairs. Other fields pass through untouched (keys come out in
//! sorted order).
//!
//! Invariants: blank lines are skipped; a line that is not such an object stops the run with an
//! error naming the line (a silently skipped line would skew an audit).

use crate::error::{EvalError, Result};
use serde_json::{Map, Value};
use std::io::{BufRead, Write};

/// Counts from one grading run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct GradeSummary {
    /// Pairs graded.
    pub graded: usize,
    /// Pairs graded equivalent.
    pub equivalent: usize,
    /// Pairs whose prediction had no answer to extract.
    pub no_answer: usize,
}

/// Grades every `{"gold": …, "pred": …}` line of `input`, writing the annotated lines to
/// `output`.
///
/// ```
/// let input = r#"{"gold": "\\frac{1}{2}", "pred": "so \\boxed{0.5}"}"#;
/// let mut out = Vec::new();
/// let summary = ponder_evals::grade_jsonl(input.as_bytes(), &mut out)?;
/// assert_eq!(summary.equivalent, 1);
/// let line: serde_json::Value = serde_json::from_slice(&out)?;
/// assert_eq!(line["equivalent"], true);
/// assert_eq!(line["extracted"], "0.5");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn grade_jsonl(input: impl BufRead, mut output: impl Write) -> Result<GradeSummary> {
    let mut summary = GradeSummary::default();
    for (i, line) in input.lines().enumerate() {
        let line_no = i + 1;
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(&line).map_err(|source| EvalError::Json {
            line: line_no,
            source,
        })?;
        let Value::Object(mut record) = value else {
            return Err(EvalError::Record {
                line: line_no,
                reason: "expected a JSON object".into(),
            });
        };
        let gold = text_field(&record, "gold", line_no)?;
        let pred = text_field(&record, "pred", line_no)?;
        let grade = ponder_verifiers::grade(&gold, &pred);
        summary.graded += 1;
        summary.equivalent += usize::from(grade.equivalent);
        summary.no_answer += usize::from(grade.extracted.is_none());
        record.insert("equivalent".into(), Value::Bool(grade.equivalent));
        record.insert(
            "extracted".into(),
            grade.extracted.map_or(Value::Null, Value::String),
        );
        record.insert(
            "normalized_gold".into(),
            Value::String(grade.normalized_gold),
        );
        record.insert(
            "normalized_pred".into(),
            grade.normalized_pred.map_or(Value::Null, Value::String),
        );
        serde_json::to_writer(&mut output, &record)
            .map_err(|e| EvalError::Io(std::io::Error::other(e)))?;
        output.write_all(b"\n")?;
    }
    output.flush()?;
    Ok(summary)
}

/// A field as text: a string as is, a number as written (`72`, `0.5`).
fn text_field(record: &Map<String, Value>, field: &str, line: usize) -> Result<String> {
    match record.get(field) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Number(n)) => Ok(n.to_string()),
        Some(other) => Err(EvalError::Record {
            line,
            reason: format!("`{field}` must be a string or a number, not {other}"),
        }),
        None => Err(EvalError::Record {
            line,
            reason: format!("missing `{field}`"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(input: &str) -> Result<(GradeSummary, Vec<Value>)> {
        let mut out = Vec::new();
        let summary = grade_jsonl(input.as_bytes(), &mut out)?;
        let lines = String::from_utf8_lossy(&out)
            .lines()
            .map(serde_json::from_str)
            .collect::<std::result::Result<Vec<Value>, _>>()
            .map_err(|source| EvalError::Json { line: 0, source })?;
        Ok((summary, lines))
    }

    #[test]
    fn annotates_each_line_and_keeps_other_fields() -> Result<()> {
        let input = concat!(
            r#"{"id": 7, "gold": "72", "pred": "so 48+24=72\n#### 72"}"#,
            "\n\n",
            r#"{"gold": 3, "pred": "I have no idea."}"#,
            "\n",
            r#"{"gold": "x = \\dfrac{1}{2}", "pred": "\\boxed{0.4}"}"#,
            "\n",
        );
        let (summary, lines) = run(input)?;
        assert_eq!(
            summary,
            GradeSummary {
                graded: 3,
                equivalent: 1,
                no_answer: 1
            }
        );
        assert_eq!(lines[0]["id"], 7);
        assert_eq!(lines[0]["equivalent"], true);
        assert_eq!(lines[0]["extracted"], "72");
        assert_eq!(lines[1]["equivalent"], false);
        assert_eq!(lines[1]["extracted"], Value::Null);
        assert_eq!(lines[1]["normalized_pred"], Value::Null);
        assert_eq!(lines[2]["normalized_gold"], "\\frac{1}{2}");
        assert_eq!(lines[2]["normalized_pred"], "0.4");
        Ok(())
    }

    #[test]
    fn bad_lines_are_errors_naming_the_line() {
        let err = |input: &str| run(input).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            err("{\"gold\": \"1\", \"pred\": \"1\"}\nnot json").starts_with("line 2: invalid JSON")
        );
        assert_eq!(err("[1, 2]"), "line 1: expected a JSON object");
        assert_eq!(err(r#"{"pred": "1"}"#), "line 1: missing `gold`");
        assert!(
            err(r#"{"gold": "1", "pred": null}"#).contains("`pred` must be a string or a number")
        );
    }
}
