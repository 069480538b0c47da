//! `ponder verifier …`: train and evaluate the learned outcome verifier on candidate sets
//! exported from harness runs (`ponder-eval candidates`).

use std::path::PathBuf;
use std::sync::Arc;

use clap::{Args, Subcommand};
use ponder::learned_verifier::{
    self, evaluate, read_groups, FeatureSet, Featurizer, FitOptions, OutcomeModel,
};
use ponder::router::Embedder;

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
        /// The model file to write.
        #[arg(long, default_value = learned_verifier::DEFAULT_MODEL)]
        out: PathBuf,
        /// Which features: scalar, cosine (+ question–solution cosine), embedding (+ the
        /// solution's embedding dimensions).
        #[arg(long, default_value = "scalar", value_parser = parse_feature_set)]
        features: FeatureSet,
        /// AdamW steps.
        #[arg(long, default_value_t = FitOptions::default().epochs)]
        epochs: usize,
        /// AdamW weight decay.
        #[arg(long, default_value_t = FitOptions::default().weight_decay)]
        weight_decay: f64,
        /// The sentence encoder for the embedding features [default: the installed MiniLM].
        #[arg(long)]
        embedder: Option<PathBuf>,
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
            features,
            epochs,
            weight_decay,
            embedder,
        } => {
            let featurizer = Featurizer::new(features, embedder_for(features, embedder)?);
            let train_groups = read_groups(&data)?;
            let heldout_groups = read_groups(&heldout)?;
            let options = FitOptions {
                epochs,
                weight_decay,
                ..FitOptions::default()
            };
            let model = learned_verifier::train(
                &featurizer,
                &train_groups,
                &data.display().to_string(),
                Some((&heldout_groups, &heldout.display().to_string())),
                options,
            )?;
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
            baseline,
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

/// A rule's scores over the same candidates, for comparison with the learned model.
fn baseline_scores(
    rule: &str,
    groups: &[learned_verifier::CandidateGroup],
) -> anyhow::Result<Vec<Vec<f32>>> {
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
