//! Strategy workloads on the real engine: `beam` (step-level beam search vs best-of-N at the
//! same N, same problem, same process) and `strategies` (accuracy and spend per strategy and
//! budget on a problem set, graded by the verifiers' math grader).

use std::path::Path;
use std::time::Instant;

use anyhow::Context as _;
use ponder_strategies::{Outcome, Registry};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::reason::{reason, ReasonRequest};
use ponder_engine::Runtime;

/// One problem with its gold answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BenchProblem {
    /// Stable id.
    pub id: String,
    /// The question.
    pub problem: String,
    /// The gold answer.
    pub answer: String,
}

/// Reads a JSONL file of `{"id", "problem", "answer"}`.
pub fn load_problems(path: &Path) -> anyhow::Result<Vec<BenchProblem>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l)
                .with_context(|| format!("{}:{}: not a problem object", path.display(), i + 1))
        })
        .collect()
}

/// What one search cost.
#[derive(Debug, Clone, Serialize)]
pub struct RunCost {
    /// Wall time.
    pub wall_s: f64,
    /// Tokens sampled.
    pub generated_tokens: u64,
    /// Context tokens computed.
    pub prefill_tokens_computed: u64,
    /// Context tokens served from the prefix cache.
    pub prefill_tokens_reused: u64,
    /// What a search calling an engine without prefix sharing would prefill: every
    /// extension's whole context (prompt + its path so far), summed over the tree.
    pub naive_prefill_tokens: u64,
    /// Engine calls' generated tokens per second of wall time.
    pub tokens_per_s: f64,
    /// Answer found.
    pub answer: Option<String>,
}

impl RunCost {
    fn of(out: &Outcome, wall_s: f64) -> Self {
        let u = out.usage;
        Self {
            wall_s,
            generated_tokens: u.generated_tokens,
            prefill_tokens_computed: u.prefill_tokens_computed,
            prefill_tokens_reused: u.prefill_tokens_reused,
            naive_prefill_tokens: out
                .tree
                .nodes()
                .filter_map(|n| n.parent)
                .map(|p| {
                    u.prompt_tokens
                        + out
                            .tree
                            .path(p)
                            .iter()
                            .filter_map(|i| out.tree.get(*i))
                            .map(|x| x.tokens as u64)
                            .sum::<u64>()
                })
                .sum(),
            tokens_per_s: if wall_s > 0.0 {
                u.generated_tokens as f64 / wall_s
            } else {
                0.0
            },
            answer: out.answer.clone(),
        }
    }
}

/// The `beam` report.
#[derive(Debug, Serialize)]
pub struct BeamReport {
    /// Workload name.
    pub workload: &'static str,
    /// Candidates per step (beam) and solutions (best-of-N).
    pub n: usize,
    /// Beams kept per step.
    pub width: usize,
    /// The problem.
    pub problem: String,
    /// Step-level beam search.
    pub beam: RunCost,
    /// Best-of-N at the same N (the baseline).
    pub best_of_n: RunCost,
    /// `beam.wall_s / best_of_n.wall_s`.
    pub wall_ratio: f64,
    /// `beam.generated_tokens / best_of_n.generated_tokens`.
    pub generated_ratio: f64,
    /// `beam.prefill_tokens_computed / beam.naive_prefill_tokens`: the share of a non-sharing
    /// engine's prefill the beam search actually computed.
    pub beam_prefill_computed_fraction: f64,
}

fn block_on<F: std::future::Future>(f: F) -> anyhow::Result<F::Output> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(f))
}

fn run_one(
    runtime: &Runtime,
    registry: &Registry,
    req: &ReasonRequest,
) -> anyhow::Result<(Outcome, f64)> {
    let start = Instant::now();
    let out = block_on(reason(
        registry,
        runtime.generator(),
        None,
        req,
        CancellationToken::new(),
    ))??;
    Ok((out, start.elapsed().as_secs_f64()))
}

/// Runs beam search and best-of-N with the same N on `problem`; best-of-N first, then beam.
pub fn beam_vs_best_of_n(
    runtime: &Runtime,
    problem: &str,
    n: usize,
    width: usize,
    max_tokens: usize,
) -> anyhow::Result<BeamReport> {
    let registry = Registry::with_builtins();
    let request = |strategy: &str, params: serde_json::Value| ReasonRequest {
        problem: problem.into(),
        history: Vec::new(),
        shots: Vec::new(),
        strategy: strategy.into(),
        params,
        budget_tokens: 1_000_000,
        deadline_ms: None,
        seed: 7,
    };
    let steps = serde_json::json!({"max_step_tokens": 64, "max_steps": max_tokens.div_ceil(64)});
    let (bon, bon_s) = run_one(
        runtime,
        &registry,
        &request(
            "best_of_n",
            serde_json::json!({"n": n, "max_tokens": max_tokens, "score_by": "confidence"}),
        ),
    )?;
    let (beam, beam_s) = run_one(
        runtime,
        &registry,
        &request(
            "beam_search",
            serde_json::json!({"n": n, "width": width, "steps": steps, "score_by": "confidence"}),
        ),
    )?;
    let (beam, bon) = (RunCost::of(&beam, beam_s), RunCost::of(&bon, bon_s));
    Ok(BeamReport {
        workload: "beam",
        n,
        width,
        problem: problem.into(),
        wall_ratio: beam.wall_s / bon.wall_s.max(1e-9),
        generated_ratio: beam.generated_tokens as f64 / bon.generated_tokens.max(1) as f64,
        beam_prefill_computed_fraction: beam.prefill_tokens_computed as f64
            / beam.naive_prefill_tokens.max(1) as f64,
        beam,
        best_of_n: bon,
    })
}

/// What the `strategies` table runs.
#[derive(Debug, Clone)]
pub struct TableOptions {
    /// Strategy names.
    pub strategies: Vec<String>,
    /// Token budgets.
    pub budgets: Vec<u64>,
    /// Seed of every search.
    pub seed: u64,
}

/// One cell row of the table.
#[derive(Debug, Clone, Serialize)]
pub struct TableRow {
    /// Strategy.
    pub strategy: String,
    /// Budget in tokens.
    pub budget: u64,
    /// Problems run.
    pub problems: usize,
    /// Problems answered correctly (math grader).
    pub correct: usize,
    /// `correct / problems`.
    pub accuracy: f64,
    /// Mean tokens charged per problem.
    pub mean_spent: f64,
    /// Mean tokens generated per problem.
    pub mean_generated: f64,
    /// Mean wall time per problem, in seconds.
    pub mean_wall_s: f64,
    /// Searches stopped by the budget.
    pub budget_stops: usize,
    /// Searches that failed (e.g. budget too small for any answer).
    pub errors: usize,
}

/// Runs every strategy at every budget on every problem.
pub fn strategy_table(
    runtime: &Runtime,
    problems: &[BenchProblem],
    opts: &TableOptions,
) -> anyhow::Result<Vec<TableRow>> {
    // `auto` needs the router (encoder + router file): loaded only when the table runs it.
    let registry = if opts.strategies.iter().any(|s| s == "auto") {
        crate::router::registry_with_auto(std::sync::Arc::new(
            crate::router::Router::load_default()?
        ))
    } else {
        Registry::with_builtins()
    };
    let bar = indicatif::ProgressBar::new(
        (opts.strategies.len() * opts.budgets.len() * problems.len()) as u64,
    );
    bar.set_style(indicatif::ProgressStyle::with_template(
        "{bar:40} {pos}/{len} {msg} [{elapsed}<{eta}]",
    )?);
    let mut rows = Vec::new();
    for strategy in &opts.strategies {
        for &budget in &opts.budgets {
            bar.set_message(format!("{strategy} @ {budget}"));
            let mut row = TableRow {
                strategy: strategy.clone(),
                budget,
                problems: problems.len(),
                correct: 0,
                accuracy: 0.0,
                mean_spent: 0.0,
                mean_generated: 0.0,
                mean_wall_s: 0.0,
                budget_stops: 0,
                errors: 0,
            };
            for p in problems {
                let req = ReasonRequest {
                    problem: p.problem.clone(),
                    history: Vec::new(),
                    shots: Vec::new(),
                    strategy: strategy.clone(),
                    params: serde_json::Value::Null,
                    budget_tokens: budget,
                    deadline_ms: None,
                    seed: opts.seed,
                };
                let start = Instant::now();
                match block_on(reason(
                    &registry,
                    runtime.generator(),
                    None,
                    &req,
                    CancellationToken::new(),
                ))? {
                    Ok(out) => {
                        let answer = out.answer.clone().unwrap_or_default();
                        if ponder_verifiers::equivalent(&p.answer, &answer) {
                            row.correct += 1;
                        }
                        if out.finish_reason == ponder_strategies::SearchFinish::Budget {
                            row.budget_stops += 1;
                        }
                        row.mean_spent += out.usage.spent() as f64;
                        row.mean_generated += out.usage.generated_tokens as f64;
                    }
                    Err(e) => {
                        tracing::debug!(strategy, budget, problem = p.id, error = %e, "search failed");
                        row.errors += 1;
                    }
                }
                row.mean_wall_s += start.elapsed().as_secs_f64();
                bar.inc(1);
            }
            let n = problems.len().max(1) as f64;
            row.accuracy = row.correct as f64 / n;
            row.mean_spent /= n;
            row.mean_generated /= n;
            row.mean_wall_s /= n;
            rows.push(row);
        }
    }
    bar.finish_and_clear();
    Ok(rows)
}

/// The table as Markdown: one row per strategy, accuracy and mean spend per budget.
pub fn markdown_table(rows: &[TableRow]) -> String {
    let mut budgets: Vec<u64> = rows.iter().map(|r| r.budget).collect();
    budgets.sort_unstable();
    budgets.dedup();
    let mut out = String::from("| strategy |");
    for b in &budgets {
        out.push_str(&format!(" acc @ {b} | tokens @ {b} |"));
    }
    out.push_str("\n|---|");
    out.push_str(&"---:|---:|".repeat(budgets.len()));
    out.push('\n');
    let mut names: Vec<&str> = rows.iter().map(|r| r.strategy.as_str()).collect();
    names.dedup();
    for name in names {
        out.push_str(&format!("| `{name}` |"));
        for b in &budgets {
            match rows.iter().find(|r| r.strategy == name && r.budget == *b) {
                Some(r) => out.push_str(&format!(
                    " {}/{} | {:.0} |",
                    r.correct, r.problems, r.mean_spent
                )),
                None => out.push_str(" – | – |"),
            }
        }
        out.push('\n');
    }
    out
}
