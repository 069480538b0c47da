//! Few-shot exemplars: worked solutions of train-split problems shown to the model before a
//! question, as earlier turns of the conversation (Brown et al. 2020; chosen per question by
//! similarity, as in Liu et al. 2022, "What Makes Good In-Context Examples for GPT-3?").
//!
//! The pool is the train split ([`crate::split`]) of a dataset's problems that carry a worked
//! solution; a question's exemplars are the `k` pool problems nearest to it by the cosine of
//! their all-MiniLM-L6-v2 embeddings (the router's encoder), ties broken by pool order, the
//! question itself never among them. The choice is a pure function of the pool and the
//! question, so a seeded eval replays.
//!
//! This module must not choose from held-out problems: [`Exemplars::new`] drops every
//! problem outside the train split, so a held-out run shows the model only train solutions.

use ponder::router::{cosine, Embedder};
use serde::{Deserialize, Serialize};

use crate::dataset::EvalProblem;
use crate::error::{EvalError, Result};
use crate::split::{split_of, Split};

/// One worked example: a question and its solution.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shot {
    /// The example's problem id.
    pub id: String,
    /// Its question (the user turn).
    pub problem: String,
    /// Its worked solution (the assistant turn).
    pub solution: String,
}

/// The pool of train-split problems with worked solutions, embedded once.
pub struct Exemplars {
    pool: Vec<Shot>,
    vectors: Vec<Vec<f32>>,
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
    /// The pool from `problems`: those in the train split with a worked solution. Fails when
    /// none is left (the dataset has no solutions, or no train problems).
    pub fn new(problems: &[EvalProblem], embedder: &Embedder) -> Result<Self> {
        let pool: Vec<Shot> = problems
            .iter()
            .filter(|p| split_of(&p.id) == Split::Train)
            .filter_map(|p| {
                p.solution.as_ref().map(|s| Shot {
                    id: p.id.clone(),
                    problem: p.problem.clone(),
                    solution: s.clone(),
                })
            })
            .collect();
        if pool.is_empty() {
            return Err(EvalError::Dataset {
                path: "exemplars".into(),
                reason: "no train-split problem has a worked solution (a `solution` field) to \
                         show as an example"
                    .into(),
            });
        }
        let vectors = embed_all(
            embedder,
            &pool.iter().map(|s| s.problem.as_str()).collect::<Vec<_>>(),
        )?;
        Ok(Self { pool, vectors })
    }

    /// How many worked examples the pool holds.
    pub fn len(&self) -> usize {
        self.pool.len()
    }

    /// Whether the pool is empty (never, once built).
    pub fn is_empty(&self) -> bool {
        self.pool.is_empty()
    }

    /// The `k` examples nearest to each of `problems`, in the same order: most similar first,
    /// ties by pool order, never the problem itself (same id or same text).
    pub fn pick(
        &self,
        problems: &[EvalProblem],
        embedder: &Embedder,
        k: usize,
    ) -> Result<Vec<Vec<Shot>>> {
        if k == 0 {
            return Ok(vec![Vec::new(); problems.len()]);
        }
        let queries = embed_all(
            embedder,
            &problems
                .iter()
                .map(|p| p.problem.as_str())
                .collect::<Vec<_>>(),
        )?;
        Ok(problems
            .iter()
            .zip(&queries)
            .map(|(p, q)| self.nearest(p, q, k))
            .collect())
    }

    fn nearest(&self, problem: &EvalProblem, query: &[f32], k: usize) -> Vec<Shot> {
        let mut scored: Vec<(f32, usize)> = self
            .vectors
            .iter()
            .enumerate()
            .filter(|(i, _)| {
                self.pool
                    .get(*i)
                    .is_some_and(|s| s.id != problem.id && s.problem != problem.problem)
            })
            .map(|(i, v)| (cosine(query, v), i))
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
        let embedded = embedder
            .embed(chunk)
            .map_err(|e| EvalError::Backend(format!("embedding questions for exemplars: {e}")))?;
        out.extend(embedded.into_iter().map(|e| e.vector));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(id: &str, text: &str, solution: Option<&str>) -> EvalProblem {
        EvalProblem {
            id: id.into(),
            problem: text.into(),
            answer: "1".into(),
            level: None,
            subject: None,
            solution: solution.map(Into::into),
        }
    }

    /// Ids on each side of the split (the split is a hash of the id).
    fn ids(side: Split, n: usize) -> Vec<String> {
        (0..)
            .map(|i| format!("ex-{i}"))
            .filter(|id| split_of(id) == side)
            .take(n)
            .collect()
    }

    /// The installed encoder (scripts/setup-models.sh, which scripts/test.sh runs).
    fn embedder() -> Embedder {
        let dir = ponder::models::default_embedder_dir();
        match Embedder::load(&dir) {
            Ok(e) => e,
            Err(e) => panic!("the encoder is not installed in {}: {e}", dir.display()),
        }
    }

    #[test]
    fn the_nearest_train_solutions_are_chosen_and_held_out_ones_never() -> Result<()> {
        let embedder = embedder();
        let train = ids(Split::Train, 3);
        let held = ids(Split::HeldOut, 2);
        let problems = vec![
            problem(
                &train[0],
                "A train travels at 40 miles per hour for 3 hours. How many miles?",
                Some("40 × 3 = 120"),
            ),
            problem(
                &train[1],
                "A jacket costs $80 and is 25% off. What is the sale price?",
                Some("80 - 20 = 60"),
            ),
            problem(&train[2], "What is the capital of France?", None),
            // Held out, with a solution that must never be shown.
            problem(
                &held[0],
                "A car travels at 50 miles per hour for 2 hours. How many miles?",
                Some("SECRET"),
            ),
        ];
        let ex = Exemplars::new(&problems, &embedder)?;
        assert_eq!(
            ex.len(),
            2,
            "only train problems with a solution are in the pool"
        );
        let asked = vec![
            problem(
                &held[1],
                "A bus travels at 30 miles per hour for 4 hours. How many miles?",
                None,
            ),
            problem(
                &train[0],
                "A train travels at 40 miles per hour for 3 hours. How many miles?",
                None,
            ),
        ];
        let picked = ex.pick(&asked, &embedder, 2)?;
        assert_eq!(picked[0].len(), 2);
        assert_eq!(
            picked[0][0].id, train[0],
            "the travel question is nearest the travel example"
        );
        assert!(picked.iter().flatten().all(|s| s.solution != "SECRET"));
        assert_eq!(picked[1].len(), 1, "a problem is never its own example");
        assert_eq!(picked[1][0].id, train[1]);
        assert_eq!(ex.pick(&asked, &embedder, 2)?, picked, "the choice replays");
        assert!(ex.pick(&asked, &embedder, 0)?.iter().all(Vec::is_empty));
        Ok(())
    }

    #[test]
    fn a_dataset_without_train_solutions_is_refused() {
        let embedder = embedder();
        let held = ids(Split::HeldOut, 1);
        let train = ids(Split::Train, 1);
        let problems = vec![
            problem(&held[0], "q", Some("s")),
            problem(&train[0], "q2", None),
        ];
        let err = Exemplars::new(&problems, &embedder)
            .err()
            .map(|e| e.to_string());
        assert!(err.is_some_and(|e| e.contains("worked solution")));
    }
}
