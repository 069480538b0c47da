//! Training and evaluating the classifier on a labelled query set: embed every query
//! ([`Embedder::embed_many`]), split deterministically into train and held-out, fit both heads
//! on the train part, and report accuracy with confusion matrices on the held-out part.
//! Difficulty-only examples from a levelled dataset ([`super::data::Levelled`]) join the
//! difficulty head's training (train split only) and get their own held-out confusion.

use serde::{Deserialize, Serialize};

use super::classifier::{Classifier, Confusion, Head, TrainOptions};
use super::data::{split, LabelledQuery, Levelled};
use super::embed::Embedder;
use super::error::Result;

/// Category labels in report order (others follow in order of appearance).
pub const CATEGORIES: [&str; 6] = ["math", "code", "reasoning", "knowledge", "writing", "chat"];

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
    /// The difficulty head on a levelled dataset's held-out problems (none when trained
    /// without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub levelled: Option<LevelledEvaluation>,
}

/// The difficulty head on the held-out problems of a levelled dataset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LevelledEvaluation {
    /// The dataset (as given on the command line).
    pub data: String,
    /// Its train-split problems the difficulty head was fitted on.
    pub train_examples: usize,
    /// Its held-out problems evaluated.
    pub heldout_examples: usize,
    /// Difficulty accuracy on them.
    pub difficulty_accuracy: f64,
    /// Difficulty confusion on them.
    pub difficulty: Confusion,
    /// Share routed as `math` (their category; the category head never sees them).
    #[serde(default)]
    pub math_share: f64,
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

/// Fits the category head on `examples` and the difficulty head on `examples` followed by
/// `difficulty_only` (queries whose category label is not evidence: a levelled dataset's
/// problems are all `math`, and would only tilt the category head towards it).
pub fn fit(
    embedder: &Embedder,
    examples: &[LabelledQuery],
    difficulty_only: &[LabelledQuery],
    opts: &TrainOptions,
) -> Result<Classifier> {
    let both: Vec<&LabelledQuery> = examples.iter().chain(difficulty_only).collect();
    let queries: Vec<&str> = both.iter().map(|e| e.query.as_str()).collect();
    let xs = embedder.embed_many(&queries)?;
    let cats = labels(&CATEGORIES, examples.iter().map(|e| e.category.clone()));
    let diffs = labels(
        &super::allocator::DIFFICULTIES,
        both.iter().map(|e| e.difficulty.clone()),
    );
    let index = |ls: &[String], l: &str| ls.iter().position(|x| x == l).unwrap_or(0);
    let yc: Vec<usize> = examples.iter().map(|e| index(&cats, &e.category)).collect();
    let yd: Vec<usize> = both.iter().map(|e| index(&diffs, &e.difficulty)).collect();
    Ok(Classifier {
        category: Head::train(&xs[..examples.len()], &yc, cats, opts)?,
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
    let xs = embedder.embed_many(&queries)?;
    let mut cat = Confusion::new(classifier.category.labels.clone());
    let mut diff = Confusion::new(classifier.difficulty.labels.clone());
    for (x, e) in xs.iter().zip(examples) {
        cat.add(&e.category, &classifier.category.predict(x).label);
        diff.add(&e.difficulty, &classifier.difficulty.predict(x).label);
    }
    Ok((cat, diff))
}

/// Splits, fits on the train part (and `levelled`'s train part), evaluates on the held-out
/// parts. `levelled` is the dataset's name and its problems.
pub fn train_and_evaluate(
    embedder: &Embedder,
    examples: &[LabelledQuery],
    levelled: Option<(&str, &Levelled)>,
    holdout: f64,
    seed: u64,
    opts: &TrainOptions,
) -> Result<(Classifier, Evaluation)> {
    let (train, test) = split(examples, holdout, seed);
    let difficulty_only = levelled.map_or(&[][..], |(_, l)| &l.train[..]);
    let classifier = fit(embedder, &train, difficulty_only, opts)?;
    let (category, difficulty) = evaluate(embedder, &classifier, &test)?;
    let levelled = match levelled {
        Some((data, l)) => {
            let (category, difficulty) = evaluate(embedder, &classifier, &l.held_out)?;
            Some(LevelledEvaluation {
                data: data.to_string(),
                train_examples: l.train.len(),
                heldout_examples: l.held_out.len(),
                difficulty_accuracy: difficulty.accuracy(),
                difficulty,
                math_share: category.accuracy(),
            })
        }
        None => None,
    };
    let evaluation = Evaluation {
        train_examples: train.len(),
        heldout_examples: test.len(),
        category_accuracy: category.accuracy(),
        difficulty_accuracy: difficulty.accuracy(),
        category,
        difficulty,
        levelled,
    };
    Ok((classifier, evaluation))
}
