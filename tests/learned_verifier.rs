//! The shipped learned outcome verifier (`data/verifier/outcome.json`) is what `ponder verifier
//! train` makes from the committed candidate sets (`data/verifier/train.jsonl`, fitted on;
//! `data/verifier/heldout.jsonl`, evaluated on), and the held-out evaluation it carries is what
//! that set gives: the file is reproducible by one command, and a change to the features or the
//! fit that would change it fails here until the file is retrained.

use std::path::Path;

use ponder::learned_verifier::{
    self, read_groups, FeatureSet, Featurizer, FitOptions, OutcomeModel,
};

#[test]
fn shipped_verifier_is_what_verifier_train_makes_from_the_committed_data() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let shipped =
        OutcomeModel::load(&root.join(learned_verifier::DEFAULT_MODEL)).expect("shipped model");
    assert_eq!(
        shipped.feature_set,
        FeatureSet::Scalar,
        "`ponder verifier train`'s default features"
    );
    // `ponder verifier train`'s defaults.
    let (train_path, heldout_path) = (
        learned_verifier::DEFAULT_TRAIN,
        learned_verifier::DEFAULT_HELDOUT,
    );
    let train = read_groups(&root.join(train_path)).expect("train set");
    let heldout = read_groups(&root.join(heldout_path)).expect("held-out set");
    let ours = learned_verifier::train(
        &Featurizer::new(FeatureSet::Scalar, None),
        &train,
        train_path,
        Some((&heldout, heldout_path)),
        FitOptions::default(),
    )
    .expect("train");
    assert_eq!(ours.feature_names, shipped.feature_names);
    assert_eq!(ours.training.options, shipped.training.options);
    let most = ours
        .mean
        .iter()
        .zip(&shipped.mean)
        .chain(ours.scale.iter().zip(&shipped.scale))
        .chain(ours.weights.iter().zip(&shipped.weights))
        .chain(std::iter::once((&ours.bias, &shipped.bias)))
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert!(
        most < 1e-3,
        "the model differs by {most}: retrain with `ponder verifier train`"
    );
    // The same held-out counts (rates and CIs follow from them and the seeded bootstrap).
    let (ours, theirs) = (
        ours.heldout.expect("evaluation"),
        shipped.heldout.expect("recorded evaluation"),
    );
    let counts = |e: &learned_verifier::Evaluation| {
        (
            e.problems,
            e.candidates,
            e.positives,
            e.majority.correct,
            e.weighted.correct,
            e.top1.correct,
            e.oracle.correct,
        )
    };
    assert_eq!(counts(&ours), counts(&theirs));
    let auroc = |e: &learned_verifier::Evaluation| e.auroc.unwrap_or(f64::NAN);
    assert!((auroc(&ours) - auroc(&theirs)).abs() < 1e-3);
}

/// The learned outcome verifier was fitted on best-of-N's finished candidates: a server that
/// runs it scores best-of-N with it, and refuses a beam search (whose prefixes it would score
/// out of its distribution) with a 400 naming `strategy`, not a 500 or scores it never learned.
#[test]
fn a_server_with_the_learned_verifier_refuses_a_search_that_scores_partial_solutions() {
    use serde_json::json;

    let verifier = ponder::prm::VerifierChoice::Learned(None)
        .search_verifier()
        .expect("the shipped learned verifier loads")
        .expect("a verifier");
    let server = crate::server::TestServer::start(|b| b.search_verifier(verifier));
    let client = reqwest::Client::new();
    let ask = |strategy: &str, params: serde_json::Value| {
        let body = json!({"problem": "What is 2 + 3?", "strategy": strategy, "params": params,
                          "budget_tokens": 2000, "seed": 1});
        server.block_on(crate::server::post(
            &client,
            &server.url("/v1/reason"),
            body,
        ))
    };
    let (status, out) = ask("best_of_n", json!({"n": 2, "max_tokens": 32}));
    assert_eq!(status, 200, "{out}");
    let (status, out) = ask("beam_search", json!({"n": 2, "width": 1}));
    assert_eq!(status, 400, "{out}");
    assert_eq!(out["error"]["param"], "strategy", "{out}");
    let message = out["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("finished candidates only"), "{message}");
}
