//! `ponder bench search`: every built-in strategy at the same N and step settings on one
//! problem, its generated tokens per second relative to `best_of_n` measured in the same run —
//! once without a verifier and once with the LLM-as-PRM. A tree search that overlaps its work
//! and never recomputes its tree should keep best-of-N's pace (issue 32 sets ≥ 0.8×); the
//! rows also carry `recomputed_tokens`, which should be 0 on this quiet engine.
//!
//! Every search runs to its own end under one generous budget, so strategies generate
//! different amounts; the ratio compares rates, not totals. Wall time includes the verifier.
//! Best-of-N runs once unreported per verifier first, so the baseline is warm; then `repeat`
//! rounds each run best-of-N and every strategy, and a row reports the median round's ratio
//! (each round's ratio is listed too).

use std::time::Instant;

use ponder_strategies::{Generator, Registry};
use serde::Serialize;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::models::FittedModel;
use crate::prm::VerifierChoice;
use crate::reason::{reason, ReasonRequest};
use ponder_engine::Runtime;

/// What the `search` workload runs.
#[derive(Debug, Clone)]
pub struct SearchBenchOptions {
    /// The problem.
    pub problem: String,
    /// Samples, beams, children per expansion: each strategy's N.
    pub n: usize,
    /// Most tokens per step (and per chunk for the streaming strategies).
    pub max_step_tokens: usize,
    /// Most steps; whole-solution strategies get `max_step_tokens * max_steps` tokens.
    pub max_steps: usize,
    /// Token budget of every search.
    pub budget_tokens: u64,
    /// Seed of every search.
    pub seed: u64,
    /// Rounds: each runs best-of-N and then every strategy, with each verifier.
    pub repeat: usize,
    /// The strategies to compare with best-of-N (empty: every built-in but `auto`).
    pub strategies: Vec<String>,
}

/// One strategy with one verifier.
#[derive(Debug, Clone, Serialize)]
pub struct SearchRow {
    /// Strategy.
    pub strategy: String,
    /// `none` or `llm-prm`.
    pub verifier: String,
    /// Wall time of the search (the median round's).
    pub wall_s: f64,
    /// Tokens sampled.
    pub generated_tokens: u64,
    /// `generated_tokens / wall_s`.
    pub tokens_per_s: f64,
    /// Median over rounds of `tokens_per_s` over best-of-N's in the same round and verifier.
    pub vs_best_of_n: f64,
    /// That ratio in every round, in order.
    pub vs_best_of_n_runs: Vec<f64>,
    /// Tokens the verifier computed.
    pub verifier_tokens: u64,
    /// Positions computed more than once (0 is the contract).
    pub recomputed_tokens: u64,
    /// Positions of the search's token tree.
    pub tree_tokens: u64,
    /// Why the search ended, or the error it failed with.
    pub finish: String,
}

/// The `search` report.
#[derive(Debug, Serialize)]
pub struct SearchReport {
    /// Workload name.
    pub workload: &'static str,
    /// The problem.
    pub problem: String,
    /// Each strategy's N.
    pub n: usize,
    /// Most tokens per step.
    pub max_step_tokens: usize,
    /// Most steps.
    pub max_steps: usize,
    /// Rounds per row.
    pub repeat: usize,
    /// Every strategy, without a verifier then with the LLM-as-PRM.
    pub rows: Vec<SearchRow>,
    /// The lowest `vs_best_of_n` per verifier (`none`, `llm-prm`).
    pub min_vs_best_of_n: Vec<(String, String, f64)>,
}

/// Each strategy's parameters at N and the step settings (its other settings at defaults).
fn params(strategy: &str, o: &SearchBenchOptions) -> Value {
    let steps = json!({"max_step_tokens": o.max_step_tokens, "max_steps": o.max_steps});
    let max_tokens = o.max_step_tokens * o.max_steps;
    let chunk_tokens = o.max_step_tokens;
    match strategy {
        "best_of_n" | "weighted_best_of_n" | "self_consistency" => {
            json!({"n": o.n, "max_tokens": max_tokens})
        }
        "beam_search" | "dvts" => json!({"n": o.n, "steps": steps}),
        "a_star" | "mcts" => json!({"expansions": o.n, "steps": steps}),
        // AB-MCTS's nodes are whole answers; its N is the batch TreeQuest asks for at once
        // (`ask_batch`), as best-of-N's is its samples in flight: N answers generating, two
        // batches in all, pipelined (the bench's budget never binds, so that mode replays).
        "ab_mcts" => json!({
            "iterations": 2, "batch": o.n, "pipeline": true, "max_tokens": max_tokens
        }),
        "answer_convergence" => json!({"n": o.n, "steps": steps}),
        "deepconf" => json!({"n": o.n, "max_tokens": max_tokens, "chunk_tokens": chunk_tokens}),
        "first_finish" | "short_m_of_k" => {
            json!({"k": o.n, "max_tokens": max_tokens, "chunk_tokens": chunk_tokens})
        }
        // Its default first round (4) where N allows, and its own chunk: there the chunk is
        // how often it counts finished traces to decide and widen, not a reasoning step.
        "adaptive_parallel" => json!({
            "initial": o.n.min(4), "max_n": o.n, "grow": o.n, "max_tokens": max_tokens
        }),
        _ => json!({}),
    }
}

fn block_on<F: std::future::Future>(f: F) -> anyhow::Result<F::Output> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(f))
}

fn run_one(
    runtime: &Runtime,
    served: &FittedModel,
    registry: &Registry,
    verifier: &VerifierChoice,
    req: &ReasonRequest,
) -> anyhow::Result<SearchRow> {
    let generator = runtime.generator();
    let start = Instant::now();
    let result = block_on(async {
        let judge: std::sync::Arc<dyn Generator> = generator.clone();
        let v = verifier
            .build(judge, served)
            .await
            .map_err(anyhow::Error::msg)?;
        anyhow::Ok(reason(registry, generator, v, req, CancellationToken::new()).await)
    })??;
    let wall_s = start.elapsed().as_secs_f64();
    let mut row = SearchRow {
        strategy: req.strategy.clone(),
        verifier: verifier.to_string(),
        wall_s,
        generated_tokens: 0,
        tokens_per_s: 0.0,
        vs_best_of_n: 0.0,
        vs_best_of_n_runs: Vec::new(),
        verifier_tokens: 0,
        recomputed_tokens: 0,
        tree_tokens: 0,
        finish: String::new(),
    };
    match result {
        Ok(out) => {
            let u = out.usage;
            row.generated_tokens = u.generated_tokens;
            row.tokens_per_s = u.generated_tokens as f64 / wall_s.max(1e-9);
            row.verifier_tokens = u.verifier_tokens;
            row.recomputed_tokens = u.recomputed_tokens;
            row.tree_tokens = u.tree_tokens;
            row.finish = serde_json::to_value(out.finish_reason)?
                .as_str()
                .unwrap_or_default()
                .to_string();
        }
        Err(e) => row.finish = format!("error: {e}"),
    }
    Ok(row)
}

/// Runs every built-in strategy (but `auto`, which delegates to one of them) without a verifier
/// and with the LLM-as-PRM, best-of-N first each time.
pub fn search_bench(
    runtime: &Runtime,
    served: &FittedModel,
    o: &SearchBenchOptions,
) -> anyhow::Result<SearchReport> {
    let registry = Registry::with_builtins();
    for name in &o.strategies {
        if !registry.contains(name) || name == "auto" {
            anyhow::bail!("--strategies: `{name}` is not a built-in strategy the bench runs");
        }
    }
    let mut names: Vec<String> = registry
        .names()
        .into_iter()
        .filter(|n| n != "auto" && n != "best_of_n")
        .filter(|n| o.strategies.is_empty() || o.strategies.contains(n))
        .collect();
    names.insert(0, "best_of_n".into());
    let request = |name: &str| ReasonRequest {
        problem: o.problem.clone(),
        history: Vec::new(),
        shots: Vec::new(),
        strategy: name.to_string(),
        params: params(name, o),
        budget_tokens: o.budget_tokens,
        deadline_ms: None,
        seed: o.seed,
    };
    let verifiers = [VerifierChoice::None, VerifierChoice::LlmPrm];
    // rounds[v][round][strategy]: every round runs best-of-N first, then each strategy, so a
    // ratio compares runs minutes apart on the same host.
    let mut rounds: Vec<Vec<Vec<SearchRow>>> = vec![Vec::new(); verifiers.len()];
    // Warm-up, not reported: the first search on a fresh engine pays first touches (the KV
    // pool's pages, the weights' cache lines, the verifier's first load), which would slow the
    // baseline and flatter every ratio after it.
    for verifier in &verifiers {
        run_one(runtime, served, &registry, verifier, &request("best_of_n"))?;
    }
    for round in 0..o.repeat.max(1) {
        for (v, verifier) in verifiers.iter().enumerate() {
            let mut this = Vec::with_capacity(names.len());
            for name in &names {
                let row = run_one(runtime, served, &registry, verifier, &request(name))?;
                tracing::info!(round, strategy = %name, verifier = %verifier, tokens_per_s = row.tokens_per_s, "search bench");
                this.push(row);
            }
            if let Some(r) = rounds.get_mut(v) {
                r.push(this);
            }
        }
    }
    let mut rows = Vec::new();
    let mut min_vs_best_of_n = Vec::new();
    for (verifier, runs) in verifiers.iter().zip(rounds) {
        let mut lowest: Option<(String, f64)> = None;
        for (i, name) in names.iter().enumerate() {
            let mut ratios = Vec::with_capacity(runs.len());
            let mut of_name: Vec<SearchRow> = Vec::with_capacity(runs.len());
            for round in &runs {
                let (Some(base), Some(row)) = (round.first(), round.get(i)) else {
                    continue;
                };
                ratios.push(row.tokens_per_s / base.tokens_per_s.max(1e-9));
                of_name.push(row.clone());
            }
            let Some(mid) = median_index(&ratios) else {
                continue;
            };
            let Some(mut row) = of_name.get(mid).cloned() else {
                continue;
            };
            row.vs_best_of_n = ratios.get(mid).copied().unwrap_or_default();
            row.vs_best_of_n_runs = ratios;
            if lowest.as_ref().is_none_or(|(_, r)| row.vs_best_of_n < *r) {
                lowest = Some((name.clone(), row.vs_best_of_n));
            }
            rows.push(row);
        }
        if let Some((name, ratio)) = lowest {
            min_vs_best_of_n.push((verifier.to_string(), name, ratio));
        }
    }
    Ok(SearchReport {
        workload: "search",
        problem: o.problem.clone(),
        n: o.n,
        max_step_tokens: o.max_step_tokens,
        max_steps: o.max_steps,
        repeat: o.repeat.max(1),
        rows,
        min_vs_best_of_n,
    })
}

/// The index of the median of `values` (the lower middle for an even count).
fn median_index(values: &[f64]) -> Option<usize> {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| values[a].total_cmp(&values[b]));
    order.get(values.len().saturating_sub(1) / 2).copied()
}

#[cfg(test)]
mod tests {
    use super::median_index;

    #[test]
    fn the_median_round_is_the_middle_ratio() {
        assert_eq!(median_index(&[]), None);
        assert_eq!(median_index(&[0.7]), Some(0));
        assert_eq!(median_index(&[0.9, 0.5, 0.7]), Some(2));
        assert_eq!(median_index(&[0.9, 0.5, 0.7, 0.8]), Some(2));
    }
}
