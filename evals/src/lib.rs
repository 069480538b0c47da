//! Ponder's evaluation harness: datasets (MATH, MATH-500, AIME, GSM8K) from local files,
//! budget sweeps over strategies, grading, pass@k with confidence intervals, reports and plots.
//!
//! Uses the service as a user would, over HTTP or as a library. Today it holds grading:
//!
//! - [`grade`]: [`grade_jsonl`], the engine of `ponder-eval grade`, which grades
//!   `{"gold": …, "pred": …}` lines with `ponder-verifiers` so anyone can audit the grader.
//! - [`error`]: [`EvalError`] and [`Result`].

pub mod error;
pub mod grade;

pub use error::{EvalError, Result};
pub use grade::{grade_jsonl, GradeSummary};
