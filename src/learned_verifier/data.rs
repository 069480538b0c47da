//! Labelled candidate sets: what the learned outcome verifier is trained and evaluated on.
//!
//! One JSON line per problem: the question, the gold answer, which side of the harness's fixed
//! train / held-out split the problem is on, and every candidate a search produced for it —
//! its text (exactly what a verifier sees at run time), its answer, whether that answer is
//! right, its length, whether the model ended it, and its confidence summary. `ponder-eval
//! candidates` writes these files from a harness run; `ponder verifier train` refuses
//! held-out groups, so nothing reported is ever fitted on.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;

use ponder_verifiers::TraceConfidence;
use serde::{Deserialize, Serialize};

use super::error::{LearnedVerifierError, Result};
pub use crate::split::Split;

/// One candidate of a problem, labelled: what the harness records per candidate in its
/// result rows and what the learned verifier trains on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabelledCandidate {
    /// The solution text as the search produced it (what a verifier is shown).
    pub text: String,
    /// The candidate's final answer as the search recorded it (extracted or forced).
    pub answer: Option<String>,
    /// Whether `answer` is equivalent to the gold answer.
    pub correct: bool,
    /// Tokens generated.
    pub tokens: usize,
    /// Whether the model ended it (not a cap).
    pub finished: bool,
    /// Its confidence summary, if the generator reported log-probabilities.
    #[serde(default)]
    pub trace_confidence: Option<TraceConfidence>,
}

/// Every candidate of one problem.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CandidateGroup {
    /// Problem id in its dataset.
    pub problem_id: String,
    /// The question.
    pub question: String,
    /// The gold answer.
    pub gold: String,
    /// Which split the problem is on.
    pub split: Split,
    /// The candidates, in the order the search found them.
    pub candidates: Vec<LabelledCandidate>,
}

/// Reads a JSONL file of [`CandidateGroup`]s; a bad line is an error naming its number.
pub fn read_groups(path: &Path) -> Result<Vec<CandidateGroup>> {
    let file = std::fs::File::open(path).map_err(|e| LearnedVerifierError::read(path, e))?;
    let mut out = Vec::new();
    for (i, line) in BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| LearnedVerifierError::read(path, e))?;
        if line.trim().is_empty() {
            continue;
        }
        let group: CandidateGroup =
            serde_json::from_str(&line).map_err(|e| LearnedVerifierError::Corrupt {
                path: path.to_path_buf(),
                what: "candidate set (JSONL of candidate groups)",
                reason: format!("line {}: {e}", i + 1),
            })?;
        out.push(group);
    }
    Ok(out)
}

/// Writes groups as JSONL (one line each).
pub fn write_groups(path: &Path, groups: &[CandidateGroup]) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| LearnedVerifierError::write(dir, e))?;
    }
    let mut file = std::fs::File::create(path).map_err(|e| LearnedVerifierError::write(path, e))?;
    for g in groups {
        let line = serde_json::to_string(g).map_err(|e| LearnedVerifierError::write(path, e))?;
        writeln!(file, "{line}").map_err(|e| LearnedVerifierError::write(path, e))?;
    }
    Ok(())
}
