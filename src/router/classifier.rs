//! The query classifier: two softmax-regression heads over the sentence embedding, one for the
//! category (math, code, knowledge, …) and one for the difficulty (easy, medium, hard).
//!
//! Multinomial logistic regression, trained by full-batch gradient descent on the
//! cross-entropy with L2 weight decay and class-balanced weights. It is deterministic (no random
//! initialisation: the weights start at zero), small (labels × 384 floats per head) and fast to
//! apply (one matrix-vector product per head), which is what a per-request router needs.

use serde::{Deserialize, Serialize};

use super::error::{Result, RouterError};

/// Training settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrainOptions {
    /// Gradient-descent epochs (full batch).
    pub epochs: usize,
    /// Step size.
    pub learning_rate: f32,
    /// L2 weight decay.
    pub weight_decay: f32,
    /// Input scale (embeddings are unit vectors; scaling them sharpens the logits sooner).
    pub input_scale: f32,
}

impl Default for TrainOptions {
    fn default() -> Self {
        Self {
            epochs: 600,
            learning_rate: 1.0,
            weight_decay: 1e-4,
            input_scale: 4.0,
        }
    }
}

/// One softmax-regression head: `softmax(W · scale·x + b)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Head {
    /// Label of each row of `weights`.
    pub labels: Vec<String>,
    /// `labels.len()` rows of `dim` weights.
    pub weights: Vec<Vec<f32>>,
    /// One bias per label.
    pub bias: Vec<f32>,
    /// Input scale applied before the weights.
    pub input_scale: f32,
}

/// A head's prediction.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Prediction {
    /// The most probable label.
    pub label: String,
    /// Its probability.
    pub probability: f32,
    /// Every label's probability, in the head's label order.
    pub probabilities: Vec<f32>,
}

fn softmax(logits: &mut [f32]) {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0;
    for l in logits.iter_mut() {
        *l = (*l - max).exp();
        sum += *l;
    }
    for l in logits.iter_mut() {
        *l /= sum;
    }
}

impl Head {
    /// Checks that the shapes agree with `dim`.
    pub fn validate(&self, dim: usize) -> std::result::Result<(), String> {
        if self.labels.is_empty() {
            return Err("a head has no labels".into());
        }
        if self.weights.len() != self.labels.len() || self.bias.len() != self.labels.len() {
            return Err(format!(
                "{} labels but {} weight rows and {} biases",
                self.labels.len(),
                self.weights.len(),
                self.bias.len()
            ));
        }
        if let Some(row) = self.weights.iter().find(|r| r.len() != dim) {
            return Err(format!(
                "a weight row has {} entries, the embedding has {dim}",
                row.len()
            ));
        }
        if self
            .weights
            .iter()
            .flatten()
            .chain(&self.bias)
            .any(|w| !w.is_finite())
            || !self.input_scale.is_finite()
        {
            return Err("weights are not finite".into());
        }
        Ok(())
    }

    /// Class probabilities for embedding `x`.
    pub fn probabilities(&self, x: &[f32]) -> Vec<f32> {
        let mut logits: Vec<f32> = self
            .weights
            .iter()
            .zip(&self.bias)
            .map(|(w, b)| b + self.input_scale * w.iter().zip(x).map(|(w, x)| w * x).sum::<f32>())
            .collect();
        softmax(&mut logits);
        logits
    }

    /// The most probable label for `x`.
    pub fn predict(&self, x: &[f32]) -> Prediction {
        let probabilities = self.probabilities(x);
        let (best, p) =
            probabilities
                .iter()
                .enumerate()
                .fold((0, f32::NEG_INFINITY), |acc, (i, p)| {
                    if *p > acc.1 {
                        (i, *p)
                    } else {
                        acc
                    }
                });
        Prediction {
            label: self.labels.get(best).cloned().unwrap_or_default(),
            probability: p,
            probabilities,
        }
    }

    /// Trains a head on embeddings `xs` with label indices `ys` into `labels`.
    pub fn train(
        xs: &[Vec<f32>],
        ys: &[usize],
        labels: Vec<String>,
        opts: &TrainOptions,
    ) -> Result<Self> {
        let k = labels.len();
        let dim = xs.first().map_or(0, Vec::len);
        if xs.is_empty() || k < 2 {
            return Err(RouterError::Training(format!(
                "need examples of at least two labels, got {} examples of {k}",
                xs.len()
            )));
        }
        if xs.len() != ys.len() || xs.iter().any(|x| x.len() != dim) || ys.iter().any(|y| *y >= k) {
            return Err(RouterError::Training(
                "examples and labels do not line up".into(),
            ));
        }
        // Class-balanced example weights: each label carries the same total weight.
        let mut counts = vec![0usize; k];
        for y in ys {
            counts[*y] += 1;
        }
        let example_weight: Vec<f32> = ys
            .iter()
            .map(|y| xs.len() as f32 / (k as f32 * counts[*y] as f32))
            .collect();
        let mut head = Head {
            labels,
            weights: vec![vec![0.0; dim]; k],
            bias: vec![0.0; k],
            input_scale: opts.input_scale,
        };
        let n = xs.len() as f32;
        for _ in 0..opts.epochs {
            let mut grad_w = vec![vec![0.0f32; dim]; k];
            let mut grad_b = vec![0.0f32; k];
            for ((x, y), ew) in xs.iter().zip(ys).zip(&example_weight) {
                let p = head.probabilities(x);
                for c in 0..k {
                    let g = ew * (p[c] - if c == *y { 1.0 } else { 0.0 });
                    grad_b[c] += g;
                    for (gw, xi) in grad_w[c].iter_mut().zip(x) {
                        *gw += g * xi * opts.input_scale;
                    }
                }
            }
            for c in 0..k {
                head.bias[c] -= opts.learning_rate * grad_b[c] / n;
                for (w, g) in head.weights[c].iter_mut().zip(&grad_w[c]) {
                    *w -= opts.learning_rate * (g / n + opts.weight_decay * *w);
                }
            }
        }
        Ok(head)
    }
}

/// Category and difficulty heads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Classifier {
    /// Predicts the category.
    pub category: Head,
    /// Predicts the difficulty.
    pub difficulty: Head,
}

/// A labelled confusion matrix: `counts[true][predicted]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Confusion {
    /// Labels, in row/column order.
    pub labels: Vec<String>,
    /// `counts[i][j]`: examples of label `i` predicted as label `j`.
    pub counts: Vec<Vec<usize>>,
}

impl Confusion {
    /// An empty matrix over `labels`.
    pub fn new(labels: Vec<String>) -> Self {
        let k = labels.len();
        Self {
            labels,
            counts: vec![vec![0; k]; k],
        }
    }

    /// Counts one example (labels not in the matrix are ignored).
    pub fn add(&mut self, truth: &str, predicted: &str) {
        let find = |l: &str| self.labels.iter().position(|x| x == l);
        if let (Some(i), Some(j)) = (find(truth), find(predicted)) {
            self.counts[i][j] += 1;
        }
    }

    /// Examples counted.
    pub fn total(&self) -> usize {
        self.counts.iter().flatten().sum()
    }

    /// Share of examples on the diagonal.
    pub fn accuracy(&self) -> f64 {
        let right: usize = (0..self.labels.len()).map(|i| self.counts[i][i]).sum();
        right as f64 / self.total().max(1) as f64
    }

    /// A Markdown table: rows are true labels, columns predictions.
    pub fn markdown(&self) -> String {
        let mut out = String::from("| true \\ predicted |");
        for l in &self.labels {
            out.push_str(&format!(" {l} |"));
        }
        out.push_str("\n|---|");
        out.push_str(&"---:|".repeat(self.labels.len()));
        out.push('\n');
        for (l, row) in self.labels.iter().zip(&self.counts) {
            out.push_str(&format!("| {l} |"));
            for c in row {
                out.push_str(&format!(" {c} |"));
            }
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn learns_separable_classes_and_counts_confusion() {
        // Three clusters around three axes of a 4-d space.
        let mut xs = Vec::new();
        let mut ys = Vec::new();
        for i in 0..30 {
            let c = i % 3;
            let mut x = vec![0.1 * ((i * 7 % 5) as f32 - 2.0) / 2.0; 4];
            x[c] += 1.0;
            xs.push(x);
            ys.push(c);
        }
        let labels: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        let head = Head::train(&xs, &ys, labels.clone(), &TrainOptions::default()).expect("train");
        head.validate(4).expect("valid");
        let mut confusion = Confusion::new(labels.clone());
        for (x, y) in xs.iter().zip(&ys) {
            let p = head.predict(x);
            assert!((p.probabilities.iter().sum::<f32>() - 1.0).abs() < 1e-5);
            confusion.add(&labels[*y], &p.label);
        }
        assert_eq!(confusion.total(), 30);
        assert_eq!(confusion.accuracy(), 1.0);
        assert!(
            confusion.markdown().contains("| a | 10 | 0 | 0 |"),
            "{}",
            confusion.markdown()
        );
    }

    #[test]
    fn refuses_what_cannot_train() {
        let one = vec!["only".to_string()];
        assert!(Head::train(&[vec![1.0]], &[0], one, &TrainOptions::default()).is_err());
        let two = vec!["a".to_string(), "b".to_string()];
        assert!(Head::train(&[vec![1.0]], &[5], two, &TrainOptions::default()).is_err());
    }
}
