//! The learned outcome verifier: a small model, trained on labelled candidates of the harness's
//! runs on public fit problems, that scores a finished candidate by the probability that its
//! answer is right.
//!
//! A 135M model is a poor judge of its own steps, but the *set* of candidates a search produced, and what each one shows on its face,
//! carry signal: agreement with the other candidates, whether the arithmetic it writes holds,
//! whether its answer is the quantity it computed last or a number copied from the question,
//! how it ended, and the model's token confidence along it ([`features`]). A logistic model
//! over those features ([`model`]) is fitted with candle by `ponder verifier train` on the
//! train split of the harness's candidate sets ([`data`]), records the generator they came
//! from (it applies to that model only) and the problems it was fitted on, and ships with its
//! held-out evaluation ([`evaluate`](mod@evaluate): AUROC, selection vs majority vote vs
//! oracle, with CIs); `ponder verifier eval` re-measures it. As a [`Verifier`] (`--verifier learned[:PATH]`) it
//! scores each batch of candidates together, so agreement is measured within the batch: a
//! strategy that scores all N candidates in one submission (`best_of_n`,
//! `weighted_best_of_n`) gives it what it was trained on.
//!
//! It must not run a language model or read the harness's result files; the harness exports
//! candidate sets (`ponder-eval candidates`). The one exception is [`hidden`], an experiment
//! kept apart: a head on the generator's own hidden state, which runs the generator to read
//! it and is measured by `ponder verifier … --head hidden`, not served.

pub mod data;
pub mod error;
pub mod evaluate;
pub mod features;
pub mod hidden;
pub mod model;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ponder_verifiers::{Scores, Solution, TraceConfidence, Verifier, VerifierError};

pub use data::{read_groups, write_groups, CandidateGroup, LabelledCandidate, Split};
pub use error::{LearnedVerifierError, Result};
pub use evaluate::{evaluate, Evaluation};
pub use features::{CandidateView, FeatureSet, Featurizer};
pub use model::{FitOptions, OutcomeModel};

use crate::models::FittedModel;
use crate::router::Embedder;

/// Where the shipped model lives, relative to the checkout.
pub const DEFAULT_MODEL: &str = "data/verifier/outcome.json";
/// The fit problems' candidate set the shipped model is fitted on, as
/// `evals/examples/public-verifier/run.sh candidates` writes it (it holds the public problems'
/// text, so it stays out of the repository).
pub const DEFAULT_TRAIN: &str = "target/public-verifier/fit.jsonl";
/// The validation problems' candidate set it is evaluated (and chosen) on, likewise.
pub const DEFAULT_HELDOUT: &str = "target/public-verifier/validation.jsonl";

/// `$PONDER_LEARNED_VERIFIER`, else `./data/verifier/outcome.json` if present, else the
/// checkout's.
pub fn default_model_path() -> PathBuf {
    crate::models::shipped_path("PONDER_LEARNED_VERIFIER", DEFAULT_MODEL)
}

/// The feature vectors of every candidate of `groups`, group by group.
pub fn group_features(
    featurizer: &Featurizer,
    groups: &[CandidateGroup],
) -> Result<Vec<Vec<Vec<f32>>>> {
    groups
        .iter()
        .map(|g| {
            let views: Vec<CandidateView<'_>> = g
                .candidates
                .iter()
                .map(|c| CandidateView {
                    text: &c.text,
                    complete: c.finished,
                    confidence: c.trace_confidence,
                })
                .collect();
            featurizer.features(&g.question, &views)
        })
        .collect()
}

/// Fits a model on the train groups (held-out groups are refused) and, when given held-out
/// groups, evaluates it on them.
pub fn train(
    featurizer: &Featurizer,
    train_groups: &[CandidateGroup],
    train_name: &str,
    heldout: Option<(&[CandidateGroup], &str)>,
    options: FitOptions,
) -> Result<OutcomeModel> {
    refuse_unfittable(train_groups, train_name)?;
    let features = group_features(featurizer, train_groups)?;
    let xs: Vec<Vec<f32>> = features.into_iter().flatten().collect();
    let ys: Vec<bool> = train_groups
        .iter()
        .flat_map(|g| g.candidates.iter().map(|c| c.correct))
        .collect();
    let mut model = OutcomeModel::fit(
        &xs,
        &ys,
        featurizer.set(),
        featurizer.names(),
        options,
        train_name,
        train_groups.len(),
    )?;
    let mut ids: Vec<String> = train_groups.iter().map(|g| g.problem_id.clone()).collect();
    ids.sort_unstable();
    model.training.problem_ids = ids;
    if let Some((groups, name)) = heldout {
        model.heldout = Some(evaluate_model(&model, featurizer, groups, name)?);
    }
    Ok(model)
}

/// Writes `value` to `path` as pretty JSON with a final newline, creating its directory.
pub(crate) fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| LearnedVerifierError::write(dir, e))?;
    }
    let text =
        serde_json::to_string_pretty(value).map_err(|e| LearnedVerifierError::write(path, e))?;
    std::fs::write(path, text + "\n").map_err(|e| LearnedVerifierError::write(path, e))
}

/// Refuses groups that may not be fitted on: held out, or a public problem outside the fit
/// role.
fn refuse_unfittable(train_groups: &[CandidateGroup], train_name: &str) -> Result<()> {
    if let Some(g) = train_groups.iter().find(|g| {
        // The group's split decides, and a public problem must also be in the fit role.
        let public = crate::roles::role_of(&g.problem_id).is_some();
        g.split != Split::Train || (public && !crate::roles::may_fit(&g.problem_id))
    }) {
        return Err(LearnedVerifierError::Training(format!(
            "{train_name}: problem {} may not be fitted on (held out, or a public problem \
             outside the fit role); train only on fit problems",
            g.problem_id
        )));
    }
    Ok(())
}

/// Scores every candidate of `groups` with `model` and evaluates the scores.
pub fn evaluate_model(
    model: &OutcomeModel,
    featurizer: &Featurizer,
    groups: &[CandidateGroup],
    name: &str,
) -> Result<Evaluation> {
    let scores: Vec<Vec<f32>> = group_features(featurizer, groups)?
        .iter()
        .map(|g| g.iter().map(|x| model.probability(x)).collect())
        .collect();
    Ok(evaluate(groups, &scores, name))
}

/// The learned outcome verifier as a [`Verifier`]: a model and the featurizer it was trained
/// with.
///
/// # Example: fit on labelled candidates, then score a batch
///
/// ```
/// use ponder::learned_verifier::{
///     train, CandidateGroup, FeatureSet, Featurizer, FitOptions, LabelledCandidate,
///     LearnedVerifier, Split,
/// };
/// use ponder_verifiers::{Solution, Verifier};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // Right answers here agree with each other; wrong ones are alone.
/// let candidate = |answer: &str, correct| LabelledCandidate {
///     text: format!("So the total is {answer}. The answer is {answer}."),
///     answer: Some(answer.into()),
///     correct,
///     tokens: 12,
///     finished: true,
///     trace_confidence: None,
/// };
/// let group = |id: &str| CandidateGroup {
///     problem_id: id.into(),
///     question: "Ann has 3 boxes of 4 pens. How many pens?".into(),
///     gold: "12".into(),
///     split: Split::Train,
///     candidates: vec![candidate("12", true), candidate("12", true), candidate("7", false)],
/// };
/// let featurizer = Featurizer::new(FeatureSet::Scalar, None);
/// let groups = vec![group("a"), group("b")];
/// let model = train(&featurizer, &groups, "example", None, FitOptions::default())?;
/// let verifier = LearnedVerifier::new(model, None);
///
/// let steps = |t: &str| vec![t.to_string()];
/// let (a, b, c) = (steps("The answer is 12."), steps("The answer is 12."), steps("The answer is 9."));
/// fn solution(steps: &[String]) -> Solution<'_> {
///     let problem = "Ben has 2 bags of 6 apples. How many apples?";
///     Solution { problem, steps, complete: true, confidence: None }
/// }
/// let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
/// let scores = rt.block_on(verifier.score_batch(&[solution(&a), solution(&b), solution(&c)]))?;
/// assert!(scores[0].overall > scores[2].overall, "the agreeing answer scores higher");
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct LearnedVerifier {
    model: Arc<OutcomeModel>,
    featurizer: Featurizer,
}

impl LearnedVerifier {
    /// Loads a model file to score `served`'s candidates, refusing one fitted on another
    /// generator's ([`LearnedVerifierError::ForeignModel`]); a file that records no generator
    /// is applied with a warning. A model that reads embeddings loads the sentence encoder
    /// from `embedder_dir`.
    pub fn load(path: &Path, embedder_dir: &Path, served: &FittedModel) -> Result<Self> {
        let model = OutcomeModel::load(path)?;
        match &model.generator {
            Some(fitted) if !fitted.applies_to(served) => {
                return Err(LearnedVerifierError::ForeignModel {
                    path: path.to_path_buf(),
                    fitted: fitted.to_string(),
                    served: served.to_string(),
                })
            }
            Some(_) => {}
            None => tracing::warn!(
                path = %path.display(),
                served = %served,
                "the learned verifier records no generator: applied to this one unchecked"
            ),
        }
        let embedder = match model.feature_set {
            FeatureSet::Scalar => None,
            _ => Some(Arc::new(Embedder::load(embedder_dir)?)),
        };
        Ok(Self::new(model, embedder))
    }

    /// A verifier of `model`, with the encoder its features need (if any).
    pub fn new(model: OutcomeModel, embedder: Option<Arc<Embedder>>) -> Self {
        let featurizer = Featurizer::new(model.feature_set, embedder);
        Self {
            model: Arc::new(model),
            featurizer,
        }
    }

    /// The model.
    pub fn model(&self) -> &OutcomeModel {
        &self.model
    }

    /// Scores owned copies of a batch (run off the async threads: the encoder is CPU work).
    fn score_owned(&self, batch: &[OwnedSolution]) -> Result<Vec<f32>> {
        let mut out = vec![0.0f32; batch.len()];
        // Batches may mix problems: agreement is measured among candidates to the same one.
        let mut problems: Vec<&str> = batch.iter().map(|b| b.problem.as_str()).collect();
        problems.sort_unstable();
        problems.dedup();
        for problem in problems {
            let members: Vec<&OwnedSolution> =
                batch.iter().filter(|b| b.problem == problem).collect();
            let views: Vec<CandidateView<'_>> = members
                .iter()
                .map(|b| CandidateView {
                    text: &b.text,
                    complete: b.complete,
                    confidence: b.confidence,
                })
                .collect();
            let rows = self.featurizer.features(problem, &views)?;
            for (b, x) in members.iter().zip(&rows) {
                if let Some(slot) = out.get_mut(b.index) {
                    *slot = self.model.probability(x);
                }
            }
        }
        Ok(out)
    }
}

/// A solution copied out of its borrow, to be scored on a blocking thread.
struct OwnedSolution {
    index: usize,
    problem: String,
    text: String,
    complete: bool,
    confidence: Option<TraceConfidence>,
}

fn backend_error(e: impl std::fmt::Display) -> VerifierError {
    VerifierError::Backend {
        verifier: "learned".into(),
        message: e.to_string(),
    }
}

#[async_trait::async_trait]
impl Verifier for LearnedVerifier {
    fn name(&self) -> &str {
        "learned"
    }

    /// Fitted on best-of-N's finished candidates: a tree search's prefixes are refused.
    fn scores_partial(&self) -> bool {
        false
    }

    async fn score(&self, solution: Solution<'_>) -> ponder_verifiers::Result<Scores> {
        let mut all = self.score_batch(std::slice::from_ref(&solution)).await?;
        all.pop().ok_or_else(|| backend_error("no score returned"))
    }

    async fn score_batch(
        &self,
        solutions: &[Solution<'_>],
    ) -> ponder_verifiers::Result<Vec<Scores>> {
        let batch: Vec<OwnedSolution> = solutions
            .iter()
            .enumerate()
            .map(|(index, s)| OwnedSolution {
                index,
                problem: s.problem.to_string(),
                text: s.text(),
                complete: s.complete,
                confidence: s.confidence,
            })
            .collect();
        let steps: Vec<usize> = solutions.iter().map(|s| s.steps.len()).collect();
        let this = self.clone();
        let probabilities = tokio::task::spawn_blocking(move || this.score_owned(&batch))
            .await
            .map_err(backend_error)?
            .map_err(backend_error)?;
        Ok(probabilities
            .into_iter()
            .zip(steps)
            .map(|(p, n)| Scores::uniform(n, p))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A model that reads only `agreement` (weight 2 on the standardised value).
    fn agreement_model() -> OutcomeModel {
        let names = Featurizer::new(FeatureSet::Scalar, None).names();
        let mut weights = vec![0.0; names.len()];
        weights[0] = 2.0;
        OutcomeModel {
            version: model::FORMAT_VERSION,
            feature_set: FeatureSet::Scalar,
            mean: vec![0.5; names.len()],
            scale: vec![0.25; names.len()],
            feature_names: names,
            weights,
            bias: 0.0,
            training: model::TrainingInfo {
                data: "hand-made".into(),
                problems: 0,
                candidates: 0,
                positives: 0,
                options: FitOptions::default(),
                final_loss: 0.0,
                problem_ids: Vec::new(),
            },
            generator: None,
            heldout: None,
        }
    }

    #[tokio::test]
    async fn a_batch_is_scored_together_so_agreement_counts_and_problems_do_not_mix() {
        let verifier = LearnedVerifier::new(agreement_model(), None);
        let steps = |t: &str| vec![t.to_string()];
        let (a, b, c) = (
            steps("The answer is 4."),
            steps("So \\boxed{4}"),
            steps("The answer is 5."),
        );
        let other = steps("The answer is 5.");
        fn sol<'a>(problem: &'a str, steps: &'a [String]) -> Solution<'a> {
            Solution {
                problem,
                steps,
                complete: true,
                confidence: None,
            }
        }
        let scores = verifier
            .score_batch(&[sol("p", &a), sol("p", &b), sol("p", &c), sol("q", &other)])
            .await
            .expect("scores");
        let p: Vec<f32> = scores.iter().map(|s| s.overall).collect();
        // Two of three agree on 4 in problem p; 5 is alone there; q's 5 agrees with itself.
        assert_eq!(p[0], p[1]);
        assert!(p[0] > p[2], "{p:?}");
        assert!(p[3] > p[0], "alone in its own problem, agreement 1: {p:?}");
        assert!(p.iter().all(|x| (0.0..=1.0).contains(x)));
        assert_eq!(scores[0].steps, vec![p[0]], "one score per step");
        // Scored alone, a candidate agrees with itself.
        let alone = verifier.score(sol("p", &c)).await.expect("score");
        assert_eq!(alone.overall, p[3]);
    }

    #[test]
    fn training_refuses_held_out_problems() {
        let refusal = |problem_id: &str, split: Split| {
            let group = CandidateGroup {
                problem_id: problem_id.into(),
                question: "q".into(),
                gold: "1".into(),
                split,
                candidates: Vec::new(),
            };
            let featurizer = Featurizer::new(FeatureSet::Scalar, None);
            train(
                &featurizer,
                &[group],
                "set.jsonl",
                None,
                FitOptions::default(),
            )
            .map(|_| ())
            .map_err(|e| e.to_string())
        };
        let e = refusal("h", Split::HeldOut).expect_err("held out");
        assert!(e.contains("problem h may not be fitted on"), "{e}");
        // A public problem outside the fit role is refused even when marked train.
        let validation = (0..200)
            .map(|i| format!("gsm8k-train-{i:04}"))
            .find(|id| crate::roles::role_of(id) == Some(crate::roles::Role::Validation))
            .unwrap_or_default();
        let e = refusal(&validation, Split::Train).expect_err("a validation problem");
        assert!(e.contains(&validation), "{e}");
    }
}
