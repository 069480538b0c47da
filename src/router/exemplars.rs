//! Few-shot exemplars chosen by the router: worked solutions of train-split problems, shown to
//! the model before a question as earlier user/assistant turns (Brown et al. 2020), the `k`
//! nearest to the question by the cosine of the router's all-MiniLM-L6-v2 embeddings (Liu et
//! al. 2022, "What Makes Good In-Context Examples for GPT-3?").
//!
//! The server (`ponder serve --exemplars`, a request's `shots`) and the harness
//! (`ponder-eval run --shots`) choose through this one module, so a seeded eval over either
//! sees the same examples. The choice is a pure function of the pool and the question: most
//! similar first, ties by pool order, never an example whose question is the question itself.
//!
//! This module must not show held-out problems: [`Exemplars::new`] drops every example whose
//! id is outside the train split ([`crate::split`]), whoever built the pool.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::embed::{cosine, Embedder};
use super::error::{Result, RouterError};
use crate::split::{split_of, Split};

/// Most worked examples one question may be shown.
pub const MAX_SHOTS: usize = 8;

/// How many worked examples a search is shown when its request sets no `shots`: the
/// operator's count when one is set (`--shots` of `ponder serve`, `ponder reason` and
/// `ponder-eval run`); otherwise, for `auto`, `auto_shots` — as many as its calibration rows
/// were measured with ([`super::Router::auto_shots`]), so it runs what was measured;
/// otherwise none.
pub fn default_shots(strategy: &str, operator: Option<usize>, auto_shots: usize) -> usize {
    match operator {
        Some(k) => k,
        None if strategy == "auto" => auto_shots,
        None => 0,
    }
}

/// Where the shipped pool lives, relative to the checkout: the generated grade-school problems
/// (each with a worked solution); only their train split is ever shown.
pub const DEFAULT_EXEMPLARS: &str = "evals/data/gsm_gen.jsonl";

/// `$PONDER_EXEMPLARS`, else `./evals/data/gsm_gen.jsonl` if present, else the checkout's.
pub fn default_exemplars_path() -> PathBuf {
    crate::models::shipped_path("PONDER_EXEMPLARS", DEFAULT_EXEMPLARS)
}

/// One worked example: a question and its solution.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shot {
    /// The example's problem id (decides its split).
    pub id: String,
    /// Its question (the user turn).
    pub problem: String,
    /// Its worked solution (the assistant turn).
    pub solution: String,
}

/// A pool of train-split worked examples, embedded once, and the encoder that embeds questions.
pub struct Exemplars {
    pool: Vec<Shot>,
    vectors: Vec<Vec<f32>>,
    embedder: Arc<Embedder>,
}

impl std::fmt::Debug for Exemplars {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exemplars")
            .field("pool", &self.pool.len())
            .finish_non_exhaustive()
    }
}

/// Questions embedded per encoder call.
const EMBED_BATCH: usize = 32;

impl Exemplars {
    /// The pool of `candidates` in the train split (the others are dropped), embedded with
    /// `embedder`. `None` when no candidate is left.
    pub fn new(candidates: Vec<Shot>, embedder: Arc<Embedder>) -> Result<Option<Self>> {
        let pool: Vec<Shot> = candidates
            .into_iter()
            .filter(|s| split_of(&s.id) == Split::Train)
            .collect();
        if pool.is_empty() {
            return Ok(None);
        }
        let vectors = embed_all(
            &embedder,
            &pool.iter().map(|s| s.problem.as_str()).collect::<Vec<_>>(),
        )?;
        Ok(Some(Self {
            pool,
            vectors,
            embedder,
        }))
    }

    /// The pool of a JSONL file of problems (`id`, `problem` and, to be an example, `solution`;
    /// other fields are ignored): its train-split rows with a solution. Fails naming the file
    /// and line of an unreadable row, or when no row is an example.
    pub fn load(path: &Path, embedder: Arc<Embedder>) -> Result<Self> {
        #[derive(Deserialize)]
        struct Row {
            id: String,
            problem: String,
            #[serde(default)]
            solution: Option<String>,
        }
        let file = std::fs::File::open(path).map_err(|e| RouterError::read(path, e))?;
        let mut candidates = Vec::new();
        for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
            let line = line.map_err(|e| RouterError::read(path, e))?;
            if line.trim().is_empty() {
                continue;
            }
            let row: Row = serde_json::from_str(&line).map_err(|e| {
                RouterError::corrupt(path, "worked-example file", format!("line {}: {e}", i + 1))
            })?;
            if let Some(solution) = row.solution.filter(|s| !s.trim().is_empty()) {
                candidates.push(Shot {
                    id: row.id,
                    problem: row.problem,
                    solution,
                });
            }
        }
        Self::new(candidates, embedder)?.ok_or_else(|| {
            RouterError::corrupt(
                path,
                "worked-example file",
                "no train-split row has a `solution` to show as an example",
            )
        })
    }

    /// How many worked examples the pool holds.
    pub fn len(&self) -> usize {
        self.pool.len()
    }

    /// Whether the pool is empty (never, once built).
    pub fn is_empty(&self) -> bool {
        self.pool.is_empty()
    }

    /// The `k` examples nearest to `question`: most similar first, ties by pool order, never
    /// one whose question is `question` itself.
    pub fn nearest(&self, question: &str, k: usize) -> Result<Vec<Shot>> {
        if k == 0 {
            return Ok(Vec::new());
        }
        let query = embed_all(&self.embedder, &[question])?
            .pop()
            .ok_or(RouterError::EmptyQuery)?;
        Ok(self.nearest_to(question, &query, k))
    }

    fn nearest_to(&self, question: &str, query: &[f32], k: usize) -> Vec<Shot> {
        let mut scored: Vec<(f32, usize)> = self
            .vectors
            .iter()
            .zip(&self.pool)
            .enumerate()
            .filter(|(_, (_, shot))| shot.problem != question)
            .map(|(i, (v, _))| (cosine(query, v), i))
            .collect();
        // Most similar first; equal similarity keeps pool order (a stable sort on the score).
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        scored
            .into_iter()
            .take(k)
            .filter_map(|(_, i)| self.pool.get(i).cloned())
            .collect()
    }
}

fn embed_all(embedder: &Embedder, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
    let mut out = Vec::with_capacity(texts.len());
    for chunk in texts.chunks(EMBED_BATCH) {
        out.extend(embedder.embed(chunk)?.into_iter().map(|e| e.vector));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_without_shots_gets_the_operators_count_else_autos_measured_count_else_none() {
        assert_eq!(default_shots("auto", None, 2), 2, "auto runs as measured");
        assert_eq!(default_shots("best_of_n", None, 2), 0);
        assert_eq!(
            default_shots("auto", Some(0), 2),
            0,
            "the operator's count wins"
        );
        assert_eq!(default_shots("best_of_n", Some(3), 2), 3);
    }

    /// Ids on each side of the split (the split is a hash of the id).
    fn ids(side: Split, n: usize) -> Vec<String> {
        (0..)
            .map(|i| format!("ex-{i}"))
            .filter(|id| split_of(id) == side)
            .take(n)
            .collect()
    }

    fn shot(id: &str, problem: &str, solution: &str) -> Shot {
        Shot {
            id: id.into(),
            problem: problem.into(),
            solution: solution.into(),
        }
    }

    /// The installed encoder (scripts/setup-models.sh, which scripts/test.sh runs).
    fn embedder() -> Arc<Embedder> {
        let dir = crate::models::default_embedder_dir();
        match Embedder::load(&dir) {
            Ok(e) => Arc::new(e),
            Err(e) => panic!("the encoder is not installed in {}: {e}", dir.display()),
        }
    }

    #[test]
    fn the_nearest_train_solutions_are_chosen_and_held_out_ones_never() -> Result<()> {
        let train = ids(Split::Train, 2);
        let held = ids(Split::HeldOut, 1);
        let travel = "A train travels at 40 miles per hour for 3 hours. How many miles?";
        let ex = Exemplars::new(
            vec![
                shot(&train[0], travel, "40 × 3 = 120"),
                shot(
                    &train[1],
                    "A jacket costs $80 and is 25% off. What is the sale price?",
                    "80 - 20 = 60",
                ),
                // Held out: its solution must never be shown.
                shot(
                    &held[0],
                    "A car travels at 50 miles per hour for 2 hours. How many miles?",
                    "SECRET",
                ),
            ],
            embedder(),
        )?
        .ok_or(RouterError::EmptyQuery)?;
        assert_eq!(ex.len(), 2, "only train examples are in the pool");
        let bus = "A bus travels at 30 miles per hour for 4 hours. How many miles?";
        let picked = ex.nearest(bus, 2)?;
        assert_eq!(picked.len(), 2);
        assert_eq!(
            picked[0].id, train[0],
            "the travel question is nearest the travel example"
        );
        assert!(picked.iter().all(|s| s.solution != "SECRET"));
        let own = ex.nearest(travel, 2)?;
        assert_eq!(own.len(), 1, "a question is never its own example");
        assert_eq!(own[0].id, train[1]);
        assert_eq!(ex.nearest(bus, 2)?, picked, "the choice replays");
        assert!(ex.nearest(bus, 0)?.is_empty());
        Ok(())
    }

    #[test]
    fn a_file_without_train_solutions_is_refused_naming_it() -> std::io::Result<()> {
        let held = ids(Split::HeldOut, 1);
        let train = ids(Split::Train, 1);
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("pool.jsonl");
        std::fs::write(
            &path,
            format!(
                "{{\"id\":\"{}\",\"problem\":\"q\",\"solution\":\"s\"}}\n\
                 {{\"id\":\"{}\",\"problem\":\"q2\",\"answer\":\"1\"}}\n",
                held[0], train[0]
            ),
        )?;
        let err = Exemplars::load(&path, embedder()).map(|e| e.len());
        assert!(
            matches!(&err, Err(RouterError::Corrupt { reason, path: p, .. })
                if reason.contains("solution") && p == &path),
            "{err:?}"
        );
        std::fs::write(&path, "{\"id\":\"x\"}\n")?;
        let err = Exemplars::load(&path, embedder()).map(|e| e.len());
        assert!(
            matches!(&err, Err(RouterError::Corrupt { reason, .. }) if reason.contains("line 1")),
            "{err:?}"
        );
        Ok(())
    }
}
