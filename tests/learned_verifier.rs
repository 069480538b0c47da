//! The shipped learned outcome verifier (`data/verifier/outcome.json`) is fitted on fit
//! problems only, with the default model's candidates (`evals/examples/public-verifier/run.sh`
//! rebuilds it; the candidate sets hold the public problems' text and stay out of the
//! repository), and applies to that model only. The fit itself is reproducible: on the
//! committed `gsm_gen` fixture sets `ponder verifier train` makes the fixture model again, so a
//! change to the features or the fit that would change a fitted file fails here.

use std::path::Path;

use ponder::learned_verifier::{
    self, read_groups, FeatureSet, Featurizer, FitOptions, OutcomeModel,
};
use ponder::roles::{role_of, Role};

const FIXTURE_MODEL: &str = "tests/fixtures/verifier/gsm_gen-outcome.json";
const FIXTURE_TRAIN: &str = "tests/fixtures/verifier/gsm_gen-train.jsonl";
const FIXTURE_HELDOUT: &str = "tests/fixtures/verifier/gsm_gen-heldout.jsonl";

#[test]
fn shipped_verifier_is_fitted_on_fit_problems_with_the_default_model() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let shipped =
        OutcomeModel::load(&root.join(learned_verifier::DEFAULT_MODEL)).expect("shipped model");
    let ids = &shipped.training.problem_ids;
    assert_eq!(
        ids.len(),
        shipped.training.problems,
        "every fitted problem is recorded"
    );
    assert!(!ids.is_empty());
    for id in ids {
        assert_eq!(role_of(id), Some(Role::Fit), "{id} is not a fit problem");
    }
    assert_eq!(shipped.training.data, learned_verifier::DEFAULT_TRAIN);
    let heldout = shipped.heldout.as_ref().expect("its validation evaluation");
    assert_eq!(heldout.data, learned_verifier::DEFAULT_HELDOUT);
    let generator = shipped
        .generator
        .as_ref()
        .expect("the generator it was fitted with");
    let default = ponder::models::FittedModel::of_file(&ponder::models::default_llm_path())
        .expect("the default model");
    assert!(
        generator.applies_to(&default),
        "fitted with {generator}, the default model is {default}"
    );
}

#[test]
fn the_fit_on_the_committed_fixture_makes_the_fixture_model_again() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let shipped = OutcomeModel::load(&root.join(FIXTURE_MODEL)).expect("fixture model");
    assert_eq!(
        shipped.feature_set,
        FeatureSet::Scalar,
        "`ponder verifier train`'s default features"
    );
    let (train_path, heldout_path) = (FIXTURE_TRAIN, FIXTURE_HELDOUT);
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
        "the model differs by {most}: retrain it with `ponder verifier train --data \
         {FIXTURE_TRAIN} --heldout {FIXTURE_HELDOUT} --out {FIXTURE_MODEL}`"
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
    assert!(
        train.iter().all(|g| g.split == ponder::split::Split::Train)
            && heldout
                .iter()
                .all(|g| g.split == ponder::split::Split::HeldOut),
        "the fixture sets are on their sides of the split"
    );
}

/// The learned outcome verifier was fitted on best-of-N's finished candidates: a server that
/// runs it scores best-of-N with it, and refuses a beam search (whose prefixes it would score
/// out of its distribution) with a 400 naming `strategy`, not a 500 or scores it never learned.
#[test]
fn a_server_with_the_learned_verifier_refuses_a_search_that_scores_partial_solutions() {
    use serde_json::json;

    let served = ponder::models::FittedModel::of_file(&ponder::models::default_llm_path())
        .expect("the default model");
    let verifier = ponder::prm::VerifierChoice::Learned(None)
        .search_verifier(&served)
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
