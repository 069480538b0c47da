//! Training and evaluating the classifier on a labelled query set: embed every query (in
//! batches), split deterministically into train and held-out, fit both heads on the train
//! part, and report accuracy with confusion matrices on the held-out part.

use serde::{Deserialize, Serialize};

use super::classifier::{Classifier, Confusion, Head, TrainOptions};
use super::data::{split, LabelledQuery};
use super::embed::Embedder;
use super::error::Result;

/// Category labels in report order (others follow in order of appearance).
pub const CATEGORIES: [&str; 6] = ["math", "code", "reasoning", "knowledge", "writing", "chat"];

/// Queries per embedding batch.
const BATCH: usize = 32;

/// Held-out results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    /// Examples trained on.
    pub train_examples: usize,
    /// Examples held out.
    pub heldout_examples: usize,
    /// Category accuracy on the held-out part.
    pub category_accuracy: f64,
    /// Difficulty accuracy on the held-out part.
    pub difficulty_accuracy: f64,
    /// Category confusion on the held-out part.
    pub category: Confusion,
    /// Difficulty confusion on the held-out part.
    pub difficulty: Confusion,
}

fn labels(preferred: &[&str], seen: impl Iterator<Item = String>) -> Vec<String> {
    let seen: Vec<String> = seen.collect();
    let mut out: Vec<String> = preferred
        .iter()
        .filter(|p| seen.iter().any(|s| s == *p))
        .map(|p| p.to_string())
        .collect();
    for s in seen {
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

/// Embeds every query, [`BATCH`] at a time.
pub fn embed_all(embedder: &Embedder, queries: &[&str]) -> Result<Vec<Vec<f32>>> {
    let mut out = Vec::with_capacity(queries.len());
    for chunk in queries.chunks(BATCH) {
        out.extend(embedder.embed(chunk)?.into_iter().map(|e| e.vector));
    }
    Ok(out)
}

/// Fits both heads on `examples`.
pub fn fit(
    embedder: &Embedder,
    examples: &[LabelledQuery],
    opts: &TrainOptions,
) -> Result<Classifier> {
    let queries: Vec<&str> = examples.iter().map(|e| e.query.as_str()).collect();
    let xs = embed_all(embedder, &queries)?;
    let cats = labels(&CATEGORIES, examples.iter().map(|e| e.category.clone()));
    let diffs = labels(
        &super::allocator::DIFFICULTIES,
        examples.iter().map(|e| e.difficulty.clone()),
    );
    let index = |ls: &[String], l: &str| ls.iter().position(|x| x == l).unwrap_or(0);
    let yc: Vec<usize> = examples.iter().map(|e| index(&cats, &e.category)).collect();
    let yd: Vec<usize> = examples
        .iter()
        .map(|e| index(&diffs, &e.difficulty))
        .collect();
    Ok(Classifier {
        category: Head::train(&xs, &yc, cats, opts)?,
        difficulty: Head::train(&xs, &yd, diffs, opts)?,
    })
}

/// Confusion matrices of `classifier` on `examples`.
pub fn evaluate(
    embedder: &Embedder,
    classifier: &Classifier,
    examples: &[LabelledQuery],
) -> Result<(Confusion, Confusion)> {
    let queries: Vec<&str> = examples.iter().map(|e| e.query.as_str()).collect();
    let xs = embed_all(embedder, &queries)?;
    let mut cat = Confusion::new(classifier.category.labels.clone());
    let mut diff = Confusion::new(classifier.difficulty.labels.clone());
    for (x, e) in xs.iter().zip(examples) {
        cat.add(&e.category, &classifier.category.predict(x).label);
        diff.add(&e.difficulty, &classifier.difficulty.predict(x).label);
    }
    Ok((cat, diff))
}

/// Splits, fits on the train part, evaluates on the held-out part.
pub fn train_and_evaluate(
    embedder: &Embedder,
    examples: &[LabelledQuery],
    holdout: f64,
    seed: u64,
    opts: &TrainOptions,
) -> Result<(Classifier, Evaluation)> {
    let (train, test) = split(examples, holdout, seed);
    let classifier = fit(embedder, &train, opts)?;
    let (category, difficulty) = evaluate(embedder, &classifier, &test)?;
    let evaluation = Evaluation {
        train_examples: train.len(),
        heldout_examples: test.len(),
        category_accuracy: category.accuracy(),
        difficulty_accuracy: difficulty.accuracy(),
        category,
        difficulty,
    };
    Ok((classifier, evaluation))
}
