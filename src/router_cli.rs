//! `ponder router …`: train, evaluate, calibrate, try and benchmark the semantic router.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::{Args, Subcommand};
use ponder::router::{self, CalibrationTable, Router, RouterFile, TrainOptions};

#[derive(Args)]
pub(crate) struct RouterArgs {
    #[command(subcommand)]
    command: RouterCommand,
}

#[derive(Subcommand)]
enum RouterCommand {
    /// Train the classifier on a labelled set, report held-out accuracy, write a router file.
    Train {
        /// JSONL of {"query", "category", "difficulty"}.
        #[arg(long, default_value = "data/router/labelled.jsonl")]
        data: PathBuf,
        /// The router file to write.
        #[arg(long, default_value = router::file::DEFAULT_ROUTER)]
        out: PathBuf,
        /// Calibration table JSON (`ponder router calibrate` writes it).
        #[arg(long, default_value = "data/router/calibration.json")]
        calibration: PathBuf,
        /// Share of each (category, difficulty) cell held out for evaluation.
        #[arg(long, default_value_t = 0.2)]
        holdout: f64,
        /// Seed of the split.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// The sentence encoder [default: the installed all-MiniLM-L6-v2].
        #[arg(long)]
        embedder: Option<PathBuf>,
        #[command(flatten)]
        levelled: LevelledArgs,
    },
    /// Evaluate a router file on a labelled set (the held-out split with --heldout).
    Eval {
        /// JSONL of {"query", "category", "difficulty"}.
        #[arg(long, default_value = "data/router/labelled.jsonl")]
        data: PathBuf,
        /// The router file [default: the shipped one].
        #[arg(long, env = "PONDER_ROUTER")]
        router: Option<PathBuf>,
        /// Only the held-out split `train` used (same --holdout and --seed).
        #[arg(long)]
        heldout: bool,
        /// Held-out share.
        #[arg(long, default_value_t = 0.2)]
        holdout: f64,
        /// Seed of the split.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        #[command(flatten)]
        levelled: LevelledArgs,
    },
    /// Put measured accuracy vs spend into the calibration table: a `ponder-eval calibrate`
    /// table (levels mapped to difficulties) or a `ponder bench strategies` table (one difficulty).
    Calibrate {
        /// A `ponder-eval calibrate` table (the router's schema, difficulties already mapped
        /// from the dataset's levels): its rows replace the table's rows of its difficulties.
        #[arg(long, conflicts_with = "bench", required_unless_present = "bench")]
        harness: Option<PathBuf>,
        /// Or: a `ponder bench strategies` JSON table, all of one difficulty (--difficulty).
        #[arg(long, requires = "difficulty")]
        bench: Option<PathBuf>,
        /// Difficulty of the bench's problem set.
        #[arg(long)]
        difficulty: Option<String>,
        /// Calibration table to update (created if missing).
        #[arg(long, default_value = "data/router/calibration.json")]
        table: PathBuf,
        /// Provenance note stored with each row.
        #[arg(long, default_value = "ponder bench strategies")]
        source: String,
    },
    /// Fit the worked-example pool's similarity floor on the validation questions and write
    /// its manifest: the pool is GSM8K train's fit role, the floor the `--quantile` of the
    /// validation questions' (GSM8K train and ASDiv) similarity to their nearest example.
    Exemplars {
        /// The benchmark directory [default: $PONDER_DATASETS, else ../shared/datasets].
        #[arg(long)]
        datasets: Option<PathBuf>,
        /// Share of validation questions allowed below the floor.
        #[arg(long, default_value_t = 0.01)]
        quantile: f64,
        /// The manifest to write.
        #[arg(long, default_value = router::exemplars::DEFAULT_EXEMPLARS)]
        out: PathBuf,
    },
    /// Route one query and print the decision as JSON.
    Route {
        /// The query.
        #[arg(long)]
        query: String,
        /// The request's budget.
        #[arg(long, default_value_t = 2048)]
        budget: u64,
        /// Server load in [0, 1].
        #[arg(long, default_value_t = 0.0)]
        load: f64,
        /// The router file [default: the shipped one].
        #[arg(long, env = "PONDER_ROUTER")]
        router: Option<PathBuf>,
    },
    /// Routing latency per query (embed + classify + allocate), as JSON.
    Bench {
        /// Queries (JSONL with a `query` field).
        #[arg(long, default_value = "data/router/labelled.jsonl")]
        data: PathBuf,
        /// Timed passes.
        #[arg(long, default_value_t = 3)]
        repeat: usize,
        /// Batch size of the batched baseline.
        #[arg(long, default_value_t = 32)]
        batch: usize,
        /// The router file [default: the shipped one].
        #[arg(long, env = "PONDER_ROUTER")]
        router: Option<PathBuf>,
    },
}

/// A dataset whose levels are difficulty labels (`router train` fits the difficulty head on
/// its fit problems too; both commands report its held-out problems).
#[derive(Args)]
struct LevelledArgs {
    /// JSONL with `id`, `problem` and a `level` or a worked `solution` (levelled by its `<<…>>`
    /// calculations); `none` for the labelled set alone [default: gsm8k_train.jsonl in
    /// $PONDER_DATASETS, else ../shared/datasets]. Its fit problems join the difficulty head's
    /// training (at most --per-level of each level); its validation (or, for a set of no public
    /// roles, held-out) problems are evaluated on their own.
    #[arg(long)]
    levelled: Option<String>,
    /// Levels up to this one are easy.
    #[arg(long, default_value_t = router::data::DEFAULT_LEVEL_BINS.easy_max)]
    easy_max_level: u32,
    /// Levels from this one are hard (between: medium).
    #[arg(long, default_value_t = router::data::DEFAULT_LEVEL_BINS.hard_min)]
    hard_min_level: u32,
    /// Fit (or train-split) problems taken from each level (the first in file order).
    #[arg(long, default_value_t = router::data::DEFAULT_PER_LEVEL)]
    per_level: usize,
    /// Held-out problems evaluated on (the first in file order).
    #[arg(long, default_value_t = router::data::DEFAULT_HELD_OUT)]
    held_out: usize,
}

impl LevelledArgs {
    /// The dataset's name as the router file records it (the default's file name, else the
    /// path given) and its problems; `None` for `--levelled none`.
    fn load(&self) -> anyhow::Result<Option<(String, router::data::Levelled)>> {
        let (name, path) = match self.levelled.as_deref() {
            Some("none") => return Ok(None),
            Some(path) => (path.to_string(), PathBuf::from(path)),
            None => (
                router::data::DEFAULT_LEVELLED.to_string(),
                router::data::default_levelled_path(),
            ),
        };
        anyhow::ensure!(
            self.easy_max_level < self.hard_min_level,
            "--easy-max-level ({}) must be below --hard-min-level ({})",
            self.easy_max_level,
            self.hard_min_level
        );
        let bins = router::data::LevelBins {
            easy_max: self.easy_max_level,
            hard_min: self.hard_min_level,
        };
        let set = router::data::load_levelled(&path, bins, self.per_level, self.held_out)
            .with_context(|| format!("the levelled dataset (--levelled) at {}", path.display()))?;
        Ok(Some((name, set)))
    }
}

fn load_router(path: Option<PathBuf>) -> anyhow::Result<Router> {
    let path = path.unwrap_or_else(router::default_router_path);
    Ok(Router::load(
        &path,
        &ponder::models::default_embedder_dir(),
    )?)
}

pub(crate) fn run(args: RouterArgs) -> anyhow::Result<()> {
    match args.command {
        RouterCommand::Exemplars {
            datasets,
            quantile,
            out,
        } => fit_exemplar_floor(datasets, quantile, &out)?,
        RouterCommand::Train {
            data,
            out,
            calibration,
            holdout,
            seed,
            embedder,
            levelled,
        } => {
            let examples = router::data::load_labelled(&data)?;
            let levelled_set = levelled.load()?;
            let table: CalibrationTable = if calibration.is_file() {
                let text = std::fs::read_to_string(&calibration)
                    .with_context(|| format!("reading {}", calibration.display()))?;
                serde_json::from_str(&text).with_context(|| {
                    format!("{} is not a calibration table", calibration.display())
                })?
            } else {
                eprintln!(
                    "note: {} not found; the router file gets an empty calibration table",
                    calibration.display()
                );
                CalibrationTable::default()
            };
            let dir = embedder.unwrap_or_else(ponder::models::default_embedder_dir);
            let encoder = router::Embedder::load(&dir)?;
            let (classifier, evaluation) = router::train::train_and_evaluate(
                &encoder,
                &examples,
                levelled_set.as_ref().map(|(name, l)| (name.as_str(), l)),
                holdout,
                seed,
                &TrainOptions::default(),
            )?;
            print_evaluation(&evaluation);
            let file = RouterFile {
                format: router::file::FORMAT,
                embedder: router::embed::MODEL_NAME.into(),
                dim: encoder.dim(),
                classifier,
                allocator: router::Allocator {
                    table,
                    config: Default::default(),
                },
                evaluation: Some(evaluation),
            };
            file.save(&out)?;
            println!("wrote {}", out.display());
        }
        RouterCommand::Eval {
            data,
            router: path,
            heldout,
            holdout,
            seed,
            levelled,
        } => {
            let r = load_router(path)?;
            let mut examples = router::data::load_labelled(&data)?;
            if heldout {
                examples = router::data::split(&examples, holdout, seed).1;
            }
            let (category, difficulty) =
                router::train::evaluate(r.embedder(), &r.file().classifier, &examples)?;
            println!("examples: {}", examples.len());
            println!(
                "category accuracy: {:.3}\n\n{}",
                category.accuracy(),
                category.markdown()
            );
            println!(
                "difficulty accuracy: {:.3}\n\n{}",
                difficulty.accuracy(),
                difficulty.markdown()
            );
            if let Some((name, set)) = levelled.load()? {
                let (category, difficulty) =
                    router::train::evaluate(r.embedder(), &r.file().classifier, &set.held_out)?;
                println!(
                    "{} held out ({} problems), difficulty accuracy: {:.3} (routed as math: \
                     {:.3})\n\n{}",
                    name,
                    set.held_out.len(),
                    difficulty.accuracy(),
                    category.accuracy(),
                    difficulty.markdown()
                );
            }
        }
        RouterCommand::Calibrate {
            harness,
            bench,
            difficulty,
            table: path,
            source,
        } => {
            let mut table: CalibrationTable = match std::fs::read_to_string(&path) {
                Ok(text) => serde_json::from_str(&text)
                    .with_context(|| format!("{} is not a calibration table", path.display()))?,
                Err(_) => CalibrationTable::default(),
            };
            let n = match (&harness, &bench, &difficulty) {
                (Some(h), _, _) => router::calibrate::merge_harness(&mut table, h)?,
                (None, Some(b), Some(d)) => {
                    router::calibrate::merge_bench(&mut table, b, d, &source)?
                }
                _ => anyhow::bail!(
                    "router calibrate needs --harness FILE, or --bench FILE with --difficulty"
                ),
            };
            std::fs::write(&path, serde_json::to_string_pretty(&table)? + "\n")
                .with_context(|| format!("writing {}", path.display()))?;
            println!("{n} rows written to {}", path.display());
        }
        RouterCommand::Route {
            query,
            budget,
            load,
            router: path,
        } => {
            let r = load_router(path)?;
            println!(
                "{}",
                serde_json::to_string_pretty(&r.route(&query, budget, load)?)?
            );
        }
        RouterCommand::Bench {
            data,
            repeat,
            batch,
            router: path,
        } => {
            let start = std::time::Instant::now();
            let r = load_router(path)?;
            let load_ms = start.elapsed().as_secs_f64() * 1e3;
            let examples = router::data::load_labelled(&data)?;
            let queries: Vec<&str> = examples.iter().map(|e| e.query.as_str()).collect();
            let report = router::bench::bench_router(&r, &queries, repeat, batch)?;
            let mut json = serde_json::to_value(&report)?;
            json["load_ms"] = serde_json::json!(load_ms);
            println!("{}", serde_json::to_string_pretty(&json)?);
        }
    }
    Ok(())
}

fn print_evaluation(e: &router::train::Evaluation) {
    println!(
        "train examples: {}, held out: {}",
        e.train_examples, e.heldout_examples
    );
    println!(
        "held-out category accuracy: {:.3}\n\n{}",
        e.category_accuracy,
        e.category.markdown()
    );
    println!(
        "held-out difficulty accuracy: {:.3}\n\n{}",
        e.difficulty_accuracy,
        e.difficulty.markdown()
    );
    if let Some(l) = &e.levelled {
        println!(
            "{}: difficulty head trained on {} fit (or train-split) problems too; on its {} \
             held-out problems, difficulty accuracy: {:.3} (routed as math: {:.3})\n\n{}",
            l.data,
            l.train_examples,
            l.heldout_examples,
            l.difficulty_accuracy,
            l.math_share,
            l.difficulty.markdown()
        );
    }
}

/// `ponder router exemplars`: the pool of GSM8K train's fit role, its floor fitted on the
/// validation questions of GSM8K train and ASDiv, written as a manifest.
fn fit_exemplar_floor(datasets: Option<PathBuf>, quantile: f64, out: &Path) -> anyhow::Result<()> {
    use ponder::roles::{role_of, Role};
    use router::exemplars::{similarity_floor, FloorFit, PoolManifest};
    #[derive(serde::Deserialize)]
    struct Row {
        id: String,
        problem: String,
    }
    let dir = datasets.unwrap_or_else(ponder::roles::datasets_dir);
    let pool_file = "gsm8k_train.jsonl";
    let pool_path = dir.join(pool_file);
    let embedder_dir = ponder::models::default_embedder_dir();
    let encoder = std::sync::Arc::new(router::Embedder::load(&embedder_dir)?);
    let pool = router::Exemplars::load(&pool_path, std::sync::Arc::clone(&encoder))?;
    let mut questions = Vec::new();
    let mut counts = std::collections::BTreeMap::new();
    for file in [pool_file, "asdiv.jsonl"] {
        let path = dir.join(file);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let row: Row = serde_json::from_str(line)
                .with_context(|| format!("a row of {}", path.display()))?;
            if role_of(&row.id) == Some(Role::Validation) {
                *counts.entry(file.to_string()).or_insert(0) += 1;
                questions.push(row.problem);
            }
        }
    }
    let refs: Vec<&str> = questions.iter().map(String::as_str).collect();
    let nearest = pool.nearest_similarities(&refs)?;
    let floor = similarity_floor(&nearest, quantile);
    let manifest = PoolManifest {
        dataset: pool_file.into(),
        dataset_sha256: ponder::models::file_sha256(&pool_path)?,
        examples: pool.len(),
        embedder: ponder::models::DEFAULT_EMBEDDER.into(),
        embedder_sha256: ponder::models::file_sha256(&embedder_dir.join("model.safetensors"))?,
        min_similarity: floor,
        fitted_on: FloorFit {
            role: Role::Validation,
            questions: counts,
            quantile,
        },
        command: format!("ponder router exemplars --quantile {quantile}"),
    };
    if let Some(parent) = out.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(out, serde_json::to_string_pretty(&manifest)? + "\n")
        .with_context(|| format!("writing {}", out.display()))?;
    eprintln!(
        "{} examples; floor {floor:.4} (the {quantile} quantile of {} validation questions' \
         nearest similarity); wrote {}",
        pool.len(),
        questions.len(),
        out.display()
    );
    Ok(())
}
