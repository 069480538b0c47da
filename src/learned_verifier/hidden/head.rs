//! The hidden-state outcome head: from the generator's final-normed hidden state at the end of
//! a candidate to the probability that the candidate's answer is right — Cobbe et al. (2021)'s
//! outcome verifier on a frozen generator, a logistic regression (or a one-hidden-layer MLP)
//! fitted with candle — and the file it lives in.
//!
//! The fit standardises each dimension (mean and standard deviation of the fit readings, kept
//! in the file), weighs the classes equally (a right candidate counts `wrong / right` times),
//! and penalises the squared weights by `l2`, chosen by K-fold cross-validation over the fit
//! problems only (folds by problem, so a problem's candidates never sit on both sides; the
//! pooled out-of-fold AUROC picks). Full-batch AdamW for a fixed number of steps, weights
//! starting at zero (logistic) or from a seeded ChaCha draw (MLP): a fit is deterministic.
//!
//! The file records the generator it was fitted with ([`FittedModel`]) and is refused for any
//! other (style rule 21): another model's hidden states are another space.

use std::path::Path;

use candle_core::{DType, Device, Tensor, Var};
use candle_nn::{AdamW, Optimizer, ParamsAdamW};
use ponder_verifiers::metrics::auroc;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::learned_verifier::error::{LearnedVerifierError, Result};
use crate::learned_verifier::evaluate::Evaluation;
use crate::learned_verifier::model::{sigmoid, standardisation};
use crate::models::FittedModel;

/// The head file's format version.
pub const HEAD_FORMAT_VERSION: u32 = 1;

/// What the head reads, as recorded in its file.
pub const READING: &str = "final-normed hidden state at the last token of the solution; \
     user = question, assistant = solution, the model's chat template, no worked examples";

/// How to fit a head.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeadOptions {
    /// Hidden units of the MLP; 0 fits a logistic regression.
    pub hidden_units: usize,
    /// Candidate L2 penalties (on the mean loss); cross-validation picks one.
    pub l2_grid: Vec<f64>,
    /// Cross-validation folds over the fit problems.
    pub folds: usize,
    /// Full-batch AdamW steps.
    pub epochs: usize,
    /// Step size.
    pub learning_rate: f64,
    /// Seed of the MLP's initial weights.
    pub seed: u64,
}

impl Default for HeadOptions {
    fn default() -> Self {
        Self {
            hidden_units: 0,
            l2_grid: vec![1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0],
            folds: 5,
            epochs: 300,
            learning_rate: 0.01,
            seed: 17,
        }
    }
}

/// The head's layers on the standardised reading.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum HeadLayers {
    /// `σ(w·x + b)`.
    Logistic {
        /// One weight per dimension.
        weights: Vec<f32>,
        /// The bias.
        bias: f32,
    },
    /// `σ(w2·relu(W1 x + b1) + b2)`.
    Mlp {
        /// Hidden units.
        units: usize,
        /// `W1`, row-major `[units, hidden_size]`.
        w1: Vec<f32>,
        /// `b1` (`units`).
        b1: Vec<f32>,
        /// `w2` (`units`).
        w2: Vec<f32>,
        /// `b2`.
        b2: f32,
    },
}

/// One penalty's cross-validated result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CvPoint {
    /// The L2 penalty.
    pub l2: f64,
    /// Pooled out-of-fold AUROC over the fit candidates.
    pub auroc: f64,
}

/// What a head was fitted on, and how.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeadTraining {
    /// The candidate set (path as given).
    pub data: String,
    /// Problems.
    pub problems: usize,
    /// Candidates.
    pub candidates: usize,
    /// Candidates whose answer was right.
    pub positives: usize,
    /// The fit's settings.
    pub options: HeadOptions,
    /// Cross-validation over the fit problems, one point per penalty tried.
    pub cross_validation: Vec<CvPoint>,
    /// The penalty chosen (the best out-of-fold AUROC; the larger penalty on a tie).
    pub l2: f64,
    /// Class-weighted mean logistic loss on the fit candidates after the final fit.
    pub final_loss: f64,
}

/// A fitted hidden-state head.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HiddenHead {
    /// [`HEAD_FORMAT_VERSION`].
    pub version: u32,
    /// The generator whose hidden states it reads.
    pub generator: FittedModel,
    /// Where in the text the state is read ([`READING`]).
    pub reading: String,
    /// Floats per reading.
    pub hidden_size: usize,
    /// Per-dimension mean subtracted first.
    pub mean: Vec<f32>,
    /// Per-dimension scale divided by (the standard deviation, 1 for a constant dimension).
    pub scale: Vec<f32>,
    /// The layers.
    pub layers: HeadLayers,
    /// What it was fitted on.
    pub training: HeadTraining,
    /// Its evaluation on held-out problems, when it was given some.
    pub heldout: Option<Evaluation>,
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

impl HiddenHead {
    /// The probability that the candidate read as `hidden` is right.
    pub fn probability(&self, hidden: &[f32]) -> f32 {
        let x: Vec<f32> = hidden
            .iter()
            .zip(&self.mean)
            .zip(&self.scale)
            .map(|((h, m), s)| (h - m) / s)
            .collect();
        self.layers.probability(&x)
    }

    /// Checks the file's vectors line up (an error says which does not).
    pub fn validate(&self) -> std::result::Result<(), String> {
        if self.version != HEAD_FORMAT_VERSION {
            return Err(format!(
                "version {} (this build reads {HEAD_FORMAT_VERSION})",
                self.version
            ));
        }
        let d = self.hidden_size;
        let mut lengths = vec![("mean", self.mean.len(), d), ("scale", self.scale.len(), d)];
        match &self.layers {
            HeadLayers::Logistic { weights, .. } => lengths.push(("weights", weights.len(), d)),
            HeadLayers::Mlp {
                units, w1, b1, w2, ..
            } => lengths.extend([
                ("w1", w1.len(), units * d),
                ("b1", b1.len(), *units),
                ("w2", w2.len(), *units),
            ]),
        }
        if let Some((name, len, want)) = lengths.into_iter().find(|(_, len, want)| len != want) {
            return Err(format!("{name} has {len} entries, expected {want}"));
        }
        if self.scale.iter().any(|s| !s.is_finite() || *s <= 0.0) {
            return Err("scale must be positive and finite".into());
        }
        Ok(())
    }

    /// Reads and validates a head file, refusing one fitted with another generator than
    /// `served`.
    pub fn load(path: &Path, served: &FittedModel) -> Result<Self> {
        let text =
            std::fs::read_to_string(path).map_err(|e| LearnedVerifierError::read(path, e))?;
        let corrupt = |reason: String| LearnedVerifierError::Corrupt {
            path: path.to_path_buf(),
            what: "hidden-state verifier head",
            reason,
        };
        let head: Self = serde_json::from_str(&text).map_err(|e| corrupt(e.to_string()))?;
        head.validate().map_err(corrupt)?;
        if !head.generator.applies_to(served) {
            return Err(LearnedVerifierError::ForeignModel {
                path: path.to_path_buf(),
                fitted: head.generator.to_string(),
                served: served.to_string(),
            });
        }
        Ok(head)
    }

    /// Writes the head file (JSON).
    pub fn save(&self, path: &Path) -> Result<()> {
        crate::learned_verifier::write_json(path, self)
    }

    /// Fits a head on readings `xs` of `generator` labelled `ys`, candidates grouped by
    /// problem as `problem_of` says (for the cross-validation folds).
    pub fn fit(
        xs: &[Vec<f32>],
        ys: &[bool],
        problem_of: &[usize],
        generator: FittedModel,
        options: HeadOptions,
        data: &str,
    ) -> Result<Self> {
        let n = xs.len();
        let d = xs.first().map_or(0, Vec::len);
        let positives = ys.iter().filter(|y| **y).count();
        if d == 0 || n != ys.len() || n != problem_of.len() || xs.iter().any(|x| x.len() != d) {
            return Err(LearnedVerifierError::Training(format!(
                "{n} readings of {d} floats do not line up with {} labels and {} problem ids",
                ys.len(),
                problem_of.len()
            )));
        }
        if positives == 0 || positives == n {
            return Err(LearnedVerifierError::Training(format!(
                "need both right and wrong candidates, got {positives} right of {n}"
            )));
        }
        if options.l2_grid.is_empty() || options.folds < 2 {
            return Err(LearnedVerifierError::Training(
                "need at least one L2 penalty and two folds".into(),
            ));
        }
        // Out-of-fold scores for every penalty, folds by problem.
        let fold_of: Vec<usize> = problem_of.iter().map(|p| p % options.folds).collect();
        let mut cross_validation = Vec::new();
        for &l2 in &options.l2_grid {
            let mut scored = vec![(0.0f64, false); n];
            for fold in 0..options.folds {
                let (train, test): (Vec<usize>, Vec<usize>) =
                    (0..n).partition(|&i| fold_of[i] != fold);
                let train_pos = train.iter().filter(|&&i| ys[i]).count();
                if test.is_empty() || train_pos == 0 || train_pos == train.len() {
                    continue;
                }
                let pick = |idx: &[usize]| -> Vec<Vec<f32>> {
                    idx.iter().map(|&i| xs[i].clone()).collect()
                };
                let train_y: Vec<bool> = train.iter().map(|&i| ys[i]).collect();
                let (mean, scale) = standardisation(&pick(&train), d);
                let (layers, _) = fit_layers(
                    &standardise(&pick(&train), &mean, &scale),
                    &train_y,
                    l2,
                    &options,
                )?;
                for (&i, x) in test.iter().zip(standardise(&pick(&test), &mean, &scale)) {
                    scored[i] = (f64::from(layers.probability(&x)), ys[i]);
                }
            }
            cross_validation.push(CvPoint {
                l2,
                auroc: auroc(&scored).unwrap_or(0.5),
            });
        }
        // The best pooled AUROC; ties go to the stronger penalty.
        let l2 = cross_validation
            .iter()
            .fold(None::<&CvPoint>, |best, p| match best {
                Some(b) if b.auroc > p.auroc || (b.auroc == p.auroc && b.l2 >= p.l2) => Some(b),
                _ => Some(p),
            })
            .map_or(options.l2_grid[0], |p| p.l2);
        let (mean, scale) = standardisation(xs, d);
        let (layers, final_loss) = fit_layers(&standardise(xs, &mean, &scale), ys, l2, &options)?;
        Ok(Self {
            version: HEAD_FORMAT_VERSION,
            generator,
            reading: READING.into(),
            hidden_size: d,
            mean,
            scale,
            layers,
            training: HeadTraining {
                data: data.to_string(),
                problems: problem_of.iter().max().map_or(0, |m| m + 1),
                candidates: n,
                positives,
                options,
                cross_validation,
                l2,
                final_loss,
            },
            heldout: None,
        })
    }
}

impl HeadLayers {
    /// The probability for a standardised reading.
    fn probability(&self, x: &[f32]) -> f32 {
        match self {
            Self::Logistic { weights, bias } => sigmoid(dot(weights, x) + bias),
            Self::Mlp {
                units,
                w1,
                b1,
                w2,
                b2,
            } => {
                let d = x.len();
                let z: f32 = (0..*units)
                    .map(|u| {
                        let row = w1.get(u * d..(u + 1) * d).unwrap_or_default();
                        let h = (dot(row, x) + b1.get(u).copied().unwrap_or(0.0)).max(0.0);
                        h * w2.get(u).copied().unwrap_or(0.0)
                    })
                    .sum();
                sigmoid(z + b2)
            }
        }
    }
}

/// Fits the layers on standardised `xs`; returns them and the final class-weighted loss.
fn fit_layers(
    xs: &[Vec<f32>],
    ys: &[bool],
    l2: f64,
    options: &HeadOptions,
) -> Result<(HeadLayers, f64)> {
    let n = xs.len();
    let d = xs.first().map_or(0, Vec::len);
    let dev = Device::Cpu;
    let x = Tensor::from_vec(xs.concat(), (n, d), &dev)?;
    let label: Vec<f32> = ys.iter().map(|&y| f32::from(u8::from(y))).collect();
    let y = Tensor::from_vec(label, (n, 1), &dev)?;
    // Balanced classes: each class carries half the loss.
    let positives = ys.iter().filter(|y| **y).count().max(1) as f32;
    let negatives = (n - ys.iter().filter(|y| **y).count()).max(1) as f32;
    let weight: Vec<f32> = ys
        .iter()
        .map(|&y| if y { 0.5 / positives } else { 0.5 / negatives })
        .collect();
    let a = Tensor::from_vec(weight, (n, 1), &dev)?;
    let weighted = |z: &Tensor| -> candle_core::Result<Tensor> {
        let softplus = (z.relu()? + ((z.abs()?.neg()?.exp()? + 1.0)?.log()?))?;
        ((softplus - (&y * z)?)? * &a)?.sum_all()
    };
    let adam = |vars: Vec<Var>| {
        AdamW::new(
            vars,
            ParamsAdamW {
                lr: options.learning_rate,
                weight_decay: 0.0,
                ..ParamsAdamW::default()
            },
        )
    };
    if options.hidden_units == 0 {
        let w = Var::zeros((d, 1), DType::F32, &dev)?;
        let b = Var::zeros((1, 1), DType::F32, &dev)?;
        let mut opt = adam(vec![w.clone(), b.clone()])?;
        let data_loss = || weighted(&x.matmul(w.as_tensor())?.broadcast_add(b.as_tensor())?);
        for _ in 0..options.epochs {
            let loss = (data_loss()? + (w.as_tensor().sqr()?.sum_all()? * l2)?)?;
            opt.backward_step(&loss)?;
        }
        let final_loss = f64::from(data_loss()?.to_scalar::<f32>()?);
        let weights = w.as_tensor().flatten_all()?.to_vec1::<f32>()?;
        let bias = b.as_tensor().flatten_all()?.to_vec1::<f32>()?;
        return Ok((
            HeadLayers::Logistic {
                weights,
                bias: bias.first().copied().unwrap_or(0.0),
            },
            final_loss,
        ));
    }
    let h = options.hidden_units;
    let mut rng = ChaCha8Rng::seed_from_u64(options.seed);
    let mut uniform = |count: usize, fan_in: usize| -> Vec<f32> {
        let k = 1.0 / (fan_in as f32).sqrt();
        (0..count).map(|_| rng.random_range(-k..k)).collect()
    };
    let w1 = Var::from_tensor(&Tensor::from_vec(uniform(d * h, d), (d, h), &dev)?)?;
    let b1 = Var::zeros((1, h), DType::F32, &dev)?;
    let w2 = Var::from_tensor(&Tensor::from_vec(uniform(h, h), (h, 1), &dev)?)?;
    let b2 = Var::zeros((1, 1), DType::F32, &dev)?;
    let mut opt = adam(vec![w1.clone(), b1.clone(), w2.clone(), b2.clone()])?;
    let data_loss = || {
        let hidden = x
            .matmul(w1.as_tensor())?
            .broadcast_add(b1.as_tensor())?
            .relu()?;
        weighted(
            &hidden
                .matmul(w2.as_tensor())?
                .broadcast_add(b2.as_tensor())?,
        )
    };
    for _ in 0..options.epochs {
        let penalty = (w1.as_tensor().sqr()?.sum_all()? + w2.as_tensor().sqr()?.sum_all()?)?;
        let loss = (data_loss()? + (penalty * l2)?)?;
        opt.backward_step(&loss)?;
    }
    let final_loss = f64::from(data_loss()?.to_scalar::<f32>()?);
    // Stored row-major per unit: `W1` transposed.
    let w1 = w1
        .as_tensor()
        .t()?
        .contiguous()?
        .flatten_all()?
        .to_vec1::<f32>()?;
    let b1 = b1.as_tensor().flatten_all()?.to_vec1::<f32>()?;
    let w2 = w2.as_tensor().flatten_all()?.to_vec1::<f32>()?;
    let b2 = b2.as_tensor().flatten_all()?.to_vec1::<f32>()?;
    Ok((
        HeadLayers::Mlp {
            units: h,
            w1,
            b1,
            w2,
            b2: b2.first().copied().unwrap_or(0.0),
        },
        final_loss,
    ))
}

/// `(x − mean) / scale` for every row.
fn standardise(xs: &[Vec<f32>], mean: &[f32], scale: &[f32]) -> Vec<Vec<f32>> {
    xs.iter()
        .map(|x| {
            x.iter()
                .zip(mean)
                .zip(scale)
                .map(|((x, m), s)| (x - m) / s)
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn generator(sha: &str) -> FittedModel {
        FittedModel {
            name: "gen.gguf".into(),
            sha256: Some(sha.into()),
        }
    }

    /// 40 problems of 4 candidates in 16 dimensions: one right candidate in four, told apart by
    /// dimension 3 (+2 vs −1) under seeded noise everywhere.
    fn separable() -> (Vec<Vec<f32>>, Vec<bool>, Vec<usize>) {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let (mut xs, mut ys, mut problem_of) = (Vec::new(), Vec::new(), Vec::new());
        for p in 0..40 {
            for c in 0..4 {
                let right = c == p % 4;
                let mut x: Vec<f32> = (0..16).map(|_| rng.random_range(-1.0..1.0)).collect();
                x[3] += if right { 2.0 } else { -1.0 };
                xs.push(x);
                ys.push(right);
                problem_of.push(p);
            }
        }
        (xs, ys, problem_of)
    }

    fn fit(options: HeadOptions) -> HiddenHead {
        let (xs, ys, problem_of) = separable();
        HiddenHead::fit(&xs, &ys, &problem_of, generator("aa"), options, "t").expect("fit")
    }

    fn separates(head: &HiddenHead) {
        let (xs, ys, _) = separable();
        let scored: Vec<(f64, bool)> = xs
            .iter()
            .zip(&ys)
            .map(|(x, y)| (f64::from(head.probability(x)), *y))
            .collect();
        assert_eq!(auroc(&scored), Some(1.0), "{:?}", head.training);
        let mut right = vec![0.0; 16];
        right[3] = 2.0;
        let mut wrong = vec![0.0; 16];
        wrong[3] = -1.0;
        // The chosen penalty shrinks the weights, so the probabilities are not extreme.
        let (p_right, p_wrong) = (head.probability(&right), head.probability(&wrong));
        assert!(p_right > 0.65 && p_wrong < 0.35, "{p_right} {p_wrong}");
    }

    #[test]
    fn a_logistic_head_learns_separable_readings_deterministically() {
        let head = fit(HeadOptions::default());
        assert!(head.validate().is_ok());
        separates(&head);
        let HeadLayers::Logistic { weights, .. } = &head.layers else {
            panic!("a logistic head: {:?}", head.layers);
        };
        let strongest = weights
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.abs().total_cmp(&b.1.abs()))
            .map(|(i, _)| i);
        assert_eq!(strongest, Some(3), "{weights:?}");
        assert_eq!(head.training.cross_validation.len(), 6);
        assert!(head
            .training
            .cross_validation
            .iter()
            .all(|p| p.auroc > 0.95));
        let cv = &head.training.cross_validation;
        let best = cv.iter().map(|p| p.auroc).fold(0.0, f64::max);
        let tied = cv
            .iter()
            .filter(|p| p.auroc == best)
            .map(|p| p.l2)
            .next_back();
        assert_eq!(
            Some(head.training.l2),
            tied,
            "ties go to the larger penalty"
        );
        assert_eq!((head.training.problems, head.training.positives), (40, 40));
        assert_eq!(head, fit(HeadOptions::default()), "a fit is deterministic");
    }

    #[test]
    fn an_mlp_head_learns_them_too_and_is_seeded() {
        let options = HeadOptions {
            hidden_units: 8,
            l2_grid: vec![1e-3, 1e-2],
            folds: 2,
            ..HeadOptions::default()
        };
        let head = fit(options.clone());
        assert!(head.validate().is_ok());
        separates(&head);
        assert_eq!(head, fit(options), "a fit is deterministic");
    }

    #[test]
    fn a_file_round_trips_and_another_generators_file_is_refused() {
        let head = fit(HeadOptions {
            l2_grid: vec![1e-2],
            ..HeadOptions::default()
        });
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("hidden.json");
        head.save(&path).expect("save");
        assert_eq!(
            HiddenHead::load(&path, &generator("aa")).expect("load"),
            head
        );
        let e = HiddenHead::load(&path, &generator("bb")).expect_err("another model");
        assert!(
            matches!(e, LearnedVerifierError::ForeignModel { .. }),
            "{e:?}"
        );
        assert!(e.to_string().contains("hidden.json"), "{e}");
        let mut bad = head.clone();
        bad.mean.pop();
        bad.save(&path).expect("save");
        let e = HiddenHead::load(&path, &generator("aa")).expect_err("bad");
        assert!(
            e.to_string().contains("mean has 15 entries, expected 16"),
            "{e}"
        );
    }

    #[test]
    fn labels_of_one_kind_cannot_train() {
        let e = HiddenHead::fit(
            &[vec![1.0], vec![2.0]],
            &[true, true],
            &[0, 1],
            generator("aa"),
            HeadOptions::default(),
            "t",
        )
        .expect_err("one class");
        assert!(e.to_string().contains("both right and wrong"), "{e}");
    }
}
