//! The hidden-state outcome verifier: a head on the generator's own final-normed hidden state
//! at the end of a candidate solution (Cobbe et al. 2021, "Training Verifiers to Solve Math
//! Word Problems", with the generator frozen and only the head trained).
//!
//! [`extract`] reads the states through the engine's scoring path and caches them per
//! generator; [`head`] fits a logistic (or small MLP) head on them with candle and keeps it in a
//! file that records the generator. [`train_head`] and [`evaluate_head`] are what `ponder
//! verifier train --head hidden` and `ponder verifier eval --head hidden` run; the evaluation
//! is the feature verifier's ([`evaluate`](super::evaluate())), so the numbers compare.
//!
//! This module measures; it must not serve. It is no [`Verifier`](ponder_verifiers::Verifier)
//! and no strategy reaches it, and it never fits on a problem outside the fit role (the same
//! refusal as the feature verifier's). It does not touch the feature verifier's files.

pub mod extract;
pub mod head;

use indicatif::ProgressBar;

pub use extract::{reading_key, HiddenCache, HiddenFeatures, HiddenReader};
pub use head::{HeadLayers, HeadOptions, HiddenHead, HEAD_FORMAT_VERSION, READING};

use super::data::CandidateGroup;
use super::error::Result;
use super::evaluate::{evaluate, Evaluation};

/// Where the readings are cached by default, relative to the checkout.
pub const DEFAULT_CACHE_DIR: &str = "target/verifier-hidden";

/// Fits a head on the readings of `train_groups` (problems outside the fit role are refused)
/// and, when given held-out groups, evaluates it on them.
pub async fn train_head(
    features: &mut HiddenFeatures,
    train_groups: &[CandidateGroup],
    train_name: &str,
    heldout: Option<(&[CandidateGroup], &str)>,
    options: HeadOptions,
    progress: &ProgressBar,
) -> Result<HiddenHead> {
    super::refuse_unfittable(train_groups, train_name)?;
    let readings = features.of_groups(train_groups, progress).await?;
    let mut xs = Vec::new();
    let (mut ys, mut problem_of) = (Vec::new(), Vec::new());
    for (i, (g, r)) in train_groups.iter().zip(readings).enumerate() {
        for (c, x) in g.candidates.iter().zip(r) {
            xs.push(x);
            ys.push(c.correct);
            problem_of.push(i);
        }
    }
    let mut head = HiddenHead::fit(
        &xs,
        &ys,
        &problem_of,
        features.generator().clone(),
        options,
        train_name,
    )?;
    if let Some((groups, name)) = heldout {
        head.heldout = Some(evaluate_head(&head, features, groups, name, progress).await?);
    }
    Ok(head)
}

/// Scores every candidate of `groups` with `head` and evaluates the scores.
pub async fn evaluate_head(
    head: &HiddenHead,
    features: &mut HiddenFeatures,
    groups: &[CandidateGroup],
    name: &str,
    progress: &ProgressBar,
) -> Result<Evaluation> {
    progress.reset();
    let scores: Vec<Vec<f32>> = features
        .of_groups(groups, progress)
        .await?
        .iter()
        .map(|g| g.iter().map(|x| head.probability(x)).collect())
        .collect();
    Ok(evaluate(groups, &scores, name))
}
