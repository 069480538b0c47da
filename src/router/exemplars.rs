//! Few-shot exemplars chosen by the router: worked solutions of fit problems, shown to the
//! model before a question as earlier user/assistant turns (Brown et al. 2020), the `k`
//! nearest to the question by the cosine of the router's all-MiniLM-L6-v2 embeddings (Liu et
//! al. 2022, "What Makes Good In-Context Examples for GPT-3?").
//!
//! The shipped pool is GSM8K's training set (real worked solutions, its fit role,
//! [`crate::roles`]), read from the public benchmark files and described by a fitted manifest
//! ([`PoolManifest`], `data/exemplars/gsm8k.json`): which file (and its SHA-256), which
//! encoder, and the similarity floor below which a question is shown no example at all — a
//! question far from every worked example (an algebra question before grade-school
//! arithmetic) is better served by none than by ones of another kind. The floor is fitted on
//! the validation questions by `ponder router exemplars`, never on a reported problem.
//!
//! GSM8K writes its solutions with calculator annotations (`48/2 = <<48/2=24>>24`) and its
//! answer apart (`#### 72`); an example is shown as the model should answer: annotations
//! removed, one step per paragraph, and `The answer is \boxed{72}.` ([`worked_solution`]).
//!
//! The server (`ponder serve --exemplars`, a request's `shots`) and the harness
//! (`ponder-eval run --shots`) choose through this one module, so a seeded eval over either
//! sees the same examples. The choice is a pure function of the pool and the question: most
//! similar first, ties by pool order, never an example whose question is the question itself.
//! A pool file's question vectors are cached under the models directory, keyed by the file's
//! and the encoder weights' SHA-256, so each file is embedded once per machine.
//!
//! This module must not show problems nothing may be fitted on: [`Exemplars::new`] drops
//! every example outside the fit role ([`crate::roles::may_fit`]), whoever built the pool.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::embed::{cosine, Embedder};
use super::error::{Result, RouterError};
use crate::roles::may_fit;

mod vectors;
use vectors::{cached_vectors, vector_cache};

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

/// Where the shipped pool's manifest lives, relative to the checkout.
pub const DEFAULT_EXEMPLARS: &str = "data/exemplars/gsm8k.json";

/// `$PONDER_EXEMPLARS`, else `./data/exemplars/gsm8k.json` if present, else the checkout's.
pub fn default_exemplars_path() -> PathBuf {
    crate::models::shipped_path("PONDER_EXEMPLARS", DEFAULT_EXEMPLARS)
}

/// A fitted worked-example pool: the public file its examples come from and the similarity
/// floor fitted on validation questions (style rule 21: a fitted file says what it was
/// fitted on and with what).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PoolManifest {
    /// The benchmark file, relative to the benchmark directory ([`crate::roles::datasets_dir`]).
    pub dataset: String,
    /// Its SHA-256 (hex): another file is refused.
    pub dataset_sha256: String,
    /// Examples in the pool (its fit-role rows with a solution).
    pub examples: usize,
    /// The encoder the floor was fitted with.
    pub embedder: String,
    /// The encoder weights' SHA-256 (hex).
    pub embedder_sha256: String,
    /// A question whose nearest example is less similar than this (cosine) is shown none.
    pub min_similarity: f32,
    /// What the floor was fitted on.
    pub fitted_on: FloorFit,
    /// The command that wrote this file.
    pub command: String,
}

/// How a pool's similarity floor was fitted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FloorFit {
    /// The role of the questions it was fitted on (always `validation`).
    pub role: crate::roles::Role,
    /// How many questions (per public set).
    pub questions: std::collections::BTreeMap<String, usize>,
    /// The floor is this quantile of their nearest-example similarity: all but this share
    /// of in-distribution questions are shown examples.
    pub quantile: f64,
}

/// A floor at the `quantile` of `nearest` (each validation question's similarity to its
/// nearest example): the value below which that share of them falls.
pub fn similarity_floor(nearest: &[f32], quantile: f64) -> f32 {
    let mut sorted = nearest.to_vec();
    sorted.sort_by(f32::total_cmp);
    let at = ((sorted.len() as f64) * quantile.clamp(0.0, 1.0)).floor() as usize;
    sorted
        .get(at.min(sorted.len().saturating_sub(1)))
        .copied()
        .unwrap_or(0.0)
}

/// A solution as an example shows it: GSM8K's calculator annotations (`<<48/2=24>>`) removed,
/// one step per paragraph, and the answer stated as the model is asked to
/// (`The answer is \boxed{…}.`) unless the solution already boxes it.
///
/// ```
/// use ponder::router::exemplars::worked_solution;
///
/// let shown = worked_solution("She sold 48/2 = <<48/2=24>>24 clips.\nSo 48+24 = <<48+24=72>>72.", Some("72"));
/// assert_eq!(shown, "She sold 48/2 = 24 clips.\n\nSo 48+24 = 72.\n\nThe answer is \\boxed{72}.");
/// ```
pub fn worked_solution(solution: &str, answer: Option<&str>) -> String {
    let mut text = String::with_capacity(solution.len());
    let mut rest = solution;
    while let Some(open) = rest.find("<<") {
        let Some(close) = rest[open..].find(">>") else {
            break;
        };
        text.push_str(&rest[..open]);
        rest = &rest[open + close + 2..];
    }
    text.push_str(rest);
    let steps: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let mut shown = steps.join("\n\n");
    if let Some(answer) = answer.filter(|a| !a.trim().is_empty() && !shown.contains("\\boxed")) {
        shown.push_str(&format!("\n\nThe answer is \\boxed{{{}}}.", answer.trim()));
    }
    shown
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

/// A pool of worked examples of fit problems, embedded once, and the encoder that embeds
/// questions.
pub struct Exemplars {
    pool: Vec<Shot>,
    vectors: Vec<Vec<f32>>,
    embedder: Arc<Embedder>,
    /// Examples less similar to the question than this are not shown (0: every one may be).
    min_similarity: f32,
}

impl std::fmt::Debug for Exemplars {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exemplars")
            .field("pool", &self.pool.len())
            .finish_non_exhaustive()
    }
}

impl Exemplars {
    /// The pool of `candidates` that may be fitted on (the others are dropped,
    /// [`crate::roles::may_fit`]), embedded with `embedder`, with no similarity floor. `None`
    /// when no candidate is left.
    pub fn new(candidates: Vec<Shot>, embedder: Arc<Embedder>) -> Result<Option<Self>> {
        let pool: Vec<Shot> = candidates.into_iter().filter(|s| may_fit(&s.id)).collect();
        if pool.is_empty() {
            return Ok(None);
        }
        let vectors =
            embedder.embed_many(&pool.iter().map(|s| s.problem.as_str()).collect::<Vec<_>>())?;
        Ok(Some(Self {
            pool,
            vectors,
            embedder,
            min_similarity: 0.0,
        }))
    }

    /// The same pool, showing a question no example less similar to it than `floor`.
    pub fn with_min_similarity(mut self, floor: f32) -> Self {
        self.min_similarity = floor;
        self
    }

    /// The similarity floor ([`Exemplars::with_min_similarity`]).
    pub fn min_similarity(&self) -> f32 {
        self.min_similarity
    }

    /// The pool a manifest describes ([`PoolManifest`]): its file read from the benchmark
    /// directory ([`crate::roles::datasets_dir`]) and checked against the recorded SHA-256,
    /// with the fitted floor; the pool's vectors are cached under the models directory.
    pub fn load_manifest(path: &Path, embedder: Arc<Embedder>) -> Result<Self> {
        Self::load_manifest_from(
            path,
            &crate::roles::datasets_dir(),
            &crate::models::models_dir().join("cache"),
            embedder,
        )
    }

    /// [`Exemplars::load_manifest`] with the benchmark files in `datasets` and the vector
    /// cache in `cache_dir`.
    pub fn load_manifest_from(
        path: &Path,
        datasets: &Path,
        cache_dir: &Path,
        embedder: Arc<Embedder>,
    ) -> Result<Self> {
        let (manifest, sha, pool) = manifest_pool(path, datasets)?;
        if manifest.embedder_sha256 != embedder.weights_sha256() {
            return Err(RouterError::corrupt(
                path,
                "worked-example manifest",
                format!(
                    "its floor was fitted with the encoder whose weights' SHA-256 is {}, but the \
                     encoder loaded has {}",
                    manifest.embedder_sha256,
                    embedder.weights_sha256()
                ),
            ));
        }
        Self::embedded(pool, &sha, cache_dir, embedder, manifest.min_similarity)
    }

    /// `pool` (read from a file of SHA-256 `file_sha`) with its questions' vectors, from the
    /// cache in `cache_dir` or embedded (and cached), showing nothing below `min_similarity`.
    fn embedded(
        pool: Vec<Shot>,
        file_sha: &str,
        cache_dir: &Path,
        embedder: Arc<Embedder>,
        min_similarity: f32,
    ) -> Result<Self> {
        let cache = vector_cache(cache_dir, file_sha, embedder.weights_sha256());
        let vectors = cached_vectors(&cache, &pool, &embedder)?;
        Ok(Self {
            pool,
            vectors,
            embedder,
            min_similarity,
        })
    }

    /// Whether the pool at `path` can load: a JSONL file that exists, or a readable manifest
    /// whose benchmark file exists (the shipped pool reads GSM8K from the benchmark directory,
    /// which a machine may not have).
    pub fn available(path: &Path) -> bool {
        if path.extension().is_some_and(|e| e == "json") {
            read_manifest(path)
                .is_ok_and(|m| crate::roles::datasets_dir().join(m.dataset).is_file())
        } else {
            path.is_file()
        }
    }

    /// A pool from a manifest (`.json`, [`Exemplars::load_manifest`]) or a JSONL file of
    /// problems ([`Exemplars::load`]).
    pub fn load_any(path: &Path, embedder: Arc<Embedder>) -> Result<Self> {
        if path.extension().is_some_and(|e| e == "json") {
            Self::load_manifest(path, embedder)
        } else {
            Self::load(path, embedder)
        }
    }

    /// Each question's similarity to its nearest example (its own question excluded).
    pub fn nearest_similarities(&self, questions: &[&str]) -> Result<Vec<f32>> {
        let vectors = self.embedder.embed_many(questions)?;
        Ok(questions
            .iter()
            .zip(&vectors)
            .map(|(q, v)| {
                self.vectors
                    .iter()
                    .zip(&self.pool)
                    .filter(|(_, shot)| shot.problem != *q)
                    .map(|(p, _)| cosine(v, p))
                    .fold(f32::NEG_INFINITY, f32::max)
            })
            .collect())
    }

    /// The pool of a JSONL file of problems (`id`, `problem` and, to be an example, `solution`;
    /// an `answer` is stated at its end, [`worked_solution`]; other fields are ignored): its
    /// rows with a solution that may be fitted on. Fails naming the file and line of an
    /// unreadable row, or when no row is an example. Its vectors are cached under the models
    /// directory.
    pub fn load(path: &Path, embedder: Arc<Embedder>) -> Result<Self> {
        Self::load_from(path, &crate::models::models_dir().join("cache"), embedder)
    }

    /// [`Exemplars::load`] with the vector cache in `cache_dir`: a file embedded once with
    /// this encoder is not embedded again (the vectors are keyed by the file's and the
    /// encoder weights' SHA-256).
    pub fn load_from(path: &Path, cache_dir: &Path, embedder: Arc<Embedder>) -> Result<Self> {
        let (sha, pool) = pool_file(path)?;
        Self::embedded(pool, &sha, cache_dir, embedder, 0.0)
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
    /// one whose question is `question` itself, none less similar than the floor
    /// ([`Exemplars::with_min_similarity`]).
    pub fn nearest(&self, question: &str, k: usize) -> Result<Vec<Shot>> {
        if k == 0 {
            return Ok(Vec::new());
        }
        let query = self
            .embedder
            .embed_many(&[question])?
            .pop()
            .ok_or(RouterError::EmptyQuery)?;
        Ok(self.nearest_to(question, &query, k))
    }

    /// The same `k` examples for every question — the first `k` of the pool in its order
    /// (never one whose question is `question` itself, whatever the floor): the *fixed*
    /// few-shot baseline the nearest examples are compared with.
    pub fn fixed(&self, question: &str, k: usize) -> Vec<Shot> {
        self.pool
            .iter()
            .filter(|s| s.problem != question)
            .take(k)
            .cloned()
            .collect()
    }

    fn nearest_to(&self, question: &str, query: &[f32], k: usize) -> Vec<Shot> {
        let mut scored: Vec<(f32, usize)> = self
            .vectors
            .iter()
            .zip(&self.pool)
            .enumerate()
            .filter(|(_, (_, shot))| shot.problem != question)
            .map(|(i, (v, _))| (cosine(query, v), i))
            .filter(|(sim, _)| *sim >= self.min_similarity)
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

/// The rows of a JSONL file's `text` that have a solution, as examples show them (`path`
/// names the file in errors).
fn parse_candidates(path: &Path, text: &str) -> Result<Vec<Shot>> {
    #[derive(Deserialize)]
    struct Row {
        id: String,
        problem: String,
        #[serde(default)]
        solution: Option<String>,
        #[serde(default)]
        answer: Option<serde_json::Value>,
    }
    let mut candidates = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let row: Row = serde_json::from_str(line).map_err(|e| {
            RouterError::corrupt(path, "worked-example file", format!("line {}: {e}", i + 1))
        })?;
        if let Some(solution) = row.solution.filter(|s| !s.trim().is_empty()) {
            let answer = match row.answer {
                Some(serde_json::Value::String(a)) => Some(a),
                Some(serde_json::Value::Number(n)) => Some(n.to_string()),
                _ => None,
            };
            candidates.push(Shot {
                id: row.id,
                problem: row.problem,
                solution: worked_solution(&solution, answer.as_deref()),
            });
        }
    }
    Ok(candidates)
}

/// The SHA-256 of the JSONL file at `path` and its rows with a solution that may be fitted on;
/// refused when it has none.
fn pool_file(path: &Path) -> Result<(String, Vec<Shot>)> {
    let bytes = std::fs::read(path).map_err(|e| RouterError::read(path, e))?;
    let sha = crate::models::sha256_hex(&bytes);
    let text = String::from_utf8(bytes)
        .map_err(|e| RouterError::corrupt(path, "worked-example file", e.to_string()))?;
    let pool: Vec<Shot> = parse_candidates(path, &text)?
        .into_iter()
        .filter(|s| may_fit(&s.id))
        .collect();
    if pool.is_empty() {
        return Err(RouterError::corrupt(
            path,
            "worked-example file",
            "no row that may be fitted on has a `solution` to show as an example",
        ));
    }
    Ok((sha, pool))
}

/// The manifest at `path`, its benchmark file's SHA-256 and the pool it describes (the file's
/// fit-role rows with a solution), read from `datasets`: refused when the file is not the one
/// the manifest was fitted on, or holds another number of examples than it records.
fn manifest_pool(path: &Path, datasets: &Path) -> Result<(PoolManifest, String, Vec<Shot>)> {
    let manifest = read_manifest(path)?;
    let dataset = datasets.join(&manifest.dataset);
    let (sha, pool) = pool_file(&dataset)?;
    if sha != manifest.dataset_sha256 {
        return Err(RouterError::corrupt(
            &dataset,
            "worked-example file",
            format!(
                "its SHA-256 is {sha}, but {} was fitted on {}",
                path.display(),
                manifest.dataset_sha256
            ),
        ));
    }
    if pool.len() != manifest.examples {
        return Err(RouterError::corrupt(
            &dataset,
            "worked-example file",
            format!(
                "{} of its rows may be fitted on and have a solution, but {} records {}",
                pool.len(),
                path.display(),
                manifest.examples
            ),
        ));
    }
    Ok((manifest, sha, pool))
}

/// The manifest at `path`.
pub fn read_manifest(path: &Path) -> Result<PoolManifest> {
    let text = std::fs::read_to_string(path).map_err(|e| RouterError::read(path, e))?;
    serde_json::from_str(&text)
        .map_err(|e| RouterError::corrupt(path, "worked-example manifest", e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::split::{split_of, Split};

    /// The shipped manifest describes the benchmark file it names, where that file is here:
    /// its SHA-256 and its count of examples (the servers CI starts show a smaller pool, so the
    /// shipped one's 6,338 questions are not embedded on every clean clone; this is what loading
    /// it checks before it embeds).
    #[test]
    fn the_shipped_manifest_matches_its_benchmark_file() {
        let path = default_exemplars_path();
        let manifest = read_manifest(&path).expect("the shipped manifest parses");
        let dir = crate::roles::datasets_dir();
        if !dir.join(&manifest.dataset).is_file() {
            eprintln!("skipped: no {} in {}", manifest.dataset, dir.display());
            return;
        }
        let (read, _, pool) = manifest_pool(&path, &dir).expect("the shipped pool loads");
        assert_eq!(pool.len(), read.examples);
        assert!(pool.iter().all(|s| may_fit(&s.id)));
    }

    /// A manifest whose count of examples is not its file's is refused before anything is
    /// embedded, naming both counts.
    #[test]
    fn a_manifest_with_another_count_of_examples_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let rows: String = (0..40)
            .map(|i| {
                format!(
                    "{{\"id\": \"q-{i}\", \"problem\": \"What is {i} + 1?\", \"solution\": \"{i} + 1 = {}\\n#### {}\"}}\n",
                    i + 1,
                    i + 1
                )
            })
            .collect();
        std::fs::write(dir.path().join("set.jsonl"), &rows).expect("write set");
        let fit = parse_candidates(&dir.path().join("set.jsonl"), &rows)
            .expect("rows parse")
            .into_iter()
            .filter(|s| may_fit(&s.id))
            .count();
        assert!(fit > 0, "some of 40 ids fall in the fit role");
        let manifest =
            |examples: usize| test_manifest("set.jsonl", &rows, examples, &"0".repeat(64));
        let path = dir.path().join("pool.json");
        for (examples, ok) in [(fit, true), (fit + 1, false)] {
            std::fs::write(
                &path,
                serde_json::to_string(&manifest(examples)).expect("json"),
            )
            .expect("write manifest");
            match manifest_pool(&path, dir.path()) {
                Ok((_, _, pool)) => assert!(ok && pool.len() == fit),
                Err(e) => {
                    assert!(!ok, "{e}");
                    let said = e.to_string();
                    assert!(
                        said.contains(&fit.to_string()) && said.contains(&(fit + 1).to_string()),
                        "{said}"
                    );
                }
            }
        }
    }

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

    /// A manifest of `examples` examples in the file `dataset` whose text is `text`, fitted
    /// with the encoder whose weights' SHA-256 is `embedder_sha256`, with a floor of 0.5.
    fn test_manifest(
        dataset: &str,
        text: &str,
        examples: usize,
        embedder_sha256: &str,
    ) -> PoolManifest {
        PoolManifest {
            dataset: dataset.into(),
            dataset_sha256: crate::models::sha256_hex(text.as_bytes()),
            examples,
            embedder: "all-minilm-l6-v2".into(),
            embedder_sha256: embedder_sha256.into(),
            min_similarity: 0.5,
            fitted_on: FloorFit {
                role: crate::roles::Role::Validation,
                questions: Default::default(),
                quantile: 0.01,
            },
            command: "test".into(),
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

    #[test]
    fn a_manifest_pool_shows_worked_solutions_above_its_floor_and_refuses_another_file(
    ) -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| RouterError::read("tmp", e))?;
        // Two GSM8K-shaped training problems of the fit role, one of the validation role.
        let fit: Vec<String> = (0..200)
            .map(|i| format!("gsm8k-train-{i:04}"))
            .filter(|id| crate::roles::role_of(id) == Some(crate::roles::Role::Fit))
            .take(2)
            .collect();
        let val = (0..200)
            .map(|i| format!("gsm8k-train-{i:04}"))
            .find(|id| crate::roles::role_of(id) == Some(crate::roles::Role::Validation))
            .unwrap_or_default();
        let rows = [
            (&fit[0], "A train travels at 40 miles per hour for 3 hours. How many miles?",
             "It goes 40*3 = <<40*3=120>>120 miles.", "120"),
            (&fit[1], "A jacket costs $80 and is 25% off. What is the sale price?",
             "The discount is 80*0.25 = $<<80*0.25=20>>20.\nSo it costs 80-20 = $<<80-20=60>>60.", "60"),
            (&val, "A car travels at 50 miles per hour for 2 hours. How many miles?",
             "SECRET", "100"),
        ];
        let text: String = rows
            .iter()
            .map(|(id, q, s, a)| {
                serde_json::json!({"id": id, "problem": q, "solution": s, "answer": a}).to_string()
                    + "\n"
            })
            .collect();
        let data = dir.path().join("gsm8k_train.jsonl");
        std::fs::write(&data, &text).map_err(|e| RouterError::read(&data, e))?;
        let encoder = embedder();
        let manifest = test_manifest("gsm8k_train.jsonl", &text, 2, encoder.weights_sha256());
        let path = dir.path().join("pool.json");
        let json = serde_json::to_string(&manifest).unwrap_or_default();
        std::fs::write(&path, json).map_err(|e| RouterError::read(&path, e))?;
        let cache = dir.path().join("cache");
        let pool = Exemplars::load_manifest_from(&path, dir.path(), &cache, embedder())?;
        assert_eq!(pool.len(), 2, "the validation problem is not an example");
        let bus = "A bus travels at 30 miles per hour for 4 hours. How many miles?";
        let shown = pool.nearest(bus, 2)?;
        assert_eq!(shown.first().map(|s| s.id.as_str()), Some(fit[0].as_str()));
        assert_eq!(
            shown.first().map(|s| s.solution.as_str()),
            Some("It goes 40*3 = 120 miles.\n\nThe answer is \\boxed{120}.")
        );
        assert!(
            shown.len() < 2,
            "the jacket is below the floor for a bus: {shown:?}"
        );
        assert!(
            pool.nearest("Solve for x: x^2 - 5x + 6 = 0.", 2)?
                .is_empty(),
            "an algebra question is far from every example"
        );
        // The second load reads the cached vectors and chooses alike.
        let again = Exemplars::load_manifest_from(&path, dir.path(), &cache, embedder())?;
        assert_eq!(again.nearest(bus, 2)?, shown);
        // Another file under the same name is refused, naming the recorded hash.
        std::fs::write(&data, text.replace("40", "41")).map_err(|e| RouterError::read(&data, e))?;
        let err =
            Exemplars::load_manifest_from(&path, dir.path(), &cache, embedder()).map(|p| p.len());
        assert!(
            matches!(&err, Err(RouterError::Corrupt { reason, .. }) if reason.contains("its SHA-256 is")),
            "{err:?}"
        );
        // A floor fitted with another encoder is refused, naming both encoders' hashes.
        std::fs::write(&data, &text).map_err(|e| RouterError::read(&data, e))?;
        let other = test_manifest("gsm8k_train.jsonl", &text, 2, &"0".repeat(64));
        let json = serde_json::to_string(&other).unwrap_or_default();
        std::fs::write(&path, json).map_err(|e| RouterError::read(&path, e))?;
        let err =
            Exemplars::load_manifest_from(&path, dir.path(), &cache, embedder()).map(|p| p.len());
        assert!(
            matches!(&err, Err(RouterError::Corrupt { reason, .. })
                if reason.contains(&"0".repeat(64)) && reason.contains(encoder.weights_sha256())),
            "{err:?}"
        );
        Ok(())
    }

    /// A JSONL pool is embedded once per file and encoder: the second load reads the cached
    /// vectors (here overwritten by hand, so only a read could return them), and an edited
    /// file is embedded afresh under its own key.
    #[test]
    fn a_jsonl_pool_is_embedded_once_and_read_from_the_cache_after() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| RouterError::read(Path::new("tempdir"), e))?;
        let train = ids(Split::Train, 2);
        let text: String = [
            (
                &train[0],
                "A train travels at 40 miles per hour for 3 hours. How far?",
                "40*3 = 120",
            ),
            (
                &train[1],
                "A jacket costs $80 and is 25% off. What is the sale price?",
                "80-20 = 60",
            ),
        ]
        .iter()
        .map(|(id, q, s)| {
            serde_json::json!({"id": id, "problem": q, "solution": s}).to_string() + "\n"
        })
        .collect();
        let path = dir.path().join("pool.jsonl");
        std::fs::write(&path, &text).map_err(|e| RouterError::read(&path, e))?;
        let cache = dir.path().join("cache");
        let first = Exemplars::load_from(&path, &cache, embedder())?;
        assert_eq!(first.len(), 2);
        let files: Vec<PathBuf> = std::fs::read_dir(&cache)
            .map_err(|e| RouterError::read(&cache, e))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        assert_eq!(files.len(), 1, "{files:?}");
        let dim = first.vectors.first().map_or(0, Vec::len);
        assert!(dim > 0);
        std::fs::write(&files[0], vec![0u8; 2 * dim * 4])
            .map_err(|e| RouterError::read(&files[0], e))?;
        let again = Exemplars::load_from(&path, &cache, embedder())?;
        assert!(
            again.vectors.iter().flatten().all(|x| *x == 0.0),
            "read from the cache"
        );
        std::fs::write(&path, text.replace("40", "41")).map_err(|e| RouterError::read(&path, e))?;
        let edited = Exemplars::load_from(&path, &cache, embedder())?;
        assert!(
            edited.vectors.iter().flatten().any(|x| *x != 0.0),
            "embedded afresh"
        );
        Ok(())
    }
}
