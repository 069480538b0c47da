//! `ponder verifier …`: train and evaluate the learned outcome verifier on candidate sets
//! exported from harness runs (`ponder-eval candidates`) — the feature model (`--head
//! features`, the default, the one served) or the head on the generator's hidden state
//! (`--head hidden`, measured only; `learned_verifier::hidden`).

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use clap::{Args, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use ponder::learned_verifier::hidden::{self, HeadOptions, HiddenFeatures, HiddenHead};
use ponder::learned_verifier::{
    self, evaluate, read_groups, CandidateGroup, Evaluation, FeatureSet, Featurizer, FitOptions,
    OutcomeModel,
};
use ponder::router::Embedder;

/// Which learned verifier a command trains or evaluates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Head {
    /// Logistic regression over hand features of a candidate (the served verifier).
    Features,
    /// A head on the generator's final-normed hidden state at the end of the solution.
    Hidden,
}

/// The generator the candidates came from, which the hidden-state head also reads.
#[derive(Args)]
struct HiddenArgs {
    /// The generator whose candidates these are, recorded in the fitted file (it applies to
    /// that model only); `--head hidden` reads its hidden states [default: the installed
    /// SmolLM2].
    #[arg(long)]
    llm: Option<PathBuf>,
    /// `--head hidden`: where readings are cached (one file per generator).
    #[arg(long, default_value = hidden::DEFAULT_CACHE_DIR)]
    cache_dir: PathBuf,
}

#[derive(Args)]
pub(crate) struct VerifierArgs {
    #[command(subcommand)]
    command: VerifierCommand,
}

#[derive(Subcommand)]
enum VerifierCommand {
    /// Fit the learned outcome verifier on a train-split candidate set, evaluate it on a
    /// held-out one, and write the model file with that evaluation.
    Train {
        /// Train-split candidate groups (JSONL; held-out problems are refused).
        #[arg(long, default_value = learned_verifier::DEFAULT_TRAIN)]
        data: PathBuf,
        /// Held-out candidate groups to evaluate on (stored in the file).
        #[arg(long, default_value = learned_verifier::DEFAULT_HELDOUT)]
        heldout: PathBuf,
        /// The model file to write [default for `--head features`:
        /// data/verifier/outcome.json; required for `--head hidden`].
        #[arg(long)]
        out: Option<PathBuf>,
        /// Which verifier to fit.
        #[arg(long, value_enum, default_value_t = Head::Features)]
        head: Head,
        /// Which features: scalar, cosine (+ question–solution cosine), embedding (+ the
        /// solution's embedding dimensions).
        #[arg(long, default_value = "scalar", value_parser = parse_feature_set)]
        features: FeatureSet,
        /// AdamW steps [default: 400 for features, 300 for the hidden head].
        #[arg(long)]
        epochs: Option<usize>,
        /// AdamW weight decay.
        #[arg(long, default_value_t = FitOptions::default().weight_decay)]
        weight_decay: f64,
        /// The sentence encoder for the embedding features [default: the installed MiniLM].
        #[arg(long)]
        embedder: Option<PathBuf>,
        /// `--head hidden`: hidden units of an MLP head; 0 fits a logistic regression.
        #[arg(long, default_value_t = 0)]
        mlp_units: usize,
        /// `--head hidden`: cross-validation folds over the fit problems (to choose the L2
        /// penalty).
        #[arg(long, default_value_t = HeadOptions::default().folds)]
        folds: usize,
        /// `--head hidden`: the L2 penalties cross-validation chooses among [default:
        /// 1e-3,1e-2,1e-1,1,10,100].
        #[arg(long, value_delimiter = ',')]
        l2: Vec<f64>,
        #[command(flatten)]
        hidden: HiddenArgs,
    },
    /// Evaluate a model file on a candidate set: AUROC, selection vs majority vs oracle (JSON
    /// on stdout, a Markdown table on stderr).
    Eval {
        /// Candidate groups (JSONL).
        #[arg(long, default_value = learned_verifier::DEFAULT_HELDOUT)]
        data: PathBuf,
        /// The model file [default: the shipped one].
        #[arg(long, env = "PONDER_LEARNED_VERIFIER")]
        model: Option<PathBuf>,
        /// Instead of a model, evaluate a rule: `calc` (the calculation check) or `confidence`
        /// (mean token confidence), over the same candidates.
        #[arg(long, conflicts_with = "model")]
        baseline: Option<String>,
        /// Which kind of model file `--model` is.
        #[arg(long, value_enum, default_value_t = Head::Features)]
        head: Head,
        #[command(flatten)]
        hidden: HiddenArgs,
    },
}

fn parse_feature_set(s: &str) -> Result<FeatureSet, String> {
    match s {
        "scalar" => Ok(FeatureSet::Scalar),
        "cosine" => Ok(FeatureSet::Cosine),
        "embedding" => Ok(FeatureSet::Embedding),
        _ => Err(format!("`{s}`: expected scalar, cosine or embedding")),
    }
}

fn embedder_for(set: FeatureSet, dir: Option<PathBuf>) -> anyhow::Result<Option<Arc<Embedder>>> {
    if set == FeatureSet::Scalar {
        return Ok(None);
    }
    let dir = dir.unwrap_or_else(ponder::models::default_embedder_dir);
    Ok(Some(Arc::new(Embedder::load(&dir)?)))
}

pub(crate) fn run(args: VerifierArgs) -> anyhow::Result<()> {
    match args.command {
        VerifierCommand::Train {
            data,
            heldout,
            out,
            head: Head::Hidden,
            epochs,
            weight_decay: _,
            mlp_units,
            folds,
            l2,
            hidden,
            ..
        } => {
            let Some(out) = out else {
                anyhow::bail!("--head hidden: name the head file to write with --out");
            };
            let options = HeadOptions {
                hidden_units: mlp_units,
                folds,
                epochs: epochs.unwrap_or(HeadOptions::default().epochs),
                l2_grid: if l2.is_empty() {
                    HeadOptions::default().l2_grid
                } else {
                    l2
                },
                ..HeadOptions::default()
            };
            let train_groups = read_groups(&data)?;
            let heldout_groups = read_groups(&heldout)?;
            let mut features = hidden.open()?;
            let bar = progress("hidden states")?;
            let head = tokio_runtime()?.block_on(hidden::train_head(
                &mut features,
                &train_groups,
                &data.display().to_string(),
                Some((&heldout_groups, &heldout.display().to_string())),
                options,
                &bar,
            ))?;
            bar.finish_and_clear();
            head.save(&out)?;
            let cv: Vec<String> = head
                .training
                .cross_validation
                .iter()
                .map(|p| format!("{:e}: {:.3}", p.l2, p.auroc))
                .collect();
            eprintln!(
                "cross-validated AUROC on the fit problems by L2 penalty: {}; chose {:e}\n",
                cv.join(", "),
                head.training.l2
            );
            if let Some(e) = &head.heldout {
                eprint!("{}", hidden_markdown(e));
            }
            eprintln!("wrote {}", out.display());
            println!("{}", serde_json::to_string_pretty(&head.heldout)?);
        }
        VerifierCommand::Train {
            data,
            heldout,
            out,
            head: Head::Features,
            features,
            epochs,
            weight_decay,
            embedder,
            hidden,
            ..
        } => {
            let out = out.unwrap_or_else(|| PathBuf::from(learned_verifier::DEFAULT_MODEL));
            let llm = hidden.llm_path();
            let generator = ponder::models::FittedModel::of_file(&llm)
                .with_context(|| format!("reading the generator {}", llm.display()))?;
            let epochs = epochs.unwrap_or(FitOptions::default().epochs);
            let featurizer = Featurizer::new(features, embedder_for(features, embedder)?);
            let train_groups = read_groups(&data)?;
            let heldout_groups = read_groups(&heldout)?;
            let options = FitOptions {
                epochs,
                weight_decay,
                ..FitOptions::default()
            };
            let mut model = learned_verifier::train(
                &featurizer,
                &train_groups,
                &data.display().to_string(),
                Some((&heldout_groups, &heldout.display().to_string())),
                options,
            )?;
            model.generator = Some(generator);
            model.save(&out)?;
            if let Some(e) = &model.heldout {
                eprint!("{}", evaluate::markdown(e));
            }
            eprintln!("wrote {}", out.display());
            println!("{}", serde_json::to_string_pretty(&model.heldout)?);
        }
        VerifierCommand::Eval {
            data,
            model,
            head: Head::Hidden,
            hidden,
            ..
        } => {
            let Some(path) = model else {
                anyhow::bail!("--head hidden: name the head file with --model");
            };
            let groups = read_groups(&data)?;
            let mut features = hidden.open()?;
            let head = HiddenHead::load(&path, features.generator())?;
            let bar = progress("hidden states")?;
            let evaluation = tokio_runtime()?.block_on(hidden::evaluate_head(
                &head,
                &mut features,
                &groups,
                &data.display().to_string(),
                &bar,
            ))?;
            bar.finish_and_clear();
            eprint!("{}", hidden_markdown(&evaluation));
            println!("{}", serde_json::to_string_pretty(&evaluation)?);
        }
        VerifierCommand::Eval {
            data,
            model,
            baseline,
            head: Head::Features,
            ..
        } => {
            let groups = read_groups(&data)?;
            let name = data.display().to_string();
            let evaluation = match baseline.as_deref() {
                None => {
                    let path = model.unwrap_or_else(learned_verifier::default_model_path);
                    let model = OutcomeModel::load(&path)?;
                    let featurizer =
                        Featurizer::new(model.feature_set, embedder_for(model.feature_set, None)?);
                    learned_verifier::evaluate_model(&model, &featurizer, &groups, &name)?
                }
                Some(rule) => {
                    let scores = baseline_scores(rule, &groups)?;
                    evaluate::evaluate(&groups, &scores, &name)
                }
            };
            eprint!("{}", evaluate::markdown(&evaluation));
            println!("{}", serde_json::to_string_pretty(&evaluation)?);
        }
    }
    Ok(())
}

impl HiddenArgs {
    /// `--llm`, else the installed SmolLM2.
    fn llm_path(&self) -> PathBuf {
        self.llm
            .clone()
            .unwrap_or_else(ponder::models::default_llm_path)
    }

    fn open(&self) -> anyhow::Result<HiddenFeatures> {
        Ok(HiddenFeatures::open(&self.llm_path(), &self.cache_dir)?)
    }
}

/// A bar over candidates read (its length is set by the reader).
fn progress(what: &str) -> anyhow::Result<ProgressBar> {
    let bar = ProgressBar::new(0);
    bar.set_style(ProgressStyle::with_template(
        "{msg} {bar:40} {pos}/{len} [{elapsed}<{eta}]",
    )?);
    bar.set_message(what.to_string());
    Ok(bar)
}

fn tokio_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

/// The evaluation's table (with the weighted vote's share of the majority-to-oracle gap),
/// plus the share top-1 closes.
fn hidden_markdown(e: &Evaluation) -> String {
    let top1 = e
        .gap_closed_by(e.top1.rate)
        .map_or("n/a".into(), |g| format!("{g:.2}"));
    format!(
        "{}(top-1 − majority) / (oracle − majority): {top1}\n",
        evaluate::markdown(e)
    )
}

/// A rule's scores over the same candidates, for comparison with the learned model.
fn baseline_scores(rule: &str, groups: &[CandidateGroup]) -> anyhow::Result<Vec<Vec<f32>>> {
    let calc = ponder_verifiers::CalcCheck::default();
    groups
        .iter()
        .map(|g| {
            g.candidates
                .iter()
                .map(|c| match rule {
                    "calc" => Ok(calc
                        .score_steps(std::slice::from_ref(&c.text), c.finished)
                        .overall),
                    "confidence" => Ok(c.trace_confidence.map_or(0.0, |t| t.mean)),
                    _ => Err(anyhow::anyhow!(
                        "--baseline `{rule}`: expected calc or confidence"
                    )),
                })
                .collect()
        })
        .collect()
}
