//! The results file of a run: one JSON line per (problem, strategy, budget, seed), appended and
//! flushed as each item finishes, so an interrupted run resumes where it stopped.
//!
//! On open, a torn last line (the process was killed mid-write) is cut off, so nothing written
//! before it is lost and nothing after it is half-counted; the keys of every complete line are
//! the items a resumed run skips.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use ponder::learned_verifier::LabelledCandidate;
use serde::{Deserialize, Serialize};

use crate::error::{EvalError, Result};

/// Tokens a search spent, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spend {
    /// Tokens sampled.
    pub generated_tokens: u64,
    /// Context tokens computed.
    pub prefill_tokens_computed: u64,
    /// Context tokens served from the prefix cache.
    pub prefill_tokens_reused: u64,
    /// Verifier calls.
    pub verifier_calls: u64,
    /// Tokens charged against the budget.
    pub spent: u64,
}

/// What a run ran on, recorded in each of its rows: the model, the dataset file and its
/// SHA-256, and the Ponder version that ran it — so rows of different models, files or
/// versions are never pooled unawares.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunInfo {
    /// The model (`None` over `--url`, where the server's model is not known to the harness).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<ponder::models::FittedModel>,
    /// The dataset file's name.
    pub dataset: String,
    /// Its SHA-256 (hex).
    pub dataset_sha256: String,
    /// `ponder-eval`'s version.
    pub ponder_version: String,
}

/// One item's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultRow {
    /// Problem id.
    pub problem_id: String,
    /// Strategy.
    pub strategy: String,
    /// Token budget.
    pub budget: u64,
    /// Seed.
    pub seed: u64,
    /// Problem level, if the dataset has levels.
    pub level: Option<u32>,
    /// The verifier that scored the candidates (`none`; `server` over `--url`).
    #[serde(default = "no_verifier")]
    pub verifier: String,
    /// The strategy's parameters (`null`: defaults).
    #[serde(default)]
    pub params: serde_json::Value,
    /// Worked examples shown before the question (`--shots`; 0, and absent from the JSON:
    /// none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub shots: usize,
    /// Ids of the worked examples shown, most similar first (the outcome's `shots`; absent:
    /// none, or a row written before they were recorded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shown: Vec<String>,
    /// The load `auto`'s router ran under (pinned at 0 by default), if `auto` ran.
    #[serde(default)]
    pub load: Option<f64>,
    /// What `auto` ran for this item (its row's bin and strategy, what its probe saw), if
    /// `auto` ran (absent in rows written before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocated: Option<ponder::router::Allocated>,
    /// Gold answer.
    pub gold: String,
    /// The strategy's answer.
    pub answer: Option<String>,
    /// Whether `answer` is equivalent to `gold`.
    pub correct: bool,
    /// Every candidate's answer, in the order found (for pass@k and maj@k).
    pub candidate_answers: Vec<Option<String>>,
    /// Every candidate's score, in the same order (for AUROC and weighted votes).
    #[serde(default)]
    pub candidate_scores: Vec<Option<f32>>,
    /// Every candidate whole, in the same order: what an outcome verifier is trained and
    /// evaluated on (`ponder-eval candidates` exports them; empty in rows written before).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub candidates: Vec<LabelledCandidate>,
    /// How many candidates were correct.
    pub candidates_correct: usize,
    /// `completed`, `budget`, `deadline`, `cancelled`; `None` on error.
    pub finish_reason: Option<String>,
    /// The search's error (e.g. budget too small), if it failed.
    pub error: Option<String>,
    /// The HTTP status of a server that answered with an error other than a search's typed
    /// refusal (401, 429, 5xx…): the item did not run, so the row is not graded, reports skip
    /// it and a resumed run retries it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_status: Option<u16>,
    /// Tokens by kind.
    pub spend: Spend,
    /// Wall time (the only field that differs between identical runs).
    pub wall_ms: u64,
    /// What the run ran on (absent in rows written before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<RunInfo>,
    /// The row was redacted ([`ResultRow::redacted`]): its gold answer, answers and candidate
    /// texts were taken out (each candidate's answer reads `null`), so only its outcome
    /// (`correct`, `candidates_correct`, how many candidates, spend) remains. Calibration and Pareto fronts read it; answer-level reports (maj@k, a
    /// verifier's AUROC) cannot.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub redacted: bool,
}

/// Whether a count is zero (for `skip_serializing_if`).
pub(crate) fn is_zero(n: &usize) -> bool {
    *n == 0
}

fn no_verifier() -> String {
    "none".into()
}

impl ResultRow {
    /// This row without the dataset's content: the gold answer, the strategy's answer, the
    /// candidates' answers and texts are taken out; the item's key, its outcome (`correct`,
    /// `candidates_correct`), scores and spend stay. A long run's redacted rows can be
    /// committed (the public benchmarks are read where they are, never copied) and a later
    /// run resumes from them: they are still result rows with the same keys.
    pub fn redacted(&self) -> ResultRow {
        ResultRow {
            gold: String::new(),
            answer: None,
            // Kept as many as there were (pass@k counts them), each unknown.
            candidate_answers: vec![None; self.candidate_answers.len()],
            candidates: Vec::new(),
            redacted: true,
            ..self.clone()
        }
    }

    /// The item key.
    pub fn key(&self) -> ItemKey {
        ItemKey {
            problem_id: self.problem_id.clone(),
            strategy: self.strategy.clone(),
            budget: self.budget,
            seed: self.seed,
            verifier: self.verifier.clone(),
            params: self.params.to_string(),
            shots: self.shots,
        }
    }
}

/// What identifies an item of the grid.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ItemKey {
    /// Problem id.
    pub problem_id: String,
    /// Strategy.
    pub strategy: String,
    /// Budget.
    pub budget: u64,
    /// Seed.
    pub seed: u64,
    /// Verifier.
    pub verifier: String,
    /// The strategy's parameters as JSON text (`null`: defaults), so one directory can hold
    /// the same strategy under several configurations.
    pub params: String,
    /// Worked examples shown before the question.
    pub shots: usize,
}

/// The results file of a run directory, open for appending.
#[derive(Debug)]
pub struct ResultsFile {
    path: PathBuf,
    file: File,
}

/// The results file's name inside a run directory.
pub const RESULTS_FILE: &str = "results.jsonl";

fn err(path: &Path, reason: impl std::fmt::Display) -> EvalError {
    EvalError::Results {
        path: path.display().to_string(),
        reason: reason.to_string(),
    }
}

/// Reads every complete row of `dir/results.jsonl`.
pub fn read_rows(dir: &Path) -> Result<Vec<ResultRow>> {
    let path = dir.join(RESULTS_FILE);
    let file = File::open(&path).map_err(|e| err(&path, e))?;
    let mut rows = Vec::new();
    for (i, line) in BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| err(&path, e))?;
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<ResultRow>(&line) {
            // A server error is no result (a resumed run writes the item again).
            Ok(row) if row.http_status.is_some() => {}
            Ok(row) => rows.push(row),
            Err(e) => {
                tracing::warn!(line = i + 1, error = %e, "skipping an unreadable result line")
            }
        }
    }
    Ok(rows)
}

impl ResultsFile {
    /// Opens (creating) `dir/results.jsonl` for this run alone, cuts a torn last line, and
    /// returns the file with the keys already done. The file stays locked (an advisory lock,
    /// released when the run ends): a second run into the same directory would write over this
    /// one's rows, so it is refused naming the file.
    pub fn open(dir: &Path) -> Result<(Self, HashSet<ItemKey>)> {
        std::fs::create_dir_all(dir).map_err(|e| err(dir, e))?;
        let path = dir.join(RESULTS_FILE);
        let mut file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| err(&path, e))?;
        file.try_lock().map_err(|e| match e {
            std::fs::TryLockError::WouldBlock => err(
                &path,
                "another run is writing it (two runs into one directory overwrite each other's \
                 rows); wait for it to end or give this one another --out",
            ),
            std::fs::TryLockError::Error(e) => err(&path, e),
        })?;
        // Read after the lock: no other run appends from here on.
        let bytes = std::fs::read(&path).map_err(|e| err(&path, e))?;
        // Keep everything up to the last complete line.
        let keep = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        let mut done = HashSet::new();
        let mut good_end = 0;
        for line in bytes[..keep].split_inclusive(|b| *b == b'\n') {
            match serde_json::from_slice::<ResultRow>(line) {
                Ok(row) => {
                    if row.http_status.is_none() {
                        done.insert(row.key());
                    }
                    good_end += line.len();
                }
                Err(_) if line.iter().all(u8::is_ascii_whitespace) => good_end += line.len(),
                Err(e) => {
                    return Err(err(
                        &path,
                        format!(
                            "line {} is not a result row ({e}); refusing to append after it",
                            done.len() + 1
                        ),
                    ))
                }
            }
        }
        file.set_len(good_end as u64).map_err(|e| err(&path, e))?;
        std::io::Seek::seek(&mut file, std::io::SeekFrom::End(0)).map_err(|e| err(&path, e))?;
        Ok((Self { path, file }, done))
    }

    /// Appends a row and flushes it to the OS.
    pub fn append(&mut self, row: &ResultRow) -> Result<()> {
        let mut line = serde_json::to_vec(row).map_err(|e| err(&self.path, e))?;
        line.push(b'\n');
        self.file.write_all(&line).map_err(|e| err(&self.path, e))?;
        self.file.flush().map_err(|e| err(&self.path, e))
    }
}

/// A graded row with neutral values, for tests to override with struct-update syntax.
#[cfg(test)]
pub(crate) fn test_row(id: &str) -> ResultRow {
    ResultRow {
        problem_id: id.into(),
        strategy: "s".into(),
        budget: 10,
        seed: 0,
        level: None,
        verifier: "none".into(),
        params: serde_json::Value::Null,
        shots: 0,
        shown: Vec::new(),
        load: None,
        allocated: None,
        gold: "1".into(),
        answer: Some("1".into()),
        correct: true,
        candidate_answers: vec![Some("1".into())],
        candidate_scores: vec![None],
        candidates: Vec::new(),
        candidates_correct: 1,
        finish_reason: Some("completed".into()),
        error: None,
        http_status: None,
        spend: Spend::default(),
        wall_ms: 3,
        run: None,
        redacted: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_torn_last_line_is_cut_and_complete_rows_are_kept() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| err(Path::new("tmp"), e))?;
        {
            let (mut f, done) = ResultsFile::open(dir.path())?;
            assert!(done.is_empty());
            f.append(&test_row("a"))?;
            f.append(&test_row("b"))?;
        }
        // Simulate a kill in the middle of writing a third row.
        let path = dir.path().join(RESULTS_FILE);
        let mut bytes = std::fs::read(&path).map_err(|e| err(&path, e))?;
        bytes.extend_from_slice(b"{\"problem_id\": \"c\", \"stra");
        std::fs::write(&path, &bytes).map_err(|e| err(&path, e))?;
        let (mut f, done) = ResultsFile::open(dir.path())?;
        assert_eq!(done.len(), 2);
        f.append(&test_row("c"))?;
        let rows = read_rows(dir.path())?;
        assert_eq!(
            rows.iter()
                .map(|r| r.problem_id.as_str())
                .collect::<Vec<_>>(),
            vec!["a", "b", "c"]
        );
        Ok(())
    }

    #[test]
    fn a_second_run_into_the_same_directory_is_refused_until_the_first_ends() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| err(Path::new("tmp"), e))?;
        let (mut first, _) = ResultsFile::open(dir.path())?;
        first.append(&test_row("a"))?;
        let refused = ResultsFile::open(dir.path()).expect_err("a second writer");
        let said = refused.to_string();
        assert!(
            said.contains("results.jsonl") && said.contains("another run is writing it"),
            "{said}"
        );
        // The refusal touched nothing: the first run goes on appending where it was.
        first.append(&test_row("b"))?;
        drop(first);
        let (_, done) = ResultsFile::open(dir.path())?;
        assert_eq!(done.len(), 2);
        Ok(())
    }

    #[test]
    fn redacted_rows_keep_keys_and_outcomes_and_nothing_of_the_dataset() -> Result<()> {
        let whole = ResultRow {
            gold: "18".into(),
            answer: Some("18".into()),
            candidate_answers: vec![Some("18".into()), Some("7".into()), None],
            candidate_scores: vec![Some(0.5), None, None],
            candidates_correct: 1,
            candidates: vec![LabelledCandidate {
                text: "3 * 6 = 18. The answer is 18.".into(),
                answer: Some("18".into()),
                correct: true,
                tokens: 12,
                finished: true,
                trace_confidence: None,
            }],
            spend: Spend {
                spent: 300,
                ..Spend::default()
            },
            ..test_row("gsm8k-train-12")
        };
        let redacted = whole.redacted();
        let line = serde_json::to_string(&redacted).map_err(|e| err(Path::new("row"), e))?;
        assert!(
            !line.contains("18\"") && !line.contains("answer is"),
            "{line}"
        );
        assert_eq!(redacted.key(), whole.key());
        assert_eq!(
            (
                redacted.correct,
                redacted.candidates_correct,
                redacted.spend
            ),
            (whole.correct, whole.candidates_correct, whole.spend)
        );
        assert_eq!(redacted.candidate_answers, vec![None, None, None]);
        assert_eq!(redacted.candidate_scores, whole.candidate_scores);
        // A results file of redacted rows resumes: its items count as done.
        let dir = tempfile::tempdir().map_err(|e| err(Path::new("tmp"), e))?;
        std::fs::write(dir.path().join(RESULTS_FILE), format!("{line}\n"))
            .map_err(|e| err(dir.path(), e))?;
        let (_, done) = ResultsFile::open(dir.path())?;
        assert!(done.contains(&whole.key()));
        assert_eq!(read_rows(dir.path())?, vec![redacted]);
        Ok(())
    }
}
