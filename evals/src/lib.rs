//! Ponder's evaluation harness: datasets (MATH, MATH-500, AIME, GSM8K) from local files,
//! budget sweeps over strategies, grading, pass@k with confidence intervals, reports and plots.
//!
//! Uses the service as a user would, over HTTP or as a library. Its contents arrive with the
//! harness step (see DESIGN.md); today it holds the crate boundary only.
