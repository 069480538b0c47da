//! `ponder-eval`: the evaluation harness's command line.
//!
//! Subcommands live in their own functions so new ones (`run`, …) slot in beside `grade`.

use anyhow::Context;
use clap::{Parser, Subcommand};
use std::io::{BufReader, Write};
use std::path::PathBuf;

#[derive(Parser)]
#[command(name = "ponder-eval", version, about = "Ponder's evaluation harness")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run strategies × budgets × seeds over a dataset; results go to OUT/results.jsonl
    /// (resumable: finished items are skipped).
    Run(Box<RunArgs>),
    /// Summarise a run directory: OUT/report.md, report.json and accuracy_vs_spend.{svg,png}.
    Report {
        /// The run directory.
        dir: PathBuf,
    },
    /// Per budget, the accuracy-vs-spend Pareto front of the configurations in one or more run
    /// directories, and which are dominated beyond the CIs (paired over shared items): Markdown
    /// on stdout, JSON with --out.
    Pareto {
        /// Run directories (their rows are pooled; e.g. `auto` in one and fixed strategies in
        /// another, over the same problems and seeds).
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// Also write the cells as JSON here.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Write the router's calibration table from a run (accuracy and spend per difficulty,
    /// strategy configuration and budget), for `ponder router calibrate --harness`.
    Calibrate {
        /// The run directory.
        dir: PathBuf,
        /// Dataset levels up to this one are easy.
        #[arg(long, default_value_t = 2)]
        easy_max_level: u32,
        /// Levels from this one are hard (between: medium).
        #[arg(long, default_value_t = 4)]
        hard_min_level: u32,
        /// Bin each problem by what `auto`'s two-sample probe saw on it instead of by level:
        /// the run directory of a probe run (self_consistency of 2, candidates recorded).
        #[arg(long)]
        bins_from: Option<PathBuf>,
        /// With --bins-from: the lowest group confidence a probe sample needs to count as
        /// confident (auto's `probe_confidence`).
        #[arg(long, default_value_t = ponder::router::AutoParams::default().probe_confidence)]
        probe_confidence: f32,
        /// Where to write the table.
        #[arg(long, default_value = "calibration.json")]
        out: PathBuf,
    },
    /// Write a run's rows redacted (no gold answer, no answers, no candidate texts; outcomes,
    /// scores and spend kept) to FILE, for committing a long run's progress: a later run
    /// resumes from them when they are its results file. Only redacted rows are written.
    Redact {
        /// The run directory.
        dir: PathBuf,
        /// Where to write them (replaced whole).
        #[arg(long)]
        out: PathBuf,
    },
    /// Export a run's candidates as labelled candidate sets (JSONL, one group per result row)
    /// for `ponder verifier train` (train split) and `ponder verifier eval` (held-out split).
    Candidates {
        /// The run directory.
        dir: PathBuf,
        /// The dataset the run used (for the questions).
        #[arg(long)]
        dataset: PathBuf,
        /// Field-name preset of the dataset.
        #[arg(long, value_enum, default_value = "auto")]
        preset: ponder_evals::dataset::Preset,
        /// Keep only this part of the fixed train / held-out split.
        #[arg(long, value_enum)]
        split: Option<ponder_evals::split::Split>,
        /// Keep only rows of this strategy (strategies that shared their draws recorded the
        /// same candidates: export one of them).
        #[arg(long)]
        strategy: Option<String>,
        /// Keep only rows of this budget.
        #[arg(long)]
        budget: Option<u64>,
        /// Where to write the JSONL.
        #[arg(long)]
        out: PathBuf,
    },
    /// Write the seeded grade-school problem set (`evals/data/gsm_gen.jsonl` is `--seed 0 --count
    /// 1200`); the same arguments always write the same bytes.
    GenProblems {
        /// Generator seed.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// How many problems.
        #[arg(long, default_value_t = 1200)]
        count: usize,
        /// Where to write the JSONL (`-`: stdout).
        #[arg(long, default_value = "-")]
        out: PathBuf,
    },
    /// Write the public benchmark sets' role lists (`data/roles/<role>.txt`, one id per line)
    /// from the files in DATASETS, by the rule of `ponder::roles`.
    Roles {
        /// The benchmark directory (default: `$PONDER_DATASETS`, else `../shared/datasets`).
        #[arg(long)]
        datasets: Option<PathBuf>,
        /// Where to write the lists.
        #[arg(long, default_value = ponder::roles::ROLES_DIR)]
        out: PathBuf,
    },
    /// Grade `{"gold": …, "pred": …}` JSONL lines: each line comes back on stdout with
    /// `equivalent`, `extracted`, `normalized_gold` and `normalized_pred` added.
    Grade {
        /// The JSONL file, or `-` for stdin.
        file: PathBuf,
    },
}

#[derive(clap::Args)]
struct RunArgs {
    /// JSONL or JSON dataset file.
    #[arg(long)]
    dataset: PathBuf,
    /// Field-name preset.
    #[arg(long, value_enum, default_value = "auto")]
    preset: ponder_evals::Preset,
    /// Comma-separated strategy names.
    #[arg(long, value_delimiter = ',', required = true)]
    strategies: Vec<String>,
    /// Comma-separated token budgets.
    #[arg(long, value_delimiter = ',', required = true)]
    budgets: Vec<u64>,
    /// Comma-separated seeds.
    #[arg(long, value_delimiter = ',', default_value = "0")]
    seeds: Vec<u64>,
    /// Keep only these levels.
    #[arg(long, value_delimiter = ',')]
    level: Vec<u32>,
    /// Keep only these subjects.
    #[arg(long, value_delimiter = ',')]
    subject: Vec<String>,
    /// Keep only this part of the fixed train / held-out split (by a hash of the problem id).
    #[arg(long, value_enum)]
    split: Option<ponder_evals::Split>,
    /// Keep only the public benchmark problems of this role (fit, validation, report, reserve;
    /// by a hash of the id, `ponder::roles`).
    #[arg(long, value_enum)]
    role: Option<ponder::roles::Role>,
    /// Shuffle the problems with this seed (before --limit).
    #[arg(long)]
    shuffle_seed: Option<u64>,
    /// Skip the first N problems (after the split, filters and shuffle; before --limit).
    #[arg(long, default_value_t = 0)]
    skip: usize,
    /// Use only the first N problems.
    #[arg(long)]
    limit: Option<usize>,
    /// Show each question's K nearest worked examples first (by the router's MiniLM
    /// embedding): in-process from the dataset's train split (needs a `solution` field); over
    /// --url from the server's pool (`ponder serve --exemplars`). At most 8. Unset: as the
    /// server does — in-process `auto` is shown as many as its calibration rows were measured
    /// with, from the server's default pool, and every other strategy none; over --url the
    /// server's default applies (rows then record 0 and the ids actually shown).
    #[arg(long,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new()
              .range(0..=ponder::router::MAX_SHOTS as u64))]
    shots: Option<usize>,
    /// With --shots: take the worked examples from this file's train split (read with the
    /// `auto` preset) instead of the dataset's own, e.g. for a set without solutions.
    #[arg(long, requires = "shots")]
    shots_from: Option<PathBuf>,
    /// In-process: how the worked examples are chosen — the question's nearest (the server's
    /// rule) or the same first examples of the pool for every question (the fixed baseline).
    #[arg(long, value_enum, default_value = "nearest")]
    shot_rule: ponder_evals::ShotRule,
    /// Stop at the first unreadable dataset record instead of skipping it.
    #[arg(long)]
    strict: bool,
    /// A running server (`ponder serve`); without it, searches run in-process.
    #[arg(long)]
    url: Option<String>,
    /// With `--url`: the server's bearer API key.
    #[arg(long, env = "PONDER_API_KEY", hide_env_values = true)]
    api_key: Option<String>,
    /// In-process: the model (default: the installed SmolLM2).
    #[arg(long)]
    model: Option<PathBuf>,
    /// What scores the candidates in-process: none, calc, llm-prm, qwen-prm:DIR,
    /// shepherd-prm:PATH. Over --url the server's own --verifier applies (leave this off).
    #[arg(long)]
    verifier: Option<ponder::prm::VerifierChoice>,
    /// Strategy parameters per strategy, as JSON: '{"weighted_best_of_n": {"n": 8}}'.
    #[arg(long)]
    params: Option<String>,
    /// Let `auto` shrink with the measured load instead of pinning it at 0 (results then
    /// depend on what else runs; the load is recorded in each row either way).
    #[arg(long)]
    live_load: bool,
    /// Leave whole candidates (text, tokens, confidence) out of the rows; their answers, scores
    /// and the spend stay. For runs whose rows are committed (calibration): rows are a tenth of
    /// the size, but `ponder-eval candidates` has nothing to export from them.
    #[arg(long)]
    without_candidates: bool,
    /// In-process, without --verifier: items of `self_consistency`, `best_of_n` and
    /// `weighted_best_of_n` whose sample plans are equal (same N, cap, sampling) take their
    /// candidates from one `best_of_n` draw and choose among them by their own rule: the rows
    /// separate runs write (but `wall_ms`), for a third of the generation.
    #[arg(long, conflicts_with_all = ["url", "verifier"])]
    share_draws: bool,
    /// Items in flight at once.
    #[arg(long, default_value_t = 1)]
    concurrency: usize,
    /// The run directory.
    #[arg(long)]
    out: PathBuf,
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    match Cli::parse().command {
        Command::Grade { file } => grade(&file),
        Command::GenProblems { seed, count, out } => {
            let text =
                ponder_evals::gsm_gen::to_jsonl(&ponder_evals::gsm_gen::generate(seed, count))?;
            if out.as_os_str() == "-" {
                std::io::stdout().write_all(text.as_bytes())?;
            } else {
                std::fs::write(&out, text).with_context(|| format!("writing {}", out.display()))?;
                eprintln!("wrote {count} problems (seed {seed}) to {}", out.display());
            }
            Ok(())
        }
        Command::Run(args) => run(*args),
        Command::Roles { datasets, out } => {
            let dir = datasets.unwrap_or_else(ponder::roles::datasets_dir);
            let lists = ponder_evals::roles::role_lists(&dir)?;
            ponder_evals::roles::write_role_lists(&lists, &out)?;
            for (role, ids) in &lists {
                eprintln!("{role}: {} ids", ids.len());
            }
            eprintln!("wrote the role lists to {}", out.display());
            Ok(())
        }
        Command::Report { dir } => report(&dir),
        Command::Pareto { dirs, out } => {
            let mut rows = Vec::new();
            for dir in &dirs {
                rows.extend(ponder_evals::read_rows(dir)?);
            }
            anyhow::ensure!(!rows.is_empty(), "no results in {dirs:?}");
            let cells = ponder_evals::pareto::pareto(&rows);
            print!("{}", ponder_evals::pareto::markdown(&cells));
            if let Some(out) = out {
                std::fs::write(&out, serde_json::to_string_pretty(&cells)?)
                    .with_context(|| format!("writing {}", out.display()))?;
            }
            Ok(())
        }
        Command::Candidates {
            dir,
            dataset,
            preset,
            split,
            strategy,
            budget,
            out,
        } => {
            let mut rows = ponder_evals::read_rows(&dir)?;
            rows.retain(|r| {
                strategy.as_ref().is_none_or(|s| &r.strategy == s)
                    && budget.is_none_or(|b| r.budget == b)
            });
            let opts = ponder_evals::DatasetOptions {
                fields: preset.fields(),
                ..ponder_evals::DatasetOptions::default()
            };
            let problems = ponder_evals::load(&dataset, &opts)?.problems;
            let export = ponder_evals::candidates::export(&rows, &problems, split);
            ponder::learned_verifier::write_groups(&out, &export.groups)?;
            eprintln!(
                "wrote {} candidate groups to {} ({} rows without candidates, {} problems not in {})",
                export.groups.len(),
                out.display(),
                export.without_candidates,
                export.unknown_problem,
                dataset.display()
            );
            Ok(())
        }
        Command::Redact { dir, out } => {
            let rows = ponder_evals::read_rows(&dir)?;
            let mut text = String::new();
            for row in &rows {
                text.push_str(&serde_json::to_string(&row.redacted())?);
                text.push('\n');
            }
            // Written beside and renamed, so a reader never sees half a file.
            let tmp = out.with_extension("jsonl.partial");
            std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
            std::fs::rename(&tmp, &out).with_context(|| format!("writing {}", out.display()))?;
            eprintln!("wrote {} redacted rows to {}", rows.len(), out.display());
            Ok(())
        }
        Command::Calibrate {
            dir,
            out,
            easy_max_level,
            hard_min_level,
            bins_from,
            probe_confidence,
        } => {
            let rows = ponder_evals::read_rows(&dir)?;
            let table = match &bins_from {
                Some(probe_dir) => {
                    let probe = ponder_evals::read_rows(probe_dir)?;
                    let bins = ponder_evals::calibrate::probe_bins(&probe, probe_confidence);
                    anyhow::ensure!(
                        !bins.is_empty(),
                        "{}: no probe rows with two recorded candidates",
                        probe_dir.display()
                    );
                    ponder_evals::calibrate::calibrate_by_probe(
                        &rows,
                        &dir.display().to_string(),
                        &bins,
                    )
                }
                None => ponder_evals::calibrate(
                    &rows,
                    &dir.display().to_string(),
                    easy_max_level,
                    hard_min_level,
                ),
            };
            std::fs::write(&out, serde_json::to_string_pretty(&table)?)
                .with_context(|| format!("writing {}", out.display()))?;
            eprintln!(
                "wrote {} calibration rows to {}",
                table.rows.len(),
                out.display()
            );
            Ok(())
        }
    }
}

fn run(args: RunArgs) -> anyhow::Result<()> {
    let mut setup = setup(&args)?;
    let opts = ponder_evals::DatasetOptions {
        fields: args.preset.fields(),
        levels: args.level,
        subjects: args.subject,
        shuffle_seed: args.shuffle_seed,
        skip: args.skip,
        limit: args.limit,
        strict: args.strict,
        split: args.split,
        role: args.role,
    };
    let dataset = ponder_evals::load(&args.dataset, &opts)?;
    for s in &dataset.skipped {
        eprintln!(
            "{}:{}: skipped: {}",
            args.dataset.display(),
            s.line,
            s.reason
        );
    }
    anyhow::ensure!(
        !dataset.problems.is_empty(),
        "{}: no problems selected",
        args.dataset.display()
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let shared_draws = std::sync::Arc::new(ponder_evals::SharedDraws::default());
    let backend: std::sync::Arc<dyn ponder_evals::Backend> = match &args.url {
        Some(url) => {
            anyhow::ensure!(
                args.shots_from.is_none(),
                "--shots-from applies in-process only; over --url the server's router chooses \
                 from its own pool (`ponder serve --exemplars FILE`)"
            );
            anyhow::ensure!(
                args.verifier.is_none(),
                "--verifier applies in-process only; over --url start the server with \
                 `ponder serve --verifier …`"
            );
            std::sync::Arc::new(
                ponder_evals::HttpBackend::new(url).with_api_key(args.api_key.clone()),
            )
        }
        None => {
            let mut backend = ponder_evals::InProcessBackend::start(args.model.clone())?;
            // `auto` needs the router (encoder + router file), loaded only when asked for; the
            // worked examples are then chosen with its encoder rather than a second copy.
            let mut encoder = None;
            if args.strategies.iter().any(|s| s == "auto") {
                let mut router = ponder::router::Router::load_default()?;
                if let Some(model) = setup.run.as_ref().and_then(|r| r.model.as_ref()) {
                    router = router.serving(model);
                }
                encoder = Some(router.shared_embedder());
                setup.auto_shots = router.auto_shots();
                *backend.registry_mut() =
                    ponder::router::registry_with_auto(std::sync::Arc::new(router));
            }
            if let Some(choice) = &args.verifier {
                rt.block_on(backend.use_verifier(choice))?;
            }
            if args.strategies.iter().any(|s| setup.shots_for(s) > 0) {
                // `--shots K` takes the dataset's own train solutions; `auto` without `--shots`
                // takes the server's default pool, as `ponder serve` would.
                let (pool, preset) = match (&args.shots_from, args.shots) {
                    (Some(path), _) => (path.clone(), ponder_evals::Preset::Auto),
                    (None, Some(_)) => (args.dataset.clone(), args.preset),
                    (None, None) => (
                        ponder::router::default_exemplars_path(),
                        ponder_evals::Preset::Auto,
                    ),
                };
                backend.use_exemplars(exemplars(&pool, preset, encoder)?);
                backend.use_shot_rule(args.shot_rule);
            }
            if args.share_draws {
                backend.use_shared_draws(std::sync::Arc::clone(&shared_draws));
            }
            std::sync::Arc::new(backend)
        }
    };
    let items = ponder_evals::grid(
        &dataset.problems,
        &args.strategies,
        &args.budgets,
        &args.seeds,
        &setup,
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let summary = rt.block_on(ponder_evals::run_grid(
        backend,
        items,
        &args.out,
        args.concurrency,
    ))?;
    eprintln!(
        "{} items: {} already done, {} run now, {} of those correct, {} server errors (rerun \
         to retry them); results in {}",
        summary.items,
        summary.resumed,
        summary.ran,
        summary.correct,
        summary.errors,
        args.out.join(ponder_evals::results::RESULTS_FILE).display()
    );
    if args.share_draws {
        eprintln!(
            "--share-draws: {} items chose among {} shared draws",
            shared_draws.taken(),
            shared_draws.made()
        );
    }
    Ok(())
}

/// The `--shots` pool: a pool manifest (`.json`, the server's default: GSM8K train's fit role
/// with its fitted similarity floor), or the worked solutions of the whole `dataset` file that
/// may be fitted on (a report run still sees fit examples only; [`ponder::router::Exemplars`]
/// makes sure), each ending with its answer as the model is asked to write it.
fn exemplars(
    dataset: &std::path::Path,
    preset: ponder_evals::Preset,
    encoder: Option<std::sync::Arc<ponder::router::Embedder>>,
) -> anyhow::Result<ponder::router::Exemplars> {
    let embedder = match encoder {
        Some(shared) => shared,
        None => {
            let dir = ponder::models::default_embedder_dir();
            std::sync::Arc::new(ponder::router::Embedder::load(&dir).with_context(|| {
                format!("loading the encoder for --shots from {}", dir.display())
            })?)
        }
    };
    if dataset.extension().is_some_and(|e| e == "json") {
        let pool = ponder::router::Exemplars::load_manifest(dataset, embedder)?;
        eprintln!(
            "--shots: {} worked examples from {} (similarity floor {:.3})",
            pool.len(),
            dataset.display(),
            pool.min_similarity()
        );
        return Ok(pool);
    }
    let all = ponder_evals::load(
        dataset,
        &ponder_evals::DatasetOptions {
            fields: preset.fields(),
            ..ponder_evals::DatasetOptions::default()
        },
    )?;
    let candidates = all
        .problems
        .into_iter()
        .filter_map(|p| {
            p.solution.map(|solution| ponder::router::Shot {
                solution: ponder::router::exemplars::worked_solution(&solution, Some(&p.answer)),
                id: p.id,
                problem: p.problem,
            })
        })
        .collect();
    let pool = ponder::router::Exemplars::new(candidates, embedder)?.with_context(|| {
        format!(
            "--shots: {} offers no examples: no problem that may be fitted on has a worked \
             solution (a `solution` field; --shots-from FILE takes them from another file)",
            dataset.display()
        )
    })?;
    eprintln!("--shots: examples from {} worked fit solutions", pool.len());
    Ok(pool)
}

/// The grid's setup from the command line: `--params` must be an object keyed by strategies
/// of `--strategies`, each value an object (or null).
fn setup(args: &RunArgs) -> anyhow::Result<ponder_evals::runner::Setup> {
    let params = match &args.params {
        None => serde_json::Map::new(),
        Some(text) => {
            let value: serde_json::Value =
                serde_json::from_str(text).context("--params: not valid JSON")?;
            let serde_json::Value::Object(map) = value else {
                anyhow::bail!("--params: expected an object keyed by strategy name");
            };
            for (name, p) in &map {
                anyhow::ensure!(
                    args.strategies.contains(name),
                    "--params: `{name}` is not one of --strategies ({})",
                    args.strategies.join(", ")
                );
                anyhow::ensure!(
                    p.is_object() || p.is_null(),
                    "--params: the parameters of `{name}` must be an object"
                );
            }
            map
        }
    };
    let verifier = match (&args.url, &args.verifier) {
        (Some(_), _) => "server".to_string(),
        (None, Some(choice)) => choice.to_string(),
        (None, None) => "none".to_string(),
    };
    let model = match &args.url {
        Some(_) => None,
        None => {
            let path = args
                .model
                .clone()
                .unwrap_or_else(ponder::models::default_llm_path);
            Some(
                ponder::models::FittedModel::of_file(&path)
                    .with_context(|| format!("reading the model {}", path.display()))?,
            )
        }
    };
    let run = ponder_evals::results::RunInfo {
        model,
        dataset: args
            .dataset
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        dataset_sha256: ponder::models::file_sha256(&args.dataset)
            .with_context(|| format!("reading {}", args.dataset.display()))?,
        ponder_version: env!("CARGO_PKG_VERSION").into(),
    };
    Ok(ponder_evals::runner::Setup {
        params,
        verifier,
        pin_load: !args.live_load,
        shots: args.shots,
        auto_shots: 0,
        record_candidates: !args.without_candidates,
        run: Some(run),
    })
}

fn report(dir: &std::path::Path) -> anyhow::Result<()> {
    let rows = ponder_evals::read_rows(dir)?;
    anyhow::ensure!(!rows.is_empty(), "{}: no results", dir.display());
    let cells = ponder_evals::summarize(&rows);
    let md = ponder_evals::markdown(&cells);
    std::fs::write(dir.join("report.md"), &md)?;
    std::fs::write(
        dir.join("report.json"),
        serde_json::to_string_pretty(&cells)?,
    )?;
    ponder_evals::plot::accuracy_vs_spend(
        &cells,
        dir,
        "accuracy_vs_spend",
        "Accuracy vs tokens spent",
    )?;
    print!("{md}");
    eprintln!(
        "wrote report.md, report.json, accuracy_vs_spend.svg and .png in {}",
        dir.display()
    );
    Ok(())
}

fn grade(file: &std::path::Path) -> anyhow::Result<()> {
    let stdout = std::io::stdout();
    let out = std::io::BufWriter::new(stdout.lock());
    let summary = if file.as_os_str() == "-" {
        ponder_evals::grade_jsonl(std::io::stdin().lock(), out)
    } else {
        let f = std::fs::File::open(file).with_context(|| format!("opening {}", file.display()))?;
        ponder_evals::grade_jsonl(BufReader::new(f), out)
    }
    .with_context(|| format!("grading {}", file.display()))?;
    writeln!(
        std::io::stderr(),
        "graded {} pairs: {} equivalent, {} without an answer",
        summary.graded,
        summary.equivalent,
        summary.no_answer
    )?;
    Ok(())
}
