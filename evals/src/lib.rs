//! Ponder's evaluation harness: datasets (MATH, MATH-500, AIME, GSM8K, Ponder's own set) from
//! local files, grids of strategies × budgets × seeds run against a server or in-process,
//! grading with `ponder-verifiers`, reports with bootstrap CIs, pass@k and maj@k, plots, and
//! the router's calibration table.
//!
//! - [`dataset`]: loading, presets, filters, seeded shuffle.
//! - [`runner`]: the grid, backends (HTTP `/v1/reason`, [`inprocess`]), resumable results;
//!   [`shared_draws`]: one draw for the items whose strategies begin with the same samples.
//! - [`results`]: the append-only results file.
//! - [`report`], [`plot`], [`stats`], [`calibrate`](mod@calibrate): what a run measured.
//! - [`pareto`]: `ponder-eval pareto`, each budget's accuracy-vs-spend front and which
//!   configurations are dominated beyond the CIs.
//! - [`candidates`]: `ponder-eval candidates`, a run's candidates as labelled sets for the
//!   learned verifier.
//! - [`grade`]: `ponder-eval grade`, auditing the grader on anyone's pairs.
//! - [`gsm_gen`]: the seeded grade-school problem generator (`evals/data/gsm_gen.jsonl`).
//! - [`roles`](mod@roles): `ponder-eval roles`, the public sets' fit / validation / report /
//!   reserve id lists (`data/roles/`), written out from `ponder::roles`'s rule.
//! - [`split`]: the fixed train / held-out split by a hash of the problem id (re-exported
//!   from `ponder::split`, which the learned verifier's training shares).

pub mod calibrate;
pub mod candidates;
pub mod dataset;
pub mod error;
pub mod grade;
pub mod gsm_gen;
pub mod inprocess;
pub mod pareto;
pub mod plot;
pub mod report;
pub mod results;
pub mod roles;
pub mod runner;
pub mod shared_draws;
pub use ponder::split;
pub mod stats;

pub use calibrate::calibrate;
pub use dataset::{load, parse, Dataset, DatasetOptions, EvalProblem, Preset};
pub use error::{EvalError, Result};
pub use grade::{grade_jsonl, GradeSummary};
pub use inprocess::{InProcessBackend, ShotRule};
pub use report::{markdown, summarize, CellReport};
pub use results::{read_rows, ResultRow, ResultsFile};
pub use runner::{grid, run_grid, Backend, HttpBackend, Item, RunSummary};
pub use shared_draws::SharedDraws;
pub use split::{split_of, Split};
