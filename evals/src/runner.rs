//! Running a grid of strategies × budgets × seeds over a dataset, against a running server
//! (`--url`, the native `/v1/reason` endpoint) or in-process (the embedded default model), with
//! each strategy's parameters and the verifier recorded in every row ([`Setup`]). `auto`'s
//! load-dependent shrinking is pinned at load 0 by default, so a seeded eval replays however
//! many items run at once; the router's load is recorded in each row.
//!
//! Items run with bounded concurrency but are written in grid order (a reorder buffer), so two
//! runs with the same seeds write identical files apart from timings. Items already in the
//! results file are skipped. A search that ends in a typed error (e.g. a budget too small for
//! any answer, a 400) is a graded result with no answer; any other error status (401, 429,
//! 5xx) is written as an ungraded error row that reports skip and a resumed run retries; a
//! backend that cannot be reached stops the run without writing anything for the unfinished
//! items.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use futures::StreamExt;
use ponder::learned_verifier::LabelledCandidate;
use ponder_verifiers::TraceConfidence;
use serde::Deserialize;

use crate::dataset::EvalProblem;
use crate::error::{EvalError, Result};
use crate::results::{ItemKey, ResultRow, ResultsFile, RunInfo, Spend};

/// One item of the grid.
#[derive(Debug, Clone)]
pub struct Item {
    /// The problem.
    pub problem: EvalProblem,
    /// Strategy name.
    pub strategy: String,
    /// Token budget.
    pub budget: u64,
    /// Seed.
    pub seed: u64,
    /// The strategy's parameters (`null`: its defaults).
    pub params: serde_json::Value,
    /// The verifier the backend scores with, as named on the command line (`none` when none;
    /// over `--url`, whatever the server was started with, recorded as `server`).
    pub verifier: String,
    /// Worked examples to show before the question (`--shots`; 0: none), chosen by the
    /// backend (in-process: from its pool; over `--url`: the server's router).
    pub shots: usize,
    /// Record every candidate whole in the row (text, tokens, confidence), as the verifier's
    /// training export needs; off, rows keep only answers, scores and spend.
    pub record_candidates: bool,
    /// What the run runs on, recorded in the row.
    pub run: Option<RunInfo>,
}

/// How the grid's items are configured beyond strategy × budget × seed.
#[derive(Debug, Clone, PartialEq)]
pub struct Setup {
    /// Per strategy name, its parameters (`{"weighted_best_of_n": {"n": 8}}`); a strategy not
    /// named runs with its defaults.
    pub params: serde_json::Map<String, serde_json::Value>,
    /// The verifier's name, recorded in every row.
    pub verifier: String,
    /// Pin `auto`'s load-dependent shrinking at load 0 (unless its params set `load`), so that
    /// a seeded eval replays whatever else runs on the server. On by default in the harness.
    pub pin_load: bool,
    /// Worked examples each question is shown (`--shots`); `None`: see [`Setup::shots_for`].
    pub shots: Option<usize>,
    /// Worked examples `auto`'s calibration rows were measured with
    /// (`ponder::router::Router::auto_shots`; 0 over `--url`, where the server decides).
    pub auto_shots: usize,
    /// Record whole candidates in the rows (on by default; `--without-candidates` turns it off
    /// for runs whose rows are committed, such as calibration, at a fraction of the size).
    pub record_candidates: bool,
    /// What the run runs on (model, dataset, version), recorded in every row.
    pub run: Option<RunInfo>,
}

impl Default for Setup {
    fn default() -> Self {
        Self {
            params: serde_json::Map::new(),
            verifier: "none".into(),
            pin_load: true,
            shots: None,
            auto_shots: 0,
            record_candidates: true,
            run: None,
        }
    }
}

impl Setup {
    /// Worked examples `strategy`'s items are shown: as the server would choose when no count
    /// is given (`ponder::router::default_shots`).
    pub fn shots_for(&self, strategy: &str) -> usize {
        ponder::router::default_shots(strategy, self.shots, self.auto_shots)
    }

    /// The parameters `strategy` runs with: as given, with `auto`'s load pinned at 0 when
    /// [`Setup::pin_load`] is on and the parameters do not set one.
    ///
    /// A strategy's parameters may be given per budget, `{"by_budget": {"1024": {…},
    /// "2048": {…}}}`, so a configuration scales with the budget (its N grows with it); a
    /// budget the object does not name runs with the strategy's defaults.
    pub fn params_for(&self, strategy: &str, budget: u64) -> serde_json::Value {
        let mut params = self
            .params
            .get(strategy)
            .cloned()
            .unwrap_or(serde_json::Value::Null);
        if let Some(by_budget) = params.get("by_budget") {
            params = by_budget
                .get(budget.to_string())
                .cloned()
                .unwrap_or(serde_json::Value::Null);
        }
        if strategy == "auto" && self.pin_load {
            if params.is_null() {
                params = serde_json::Value::Object(serde_json::Map::new());
            }
            if let Some(obj) = params.as_object_mut() {
                obj.entry("load").or_insert(serde_json::json!(0.0));
            }
        }
        params
    }
}

/// The part of an `Outcome` the harness reads (from `/v1/reason` JSON or in-process).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Solved {
    /// The answer.
    pub answer: Option<String>,
    /// Candidates with their answers.
    #[serde(default)]
    pub candidates: Vec<SolvedCandidate>,
    /// Usage.
    #[serde(default)]
    pub usage: SolvedUsage,
    /// Finish reason.
    #[serde(default)]
    pub finish_reason: Option<String>,
    /// What `auto`'s router decided (its `load` among it).
    #[serde(default)]
    pub router: Option<Box<ponder::router::Decision>>,
    /// Ids of the worked examples shown before the question.
    #[serde(default)]
    pub shots: Vec<String>,
}

/// A candidate's answer.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct SolvedCandidate {
    /// Its extracted answer.
    pub answer: Option<String>,
    /// Its score (verifier or confidence), if the strategy scored it.
    #[serde(default)]
    pub score: Option<f32>,
    /// Its whole text.
    #[serde(default)]
    pub text: String,
    /// Tokens generated along it.
    #[serde(default)]
    pub tokens: usize,
    /// Whether the model ended it.
    #[serde(default)]
    pub finished: bool,
    /// Its confidence summary, if the generator reported log-probabilities.
    #[serde(default)]
    pub trace_confidence: Option<TraceConfidence>,
}

/// Usage fields the harness reports.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(default)]
pub struct SolvedUsage {
    /// Tokens sampled.
    pub generated_tokens: u64,
    /// Context tokens computed.
    pub prefill_tokens_computed: u64,
    /// Context tokens reused.
    pub prefill_tokens_reused: u64,
    /// Verifier calls.
    pub verifier_calls: u64,
    /// Verifier tokens.
    pub verifier_tokens: u64,
}

/// How one item ended.
#[derive(Debug)]
pub enum Attempt {
    /// The search returned an outcome.
    Solved(Solved),
    /// The search refused or failed in a typed way (graded as no answer).
    Failed(String),
    /// The server answered with an error that is not the search's (a missing key, a full
    /// queue, a server error): recorded as an error, not graded, retried by a resumed run.
    ServerError {
        /// The HTTP status.
        status: u16,
        /// The body.
        body: String,
    },
}

/// Where searches run.
#[async_trait]
pub trait Backend: Send + Sync {
    /// Runs one item. `Err` means the backend itself is unusable (stop the run).
    async fn solve(&self, item: &Item) -> Result<Attempt>;
}

/// The server's native endpoint.
#[derive(Debug, Clone)]
pub struct HttpBackend {
    client: reqwest::Client,
    url: String,
    api_key: Option<String>,
}

impl HttpBackend {
    /// A backend posting to `{base}/v1/reason`.
    pub fn new(base: &str) -> Self {
        Self {
            client: reqwest::Client::new(),
            url: format!("{}/v1/reason", base.trim_end_matches('/')),
            api_key: None,
        }
    }

    /// Sends `key` as a bearer token with every request.
    pub fn with_api_key(mut self, key: Option<String>) -> Self {
        self.api_key = key.filter(|k| !k.trim().is_empty());
        self
    }
}

#[async_trait]
impl Backend for HttpBackend {
    async fn solve(&self, item: &Item) -> Result<Attempt> {
        let mut body = serde_json::json!({
            "problem": item.problem.problem,
            "strategy": item.strategy,
            "budget_tokens": item.budget,
            "seed": item.seed,
            "params": item.params,
        });
        if item.shots > 0 {
            body["shots"] = serde_json::json!(item.shots);
        }
        let mut req = self.client.post(&self.url).json(&body);
        if let Some(key) = &self.api_key {
            req = req.bearer_auth(key);
        }
        let resp = req
            .send()
            .await
            .map_err(|e| EvalError::Backend(format!("{}: {e}", self.url)))?;
        let status = resp.status();
        let text = resp
            .text()
            .await
            .map_err(|e| EvalError::Backend(e.to_string()))?;
        if status.is_success() {
            let solved = serde_json::from_str(&text).map_err(|e| {
                EvalError::Backend(format!("{}: unreadable outcome: {e}", self.url))
            })?;
            Ok(Attempt::Solved(solved))
        } else if status == reqwest::StatusCode::BAD_REQUEST {
            // The search's typed refusal (e.g. a budget too small for any answer).
            Ok(Attempt::Failed(format!("{status}: {text}")))
        } else {
            Ok(Attempt::ServerError {
                status: status.as_u16(),
                body: text,
            })
        }
    }
}

/// Turns an attempt into a graded row.
pub fn grade(item: &Item, attempt: Attempt, wall_ms: u64) -> ResultRow {
    let gold = item.problem.answer.clone();
    let base = ResultRow {
        problem_id: item.problem.id.clone(),
        strategy: item.strategy.clone(),
        budget: item.budget,
        seed: item.seed,
        level: item.problem.level,
        verifier: item.verifier.clone(),
        params: item.params.clone(),
        shots: item.shots,
        shown: Vec::new(),
        load: None,
        allocated: None,
        gold: gold.clone(),
        answer: None,
        correct: false,
        candidate_answers: Vec::new(),
        candidate_scores: Vec::new(),
        candidates: Vec::new(),
        candidates_correct: 0,
        finish_reason: None,
        error: None,
        http_status: None,
        spend: Spend::default(),
        wall_ms,
        run: item.run.clone(),
        redacted: false,
    };
    match attempt {
        Attempt::Failed(e) => ResultRow {
            error: Some(e),
            ..base
        },
        Attempt::ServerError { status, body } => ResultRow {
            error: Some(format!("HTTP {status}: {body}")),
            http_status: Some(status),
            ..base
        },
        Attempt::Solved(s) => {
            let is = |a: &Option<String>| {
                a.as_deref()
                    .is_some_and(|a| ponder_verifiers::equivalent(&gold, a))
            };
            let candidate_scores: Vec<Option<f32>> = s.candidates.iter().map(|c| c.score).collect();
            let candidate_answers: Vec<Option<String>> =
                s.candidates.iter().map(|c| c.answer.clone()).collect();
            let recorded = if item.record_candidates {
                s.candidates
            } else {
                Vec::new()
            };
            let candidates = recorded
                .into_iter()
                .map(|c| LabelledCandidate {
                    correct: is(&c.answer),
                    answer: c.answer,
                    text: c.text,
                    tokens: c.tokens,
                    finished: c.finished,
                    trace_confidence: c.trace_confidence,
                })
                .collect();
            let load = s.router.as_ref().map(|d| d.load);
            let allocated = s.router.as_deref().map(ponder::router::Allocated::from);
            let u = s.usage;
            ResultRow {
                correct: is(&s.answer),
                candidates_correct: candidate_answers.iter().filter(|a| is(a)).count(),
                answer: s.answer,
                candidate_answers,
                candidate_scores,
                candidates,
                shown: s.shots,
                load,
                allocated,
                finish_reason: s.finish_reason,
                spend: Spend {
                    generated_tokens: u.generated_tokens,
                    prefill_tokens_computed: u.prefill_tokens_computed,
                    prefill_tokens_reused: u.prefill_tokens_reused,
                    verifier_calls: u.verifier_calls,
                    spent: u.generated_tokens + u.prefill_tokens_computed + u.verifier_tokens,
                },
                ..base
            }
        }
    }
}

/// The grid: every strategy × budget × seed × problem, in that nesting order, each item with
/// its strategy's parameters, the verifier and the worked examples from `setup`.
pub fn grid(
    problems: &[EvalProblem],
    strategies: &[String],
    budgets: &[u64],
    seeds: &[u64],
    setup: &Setup,
) -> Vec<Item> {
    let mut items = Vec::new();
    for strategy in strategies {
        for &budget in budgets {
            for &seed in seeds {
                for p in problems {
                    items.push(Item {
                        problem: p.clone(),
                        strategy: strategy.clone(),
                        budget,
                        seed,
                        params: setup.params_for(strategy, budget),
                        verifier: setup.verifier.clone(),
                        shots: setup.shots_for(strategy),
                        record_candidates: setup.record_candidates,
                        run: setup.run.clone(),
                    });
                }
            }
        }
    }
    items
}

/// What a run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunSummary {
    /// Items in the grid.
    pub items: usize,
    /// Items skipped because the results file has them.
    pub resumed: usize,
    /// Items run now.
    pub ran: usize,
    /// Of those, correct.
    pub correct: usize,
    /// Items the server answered with an error status (written as ungraded error rows; a
    /// resumed run retries them). Not counted in `ran`.
    pub errors: usize,
}

/// Runs the grid into `out_dir/results.jsonl`, skipping finished items.
pub async fn run_grid(
    backend: Arc<dyn Backend>,
    items: Vec<Item>,
    out_dir: &Path,
    concurrency: usize,
) -> Result<RunSummary> {
    let (mut file, done) = ResultsFile::open(out_dir)?;
    let total = items.len();
    let todo: Vec<Item> = items
        .into_iter()
        .filter(|i| {
            !done.contains(&ItemKey {
                problem_id: i.problem.id.clone(),
                strategy: i.strategy.clone(),
                budget: i.budget,
                seed: i.seed,
                verifier: i.verifier.clone(),
                params: i.params.to_string(),
                shots: i.shots,
            })
        })
        .collect();
    let mut summary = RunSummary {
        items: total,
        resumed: total - todo.len(),
        ..RunSummary::default()
    };
    let bar = indicatif::ProgressBar::new(todo.len() as u64);
    if let Ok(style) =
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} [{elapsed}<{eta}] {msg}")
    {
        bar.set_style(style);
    }
    let mut results = futures::stream::iter(todo)
        .map(|item| {
            let backend = Arc::clone(&backend);
            async move {
                let start = Instant::now();
                let attempt = backend.solve(&item).await;
                (item, attempt, start.elapsed().as_millis() as u64)
            }
        })
        .buffered(concurrency.max(1));
    while let Some((item, attempt, wall_ms)) = results.next().await {
        let row = grade(&item, attempt?, wall_ms);
        file.append(&row)?;
        if let Some(status) = row.http_status {
            tracing::warn!(status, problem = %item.problem.id, "the server answered an error");
            summary.errors += 1;
            bar.inc(1);
            continue;
        }
        summary.ran += 1;
        summary.correct += usize::from(row.correct);
        bar.set_message(format!(
            "acc {:.2} ({}/{})  {} @ {}",
            summary.correct as f64 / summary.ran.max(1) as f64,
            summary.correct,
            summary.ran,
            item.strategy,
            item.budget
        ));
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::results::read_rows;

    /// Answers 429 to its first `fail` calls, then solves every item with the gold answer.
    struct Flaky {
        fail: usize,
        calls: AtomicUsize,
    }

    #[async_trait]
    impl Backend for Flaky {
        async fn solve(&self, item: &Item) -> Result<Attempt> {
            if self.calls.fetch_add(1, Ordering::SeqCst) < self.fail {
                return Ok(Attempt::ServerError {
                    status: 429,
                    body: "the server is at capacity".into(),
                });
            }
            Ok(Attempt::Solved(Solved {
                answer: Some(item.problem.answer.clone()),
                ..Solved::default()
            }))
        }
    }

    fn problems() -> Vec<EvalProblem> {
        ["a", "b"]
            .iter()
            .map(|id| EvalProblem {
                id: (*id).into(),
                problem: "1 + 1?".into(),
                answer: "2".into(),
                level: None,
                subject: None,
                solution: None,
            })
            .collect()
    }

    /// The grid of one strategy over [`problems`] at budget 64, seed 0, default setup.
    fn items_for(strategy: &str) -> Vec<Item> {
        grid(
            &problems(),
            &[strategy.to_string()],
            &[64],
            &[0],
            &Setup::default(),
        )
    }

    #[tokio::test]
    async fn a_server_error_is_an_ungraded_row_and_a_resumed_run_retries_it() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| EvalError::Backend(e.to_string()))?;
        let items = items_for("s");
        let backend = Arc::new(Flaky {
            fail: 1,
            calls: AtomicUsize::new(0),
        });
        let first = run_grid(backend.clone(), items.clone(), dir.path(), 1).await?;
        assert_eq!((first.ran, first.errors, first.correct), (1, 1, 1));
        // The error row is on disk but is no result: reports do not see a wrong answer.
        assert_eq!(read_rows(dir.path())?.len(), 1);
        let second = run_grid(backend, items, dir.path(), 1).await?;
        assert_eq!((second.resumed, second.ran, second.errors), (1, 1, 0));
        let rows = read_rows(dir.path())?;
        assert_eq!(rows.len(), 2);
        assert!(rows.iter().all(|r| r.correct && r.http_status.is_none()));
        Ok(())
    }

    #[tokio::test]
    async fn the_same_strategy_under_other_parameters_is_a_new_item_not_a_resumed_one() -> Result<()>
    {
        let dir = tempfile::tempdir().map_err(|e| EvalError::Backend(e.to_string()))?;
        let backend = Arc::new(Flaky {
            fail: 0,
            calls: AtomicUsize::new(0),
        });
        let run = |setup: Setup| {
            let items = grid(&problems(), &["s".to_string()], &[64], &[0], &setup);
            run_grid(backend.clone(), items, dir.path(), 1)
        };
        let defaults = run(Setup::default()).await?;
        assert_eq!((defaults.resumed, defaults.ran), (0, 2));
        let mut n2 = Setup::default();
        n2.params.insert("s".into(), serde_json::json!({"n": 2}));
        let other = run(n2.clone()).await?;
        assert_eq!((other.resumed, other.ran), (0, 2), "other parameters run");
        let again = run(n2).await?;
        assert_eq!(
            (again.resumed, again.ran),
            (2, 0),
            "the same parameters resume"
        );
        assert_eq!(read_rows(dir.path())?.len(), 4);
        Ok(())
    }

    #[test]
    fn parameters_given_per_budget_scale_with_it() {
        let mut setup = Setup::default();
        setup.params.insert(
            "self_consistency".into(),
            serde_json::json!({"by_budget": {"1024": {"n": 4}, "2048": {"n": 8}}}),
        );
        assert_eq!(
            setup.params_for("self_consistency", 1024),
            serde_json::json!({"n": 4})
        );
        assert_eq!(
            setup.params_for("self_consistency", 2048),
            serde_json::json!({"n": 8})
        );
        assert!(
            setup.params_for("self_consistency", 512).is_null(),
            "an unnamed budget: the defaults"
        );
    }

    #[test]
    fn the_harness_pins_autos_load_unless_told_otherwise() {
        let mut setup = Setup::default();
        assert!(setup.pin_load, "pinned by default");
        assert_eq!(
            setup.params_for("auto", 512),
            serde_json::json!({"load": 0.0})
        );
        setup
            .params
            .insert("auto".into(), serde_json::json!({"probe": false}));
        assert_eq!(
            setup.params_for("auto", 512),
            serde_json::json!({"probe": false, "load": 0.0})
        );
        setup
            .params
            .insert("auto".into(), serde_json::json!({"load": 0.5}));
        assert_eq!(
            setup.params_for("auto", 512),
            serde_json::json!({"load": 0.5}),
            "a set load stays"
        );
        assert!(
            setup.params_for("self_consistency", 512).is_null(),
            "only auto has a load"
        );
        setup.pin_load = false;
        setup.params.clear();
        assert!(
            setup.params_for("auto", 512).is_null(),
            "--live-load: the measured load"
        );
        // The load the router ran under is what each row records.
        let items = items_for("auto");
        assert!(items
            .iter()
            .all(|i| i.params == serde_json::json!({"load": 0.0})));
    }

    #[test]
    fn without_candidates_a_row_keeps_answers_scores_and_spend_but_not_the_texts() {
        let solved = || Solved {
            answer: Some("2".into()),
            candidates: vec![
                SolvedCandidate {
                    answer: Some("2".into()),
                    score: Some(0.9),
                    text: "1 + 1 = 2".into(),
                    ..SolvedCandidate::default()
                },
                SolvedCandidate {
                    answer: Some("3".into()),
                    score: Some(0.1),
                    text: "1 + 1 = 3".into(),
                    ..SolvedCandidate::default()
                },
            ],
            ..Solved::default()
        };
        let mut items = items_for("s");
        let whole = grade(&items[0], Attempt::Solved(solved()), 1);
        items[0].record_candidates = false;
        let slim = grade(&items[0], Attempt::Solved(solved()), 1);
        assert_eq!(whole.candidates.len(), 2);
        assert!(slim.candidates.is_empty());
        assert_eq!(
            ResultRow {
                candidates: Vec::new(),
                ..whole
            },
            slim,
            "only the whole candidates differ"
        );
        assert_eq!(slim.candidate_scores, vec![Some(0.9), Some(0.1)]);
        assert_eq!(slim.candidates_correct, 1);
    }

    #[test]
    fn a_row_records_the_load_and_what_auto_ran() {
        // The `router` object as `/v1/reason` returns it for `auto`.
        use ponder::router::{Allocation, CalibrationRow, Decision, ProbeReport};
        let router = serde_json::to_value(Decision {
            difficulty: "medium".into(),
            load: 0.0,
            allocation: Allocation {
                strategy: "answer_convergence".into(),
                row: Some(CalibrationRow {
                    difficulty: "hard".into(),
                    strategy: "answer_convergence".into(),
                    ..CalibrationRow::default()
                }),
                ..Allocation::default()
            },
            probe: Some(ProbeReport {
                agree: false,
                bin: "hard".into(),
                ..ProbeReport::default()
            }),
            ..Decision::default()
        })
        .unwrap_or_default();
        let solved: Solved = serde_json::from_value(serde_json::json!({
            "answer": "2", "candidates": [{"answer": "2"}], "router": router,
        }))
        .unwrap_or_default();
        let items = items_for("auto");
        let row = grade(&items[0], Attempt::Solved(solved), 1);
        assert_eq!(row.load, Some(0.0));
        assert_eq!(
            row.allocated,
            Some(ponder::router::Allocated {
                difficulty: "hard".into(),
                strategy: "answer_convergence".into(),
                probe: "disagree".into(),
                degraded: false,
            })
        );
        // Written and read back, as a results file keeps it.
        let line = serde_json::to_string(&row).unwrap_or_default();
        assert_eq!(serde_json::from_str::<ResultRow>(&line).ok(), Some(row));
        assert!(!line.contains("\"degraded\""), "false is left out: {line}");
    }

    /// One HTTP request's body, read by a server that answers it 400 (a std thread: the body is
    /// what the harness sends, whatever the reply).
    fn capture_one_body() -> (String, std::thread::JoinHandle<String>) {
        use std::io::{BufRead, BufReader, Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}/v1/reason", listener.local_addr().expect("addr"));
        let handle = std::thread::spawn(move || {
            let (stream, _) = listener.accept().expect("accept");
            let mut reader = BufReader::new(stream);
            let mut length = 0;
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).expect("header");
                if line.trim().is_empty() {
                    break;
                }
                if let Some((name, value)) = line.split_once(':') {
                    if name.eq_ignore_ascii_case("content-length") {
                        length = value.trim().parse().unwrap_or(0);
                    }
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).expect("body");
            let reply =
                "HTTP/1.1 400 Bad Request\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}";
            reader.get_mut().write_all(reply.as_bytes()).expect("reply");
            String::from_utf8_lossy(&body).into_owned()
        });
        (url, handle)
    }

    #[tokio::test]
    async fn over_http_the_item_asks_the_server_for_its_worked_examples() -> Result<()> {
        for shots in [2, 0] {
            let (url, server) = capture_one_body();
            let setup = Setup {
                shots: Some(shots),
                ..Setup::default()
            };
            let items = grid(&problems(), &["s".to_string()], &[64], &[0], &setup);
            let attempt = HttpBackend::new(&url).solve(&items[0]).await?;
            assert!(matches!(attempt, Attempt::Failed(_)), "{attempt:?}");
            let body: serde_json::Value = serde_json::from_str(&server.join().expect("server"))
                .map_err(|e| EvalError::Backend(e.to_string()))?;
            assert_eq!(body["problem"], "1 + 1?");
            if shots > 0 {
                assert_eq!(body["shots"], 2, "{body}");
            } else {
                assert!(body.get("shots").is_none(), "{body}");
            }
        }
        Ok(())
    }
}
