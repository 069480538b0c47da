//! The learned outcome verifier's model: logistic regression from a candidate's standardised
//! feature vector to the probability that its answer is right, fitted with candle (AdamW on
//! the mean logistic loss, decoupled weight decay, weights starting at zero so a fit is
//! deterministic), and the file it lives in (JSON: feature names, standardisation, weights,
//! what it was trained on and its held-out evaluation).
//!
//! A linear model on ~20 named features is what a few thousand labelled candidates support
//! without overfitting, and its weights can be read (the file names each one).

use std::path::Path;

use candle_core::{DType, Device, Tensor, Var};
use candle_nn::{AdamW, Optimizer, ParamsAdamW};
use serde::{Deserialize, Serialize};

use super::error::{LearnedVerifierError, Result};
use super::evaluate::Evaluation;
use super::features::FeatureSet;
use crate::models::FittedModel;

/// The model file's format version.
pub const FORMAT_VERSION: u32 = 1;

/// How to fit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FitOptions {
    /// Full-batch AdamW steps.
    pub epochs: usize,
    /// Step size.
    pub learning_rate: f64,
    /// Decoupled weight decay.
    pub weight_decay: f64,
}

impl Default for FitOptions {
    fn default() -> Self {
        Self {
            epochs: 400,
            learning_rate: 0.05,
            weight_decay: 0.01,
        }
    }
}

/// What a model was fitted on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainingInfo {
    /// The candidate set (path as given).
    pub data: String,
    /// Problems.
    pub problems: usize,
    /// Candidates.
    pub candidates: usize,
    /// Candidates whose answer was right.
    pub positives: usize,
    /// The fit's settings.
    pub options: FitOptions,
    /// Mean logistic loss on the training candidates after the fit.
    pub final_loss: f64,
    /// The ids of the problems fitted on, sorted (a test checks a shipped file's are all in
    /// the fit role).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problem_ids: Vec<String>,
}

/// A fitted outcome model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutcomeModel {
    /// [`FORMAT_VERSION`].
    pub version: u32,
    /// Which features it reads.
    pub feature_set: FeatureSet,
    /// The name of each input, in order.
    pub feature_names: Vec<String>,
    /// Per-feature mean subtracted before the weights.
    pub mean: Vec<f32>,
    /// Per-feature scale divided by (the standard deviation, 1 for a constant feature).
    pub scale: Vec<f32>,
    /// One weight per feature (on the standardised input).
    pub weights: Vec<f32>,
    /// The bias.
    pub bias: f32,
    /// The generator whose candidates it was fitted on (its features — agreement, confidence,
    /// length — are that model's): it applies to that model only. Absent in a file written
    /// before it was recorded, which is applied with a warning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generator: Option<FittedModel>,
    /// What it was fitted on.
    pub training: TrainingInfo,
    /// Its evaluation on held-out problems, when it was given some.
    pub heldout: Option<Evaluation>,
}

pub(super) fn sigmoid(z: f32) -> f32 {
    1.0 / (1.0 + (-z).exp())
}

impl OutcomeModel {
    /// The probability that a candidate with features `x` is right.
    pub fn probability(&self, x: &[f32]) -> f32 {
        let z: f32 = x
            .iter()
            .zip(&self.mean)
            .zip(&self.scale)
            .zip(&self.weights)
            .map(|(((x, m), s), w)| (x - m) / s * w)
            .sum();
        sigmoid(z + self.bias)
    }

    /// Checks the file's vectors line up (an error says which does not).
    pub fn validate(&self) -> std::result::Result<(), String> {
        let d = self.feature_names.len();
        if self.version != FORMAT_VERSION {
            return Err(format!(
                "version {} (this build reads {FORMAT_VERSION})",
                self.version
            ));
        }
        for (name, len) in [
            ("mean", self.mean.len()),
            ("scale", self.scale.len()),
            ("weights", self.weights.len()),
        ] {
            if len != d {
                return Err(format!("{name} has {len} entries for {d} features"));
            }
        }
        if self.scale.iter().any(|s| !s.is_finite() || *s <= 0.0) {
            return Err("scale must be positive and finite".into());
        }
        Ok(())
    }

    /// Reads and validates a model file.
    pub fn load(path: &Path) -> Result<Self> {
        let text =
            std::fs::read_to_string(path).map_err(|e| LearnedVerifierError::read(path, e))?;
        let corrupt = |reason: String| LearnedVerifierError::Corrupt {
            path: path.to_path_buf(),
            what: "learned verifier file",
            reason,
        };
        let model: Self = serde_json::from_str(&text).map_err(|e| corrupt(e.to_string()))?;
        model.validate().map_err(corrupt)?;
        Ok(model)
    }

    /// Writes the model file (pretty JSON).
    pub fn save(&self, path: &Path) -> Result<()> {
        super::write_json(path, self)
    }

    /// Fits a model on feature vectors `xs` labelled `ys` (right or wrong).
    pub fn fit(
        xs: &[Vec<f32>],
        ys: &[bool],
        feature_set: FeatureSet,
        feature_names: Vec<String>,
        options: FitOptions,
        data: &str,
        problems: usize,
    ) -> Result<Self> {
        let d = feature_names.len();
        let n = xs.len();
        let positives = ys.iter().filter(|y| **y).count();
        if n != ys.len() || xs.iter().any(|x| x.len() != d) {
            return Err(LearnedVerifierError::Training(format!(
                "{n} feature vectors of {d} features do not line up with {} labels",
                ys.len()
            )));
        }
        if positives == 0 || positives == n {
            return Err(LearnedVerifierError::Training(format!(
                "need both right and wrong candidates, got {positives} right of {n}"
            )));
        }
        let (mean, scale) = standardisation(xs, d);
        let flat: Vec<f32> = xs
            .iter()
            .flat_map(|x| {
                x.iter()
                    .zip(&mean)
                    .zip(&scale)
                    .map(|((x, m), s)| (x - m) / s)
            })
            .collect();
        let dev = Device::Cpu;
        let x = Tensor::from_vec(flat, (n, d), &dev)?;
        let y = Tensor::from_vec(
            ys.iter()
                .map(|&y| f32::from(u8::from(y)))
                .collect::<Vec<_>>(),
            (n, 1),
            &dev,
        )?;
        let w = Var::zeros((d, 1), DType::F32, &dev)?;
        let b = Var::zeros((1, 1), DType::F32, &dev)?;
        let mut opt = AdamW::new(
            vec![w.clone(), b.clone()],
            ParamsAdamW {
                lr: options.learning_rate,
                weight_decay: options.weight_decay,
                ..ParamsAdamW::default()
            },
        )?;
        let loss_of = |w: &Tensor, b: &Tensor| -> candle_core::Result<Tensor> {
            let z = x.matmul(w)?.broadcast_add(b)?;
            logistic_loss(&z, &y)
        };
        for _ in 0..options.epochs {
            let loss = loss_of(w.as_tensor(), b.as_tensor())?;
            opt.backward_step(&loss)?;
        }
        let final_loss = f64::from(loss_of(w.as_tensor(), b.as_tensor())?.to_scalar::<f32>()?);
        let weights = w.as_tensor().flatten_all()?.to_vec1::<f32>()?;
        let bias = b.as_tensor().flatten_all()?.to_vec1::<f32>()?;
        Ok(Self {
            version: FORMAT_VERSION,
            feature_set,
            feature_names,
            mean,
            scale,
            weights,
            bias: bias.first().copied().unwrap_or(0.0),
            training: TrainingInfo {
                data: data.to_string(),
                problems,
                candidates: n,
                positives,
                options,
                final_loss,
                problem_ids: Vec::new(),
            },
            generator: None,
            heldout: None,
        })
    }
}

/// The mean logistic loss of logits `z` against 0/1 targets `y`, in the stable form
/// `softplus(z) − y·z` with `softplus(z) = max(z, 0) + ln(1 + e^{−|z|})`.
fn logistic_loss(z: &Tensor, y: &Tensor) -> candle_core::Result<Tensor> {
    let softplus = (z.relu()? + ((z.abs()?.neg()?.exp()? + 1.0)?.log()?))?;
    (softplus - (y * z)?)?.mean_all()
}

/// Per-feature mean and standard deviation (1 where a feature is constant).
pub(super) fn standardisation(xs: &[Vec<f32>], d: usize) -> (Vec<f32>, Vec<f32>) {
    let n = xs.len().max(1) as f64;
    let mut mean = vec![0.0f64; d];
    for x in xs {
        for (m, v) in mean.iter_mut().zip(x) {
            *m += f64::from(*v) / n;
        }
    }
    let mut var = vec![0.0f64; d];
    for x in xs {
        for ((s, v), m) in var.iter_mut().zip(x).zip(&mean) {
            *s += (f64::from(*v) - m).powi(2) / n;
        }
    }
    let scale = var
        .iter()
        .map(|v| {
            let sd = v.sqrt();
            if sd > 1e-6 {
                sd as f32
            } else {
                1.0
            }
        })
        .collect();
    (mean.iter().map(|m| *m as f32).collect(), scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fit_separates_a_separable_feature_and_ignores_noise() {
        // Feature 0 decides the label; feature 1 is a constant; feature 2 is independent of
        // the label (half of each class has it).
        let xs: Vec<Vec<f32>> = (0..40)
            .map(|i| {
                vec![
                    if i % 4 == 0 { 2.0 } else { -1.0 },
                    3.0,
                    ((i / 4) % 2) as f32,
                ]
            })
            .collect();
        let ys: Vec<bool> = (0..40).map(|i| i % 4 == 0).collect();
        let names = vec!["signal".into(), "constant".into(), "noise".into()];
        let m = OutcomeModel::fit(
            &xs,
            &ys,
            FeatureSet::Scalar,
            names,
            FitOptions::default(),
            "t",
            40,
        )
        .expect("fit");
        assert!(m.validate().is_ok());
        assert!(m.probability(&[2.0, 3.0, 0.0]) > 0.9);
        assert!(m.probability(&[-1.0, 3.0, 0.0]) < 0.1);
        assert!(m.weights[0] > 1.0, "{:?}", m.weights);
        assert_eq!(m.weights[1], 0.0, "a constant feature carries no weight");
        assert!(m.weights[2].abs() < 0.2, "{:?}", m.weights);
        assert!(m.training.final_loss < 0.1);
        let again = OutcomeModel::fit(
            &xs,
            &ys,
            FeatureSet::Scalar,
            m.feature_names.clone(),
            FitOptions::default(),
            "t",
            40,
        )
        .expect("fit");
        assert_eq!(m, again, "a fit is deterministic");
    }

    #[test]
    fn labels_of_one_kind_cannot_train() {
        let e = OutcomeModel::fit(
            &[vec![1.0], vec![2.0]],
            &[true, true],
            FeatureSet::Scalar,
            vec!["a".into()],
            FitOptions::default(),
            "t",
            1,
        )
        .expect_err("one class");
        assert!(e.to_string().contains("both right and wrong"), "{e}");
    }

    #[test]
    fn a_file_round_trips_and_a_bad_one_names_what_is_wrong() {
        let xs = vec![vec![0.0], vec![1.0], vec![2.0], vec![3.0]];
        let m = OutcomeModel::fit(
            &xs,
            &[false, false, true, true],
            FeatureSet::Scalar,
            vec!["a".into()],
            FitOptions::default(),
            "t",
            2,
        )
        .expect("fit");
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("m.json");
        m.save(&path).expect("save");
        assert_eq!(OutcomeModel::load(&path).expect("load"), m);
        let mut bad = m.clone();
        bad.weights.push(1.0);
        bad.save(&path).expect("save");
        let e = OutcomeModel::load(&path).expect_err("bad");
        assert!(
            e.to_string()
                .contains("weights has 2 entries for 1 features"),
            "{e}"
        );
        assert!(e.to_string().contains("m.json"), "{e}");
    }
}
