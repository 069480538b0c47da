//! Datasets from local files: JSONL or a JSON array, with configurable field names and presets
//! for the standard files (MATH / MATH-500, AIME, GSM8K, and Ponder's own set), filters by
//! level and subject, the train / held-out split ([`crate::split`]), a seeded shuffle, a skip
//! and a limit (filters first, so `--split held-out --limit 200` is 200 held-out problems and
//! `--skip 80` starts after the first 80 of them).
//!
//! A record that cannot be read (bad JSON, a missing field) is reported with its line number
//! and skipped — or, with `strict`, stops the load. Nothing is ever guessed silently: a record
//! whose answer cannot be found is an error, not a problem with an empty answer.

use std::path::Path;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{EvalError, Result};
use crate::split::{split_of, Split};
use ponder::roles::{role_of, Role};

/// One problem of an evaluation: its question and its gold answer, as read from a dataset. Not
/// the question a search is asked (`ponder_strategies::Problem`, which has no answer).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvalProblem {
    /// Stable id (from the file, else `line-N`, or `<file name>:line-N` for a file read by
    /// [`load`], so the rows of two id-less files never share a key on resume).
    pub id: String,
    /// The question.
    pub problem: String,
    /// The gold answer (extracted from a solution's `\boxed{}` or after `####` if needed).
    pub answer: String,
    /// Difficulty level, if the dataset has one (MATH's "Level 3" → 3).
    pub level: Option<u32>,
    /// Subject or type, if any.
    pub subject: Option<String>,
    /// A worked solution, if the file has one (shown as a few-shot example when the problem is
    /// in the train split: `ponder-eval run --shots`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub solution: Option<String>,
}

/// Which fields hold what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fields {
    /// The question (first present wins).
    pub problem: Vec<String>,
    /// A final answer field.
    pub answer: Vec<String>,
    /// A worked solution whose `\boxed{}` (or `#### n`) is the answer, used when no answer field.
    pub solution: Vec<String>,
    /// Id fields.
    pub id: Vec<String>,
    /// Level fields.
    pub level: Vec<String>,
    /// Subject fields.
    pub subject: Vec<String>,
}

fn names(xs: &[&str]) -> Vec<String> {
    xs.iter().map(|s| s.to_string()).collect()
}

/// Presets for the standard files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Preset {
    /// Any of the fields below, first present wins.
    Auto,
    /// MATH / MATH-500: `problem`, `answer` or `solution` (boxed), `level`, `type`/`subject`.
    Math,
    /// AIME: `problem`/`question`, integer `answer`, `id`.
    Aime,
    /// GSM8K: `question`, `answer` holding a solution that ends in `#### n`.
    Gsm8k,
}

impl Preset {
    /// The field names of this preset.
    pub fn fields(self) -> Fields {
        match self {
            Self::Auto => Fields {
                problem: names(&["problem", "question", "Problem", "prompt"]),
                answer: names(&["answer", "Answer", "final_answer", "gold"]),
                solution: names(&["solution", "Solution"]),
                id: names(&["id", "unique_id", "ID", "idx"]),
                level: names(&["level", "Level"]),
                subject: names(&["subject", "type", "category"]),
            },
            Self::Math => Fields {
                problem: names(&["problem"]),
                answer: names(&["answer"]),
                solution: names(&["solution"]),
                id: names(&["unique_id", "id"]),
                level: names(&["level"]),
                subject: names(&["subject", "type"]),
            },
            Self::Aime => Fields {
                problem: names(&["problem", "question", "Problem"]),
                answer: names(&["answer", "Answer"]),
                solution: names(&["solution"]),
                id: names(&["id", "ID", "url"]),
                level: Vec::new(),
                subject: Vec::new(),
            },
            Self::Gsm8k => Fields {
                problem: names(&["question"]),
                answer: Vec::new(),
                solution: names(&["answer"]),
                id: names(&["id"]),
                level: Vec::new(),
                subject: Vec::new(),
            },
        }
    }
}

/// How to read and select a dataset's problems (not a model's `LoadOptions`, not a load test's
/// `LoadTestOptions`).
#[derive(Debug, Clone)]
pub struct DatasetOptions {
    /// Field names.
    pub fields: Fields,
    /// Keep only these levels (empty: all).
    pub levels: Vec<u32>,
    /// Keep only these subjects, case-insensitive (empty: all).
    pub subjects: Vec<String>,
    /// Shuffle with this seed before the limit.
    pub shuffle_seed: Option<u64>,
    /// Drop the first N after filtering and shuffling (before the limit).
    pub skip: usize,
    /// Keep the first N after filtering, shuffling and skipping.
    pub limit: Option<usize>,
    /// Stop at the first bad record instead of skipping it.
    pub strict: bool,
    /// Keep only this part of the train / held-out split ([`crate::split`]); `None`: all.
    pub split: Option<Split>,
    /// Keep only the public problems of this role ([`ponder::roles`]); `None`: all.
    pub role: Option<Role>,
}

impl Default for DatasetOptions {
    fn default() -> Self {
        Self {
            fields: Preset::Auto.fields(),
            levels: Vec::new(),
            subjects: Vec::new(),
            shuffle_seed: None,
            skip: 0,
            limit: None,
            strict: false,
            split: None,
            role: None,
        }
    }
}

/// A record that was skipped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skipped {
    /// 1-based line (JSONL) or element index + 1 (JSON array).
    pub line: usize,
    /// Why.
    pub reason: String,
}

/// What a load produced.
#[derive(Debug, Clone)]
pub struct Dataset {
    /// The selected problems, in order.
    pub problems: Vec<EvalProblem>,
    /// Records skipped as unreadable.
    pub skipped: Vec<Skipped>,
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.trim().to_string()).filter(|s| !s.is_empty()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn first(obj: &serde_json::Map<String, Value>, keys: &[String]) -> Option<String> {
    keys.iter().find_map(|k| obj.get(k).and_then(text))
}

/// `"Level 3"`, `"3"` or `3` → 3.
fn parse_level(s: &str) -> Option<u32> {
    s.trim().trim_start_matches("Level").trim().parse().ok()
}

/// Builds a problem from one record.
pub fn record(
    value: &Value,
    line: usize,
    fields: &Fields,
) -> std::result::Result<EvalProblem, String> {
    record_in(value, line, fields, None)
}

/// [`record`], an id-less record's id prefixed with `file` (`<file>:line-N`).
fn record_in(
    value: &Value,
    line: usize,
    fields: &Fields,
    file: Option<&str>,
) -> std::result::Result<EvalProblem, String> {
    let obj = value.as_object().ok_or("not a JSON object")?;
    let problem = first(obj, &fields.problem).ok_or_else(|| {
        format!(
            "no problem field (looked for {})",
            fields.problem.join(", ")
        )
    })?;
    let solution = first(obj, &fields.solution);
    let answer = match first(obj, &fields.answer) {
        Some(a) => a,
        None => {
            let solution = solution.clone().ok_or_else(|| {
                format!(
                    "no answer field (looked for {} and a solution in {})",
                    fields.answer.join(", "),
                    fields.solution.join(", ")
                )
            })?;
            ponder_verifiers::extract_answer(&solution)
                .ok_or("the solution has no final answer (\\boxed{} or ####)")?
        }
    };
    Ok(EvalProblem {
        id: first(obj, &fields.id).unwrap_or_else(|| match file {
            Some(file) => format!("{file}:line-{line}"),
            None => format!("line-{line}"),
        }),
        problem,
        answer,
        level: first(obj, &fields.level).and_then(|l| parse_level(&l)),
        subject: first(obj, &fields.subject),
        solution,
    })
}

/// Loads `path` (JSONL, or a JSON array when the file starts with `[`) and selects.
pub fn load(path: &Path, opts: &DatasetOptions) -> Result<Dataset> {
    let body = std::fs::read_to_string(path).map_err(|e| EvalError::Dataset {
        path: path.display().to_string(),
        reason: e.to_string(),
    })?;
    let file = path.file_name().map(|n| n.to_string_lossy().into_owned());
    parse_in(&body, opts, file.as_deref())
}

/// Parses a dataset's text and selects.
pub fn parse(body: &str, opts: &DatasetOptions) -> Result<Dataset> {
    parse_in(body, opts, None)
}

/// [`parse`], id-less records named after `file` ([`record_in`]).
fn parse_in(body: &str, opts: &DatasetOptions, file: Option<&str>) -> Result<Dataset> {
    let mut records: Vec<(usize, std::result::Result<Value, String>)> = Vec::new();
    if body.trim_start().starts_with('[') {
        let values: Vec<Value> =
            serde_json::from_str(body).map_err(|source| EvalError::Json { line: 1, source })?;
        records.extend(values.into_iter().enumerate().map(|(i, v)| (i + 1, Ok(v))));
    } else {
        for (i, line) in body.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            records.push((
                i + 1,
                serde_json::from_str(line).map_err(|e| format!("invalid JSON: {e}")),
            ));
        }
    }
    let mut problems = Vec::new();
    let mut skipped = Vec::new();
    for (line, value) in records {
        match value.and_then(|v| record_in(&v, line, &opts.fields, file)) {
            Ok(p) => problems.push(p),
            Err(reason) if opts.strict => return Err(EvalError::Record { line, reason }),
            Err(reason) => {
                tracing::warn!(line, %reason, "skipping dataset record");
                skipped.push(Skipped { line, reason });
            }
        }
    }
    problems
        .retain(|p| opts.levels.is_empty() || p.level.is_some_and(|l| opts.levels.contains(&l)));
    problems.retain(|p| {
        opts.subjects.is_empty()
            || p.subject
                .as_deref()
                .is_some_and(|s| opts.subjects.iter().any(|w| w.eq_ignore_ascii_case(s)))
    });
    if let Some(split) = opts.split {
        problems.retain(|p| split_of(&p.id) == split);
    }
    if let Some(role) = opts.role {
        problems.retain(|p| role_of(&p.id) == Some(role));
    }
    if let Some(seed) = opts.shuffle_seed {
        problems.shuffle(&mut rand_chacha::ChaCha8Rng::seed_from_u64(seed));
    }
    problems.drain(..opts.skip.min(problems.len()));
    if let Some(n) = opts.limit {
        problems.truncate(n);
    }
    Ok(Dataset { problems, skipped })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_read_the_standard_shapes() -> Result<()> {
        let math = r#"{"problem": "What is $1+1$?", "solution": "So it is $\\boxed{2}$.", "level": "Level 2", "type": "Algebra", "unique_id": "m1"}"#;
        let d = parse(
            math,
            &DatasetOptions {
                fields: Preset::Math.fields(),
                ..DatasetOptions::default()
            },
        )?;
        assert_eq!(d.problems[0].answer, "2");
        assert_eq!(d.problems[0].level, Some(2));
        assert_eq!(d.problems[0].subject.as_deref(), Some("Algebra"));
        let gsm = r#"{"question": "Two plus two?", "answer": "2+2=4\n#### 4"}"#;
        let d = parse(
            gsm,
            &DatasetOptions {
                fields: Preset::Gsm8k.fields(),
                ..DatasetOptions::default()
            },
        )?;
        assert_eq!(d.problems[0].answer, "4");
        assert_eq!(d.problems[0].id, "line-1");
        // Read from a file, an id-less record is named after it: two files' first lines
        // are two items on resume, not one.
        let dir = tempfile::tempdir()?;
        for name in ["a.jsonl", "b.jsonl"] {
            std::fs::write(dir.path().join(name), gsm)?;
        }
        let opts = DatasetOptions {
            fields: Preset::Gsm8k.fields(),
            ..DatasetOptions::default()
        };
        assert_eq!(
            load(&dir.path().join("a.jsonl"), &opts)?.problems[0].id,
            "a.jsonl:line-1"
        );
        assert_eq!(
            load(&dir.path().join("b.jsonl"), &opts)?.problems[0].id,
            "b.jsonl:line-1"
        );
        let aime = r#"[{"ID": "2024-I-1", "Problem": "Find n.", "Answer": 204}]"#;
        let d = parse(
            aime,
            &DatasetOptions {
                fields: Preset::Aime.fields(),
                ..DatasetOptions::default()
            },
        )?;
        assert_eq!(
            (d.problems[0].id.as_str(), d.problems[0].answer.as_str()),
            ("2024-I-1", "204")
        );
        Ok(())
    }

    #[test]
    fn bad_records_are_reported_with_their_line_and_skipped_or_fatal() -> Result<()> {
        let body = "{\"problem\": \"a\", \"answer\": \"1\"}\n{not json\n{\"problem\": \"b\"}\n\n{\"problem\": \"c\", \"answer\": 3}\n";
        let d = parse(body, &DatasetOptions::default())?;
        assert_eq!(d.problems.len(), 2);
        assert_eq!(
            d.skipped.iter().map(|s| s.line).collect::<Vec<_>>(),
            vec![2, 3]
        );
        assert!(d.skipped[1].reason.contains("no answer field"));
        let strict = parse(
            body,
            &DatasetOptions {
                strict: true,
                ..DatasetOptions::default()
            },
        );
        assert!(matches!(strict, Err(EvalError::Record { line: 2, .. })));
        Ok(())
    }

    #[test]
    fn filters_shuffle_and_limit() -> Result<()> {
        let body: String = (1..=20).map(|i| format!("{{\"id\": \"{i}\", \"problem\": \"q{i}\", \"answer\": \"{i}\", \"level\": {}}}\n", i % 5 + 1)).collect();
        let opts = DatasetOptions {
            levels: vec![2, 3],
            shuffle_seed: Some(7),
            limit: Some(5),
            ..DatasetOptions::default()
        };
        let a = parse(&body, &opts)?;
        let b = parse(&body, &opts)?;
        assert_eq!(a.problems, b.problems, "same seed, same order");
        assert_eq!(a.problems.len(), 5);
        assert!(a.problems.iter().all(|p| matches!(p.level, Some(2 | 3))));
        // --skip drops the first of the same order, before the limit.
        let skipped = parse(
            &body,
            &DatasetOptions {
                skip: 2,
                ..opts.clone()
            },
        )?;
        let all = parse(
            &body,
            &DatasetOptions {
                limit: None,
                ..opts.clone()
            },
        )?;
        assert_eq!(skipped.problems.as_slice(), &all.problems[2..7]);
        let past_end = DatasetOptions { skip: 100, ..opts };
        assert!(parse(&body, &past_end)?.problems.is_empty());
        Ok(())
    }
}
