//! The semantic router end to end with the real encoder (all-MiniLM-L6-v2) and the shipped
//! router file: embedding parity with sentence-transformers, truncation, bad input, the router
//! file's checks, held-out accuracy and routing; `router_auto` runs the `auto` strategy over
//! the routers these helpers load.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use ponder::router::{self, cosine, Embedder, Router, RouterError, RouterFile};

pub(crate) fn embedder_dir() -> std::path::PathBuf {
    let dir = ponder::models::default_embedder_dir();
    assert!(
        dir.join("model.safetensors").is_file(),
        "{} is missing: {}",
        dir.display(),
        ponder::models::SETUP_HINT
    );
    dir
}

fn embedder() -> &'static Embedder {
    static E: OnceLock<Embedder> = OnceLock::new();
    E.get_or_init(|| {
        Embedder::load(&embedder_dir()).unwrap_or_else(|e| panic!("loading the encoder: {e}"))
    })
}

pub(crate) fn shipped() -> Arc<Router> {
    static R: OnceLock<Arc<Router>> = OnceLock::new();
    Arc::clone(R.get_or_init(|| {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(router::file::DEFAULT_ROUTER);
        Arc::new(
            Router::load(&path, &embedder_dir())
                .unwrap_or_else(|e| panic!("loading the shipped router: {e}")),
        )
    }))
}

#[derive(serde::Deserialize)]
struct Fixture {
    sentences: Vec<FixtureSentence>,
}

#[derive(serde::Deserialize)]
struct FixtureSentence {
    text: String,
    embedding: Vec<f32>,
}

#[test]
fn embeddings_match_sentence_transformers_fixture() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/minilm_embeddings.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let fixture: Fixture =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(fixture.sentences.len(), 10);
    let texts: Vec<&str> = fixture.sentences.iter().map(|s| s.text.as_str()).collect();
    // One batch of ten, padded to the longest: padding must not change any vector.
    let batch = embedder().embed(&texts).expect("embedding");
    for (s, e) in fixture.sentences.iter().zip(&batch) {
        assert_eq!(e.vector.len(), 384);
        let c = cosine(&e.vector, &s.embedding);
        assert!(c >= 0.999, "cosine {c} < 0.999 for {:?}", s.text);
        let norm: f32 = e.vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "not unit length: {norm}");
        assert!(!e.truncated);
    }
    // Alone, a sentence embeds to the same vector as in the batch.
    let alone = embedder().embed(&texts[..1]).expect("embedding");
    assert!(cosine(&alone[0].vector, &batch[0].vector) > 0.99999);
}

#[test]
fn long_query_is_truncated_to_the_encoder_window_and_said_so() {
    let e = embedder();
    assert_eq!(e.window(), 256);
    let long = "how many apples are left if ".repeat(400);
    let out = e
        .embed(&[long.as_str(), "What is 2+3?"])
        .expect("embedding");
    assert!(out[0].truncated);
    assert_eq!(out[0].tokens, 256);
    assert!(!out[1].truncated);
    assert!(out[1].tokens < 16);
    let decision = shipped()
        .route(&long, 2048, 0.0)
        .expect("routing a long query");
    assert!(decision.truncated);
    assert_eq!(decision.window, 256);
}

#[test]
fn empty_query_is_a_clear_error() {
    assert!(matches!(
        shipped().route("", 1024, 0.0),
        Err(RouterError::EmptyQuery)
    ));
    assert!(matches!(
        shipped().route("   \n", 1024, 0.0),
        Err(RouterError::EmptyQuery)
    ));
}

#[test]
fn missing_router_file_is_an_error_naming_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("nope/router.json");
    let err = Router::load(&path, &embedder_dir()).expect_err("a missing file must fail");
    assert!(matches!(err, RouterError::Read { .. }), "{err}");
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "{err}"
    );
}

#[test]
fn corrupt_router_files_are_errors_naming_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let shipped_text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join(router::file::DEFAULT_ROUTER),
    )
    .expect("shipped router");
    let mut wrong_dim: serde_json::Value =
        serde_json::from_str(&shipped_text).expect("shipped router is JSON");
    wrong_dim["dim"] = serde_json::json!(128);
    let mut wrong_format = wrong_dim.clone();
    wrong_format["dim"] = serde_json::json!(384);
    wrong_format["format"] = serde_json::json!(99);
    let cases = [
        (
            "garbage.json",
            "this is not json".to_string(),
            "router file",
        ),
        (
            "truncated.json",
            shipped_text[..shipped_text.len() / 2].to_string(),
            "router file",
        ),
        ("dim.json", wrong_dim.to_string(), "entries"),
        ("format.json", wrong_format.to_string(), "format 99"),
    ];
    for (name, text, says) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("write");
        let err = Router::load(&path, &embedder_dir()).expect_err("a corrupt file must fail");
        assert!(matches!(err, RouterError::Corrupt { .. }), "{name}: {err}");
        let msg = err.to_string();
        assert!(
            msg.contains(&path.display().to_string()) && msg.contains(says),
            "{name}: {msg}"
        );
    }
}

#[test]
fn shipped_router_file_round_trips_and_carries_its_evaluation() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(router::file::DEFAULT_ROUTER);
    let file = RouterFile::load(&path).expect("shipped router");
    let eval = file
        .evaluation
        .clone()
        .expect("the shipped file records its held-out evaluation");
    assert!(
        eval.heldout_examples >= 50,
        "{} held out",
        eval.heldout_examples
    );
    assert_eq!(eval.category.total(), eval.heldout_examples);
    assert!(
        !file.allocator.table.rows.is_empty(),
        "the shipped file has a calibration table"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let copy = dir.path().join("router.json");
    file.save(&copy).expect("save");
    assert_eq!(RouterFile::load(&copy).expect("reload"), file);
}

/// The shipped calibration table (the allocator `auto` runs) was measured on fit problems only,
/// with the default model: `evals/examples/fit-calibration/run.sh` rebuilds it from the public
/// fit sets, and a validation or report problem among its ids would make every number reported
/// on those sets a number on fitted problems.
#[test]
fn shipped_calibration_is_measured_on_fit_problems_with_the_default_model() {
    let r = shipped();
    let table = &r.file().allocator.table;
    assert!(!table.problems.is_empty(), "the table records its problems");
    assert_eq!(
        table.faults(),
        vec![],
        "fitted on fit problems, rows over their bins"
    );
    let model = table
        .model
        .as_ref()
        .expect("the model it was measured with");
    let default = ponder::models::FittedModel::of_file(&ponder::models::default_llm_path())
        .expect("the default model");
    assert!(
        model.applies_to(&default),
        "measured with {model}, the default model is {default}"
    );
}

#[test]
fn shipped_router_classifies_the_held_out_split() {
    let r = shipped();
    let examples = router::data::load_labelled(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("data/router/labelled.jsonl"),
    )
    .expect("labelled set");
    assert!(examples.len() >= 300);
    let (_, heldout) = router::data::split(&examples, 0.2, 0);
    let (category, difficulty) =
        router::train::evaluate(r.embedder(), &r.file().classifier, &heldout).expect("evaluate");
    // The recorded evaluation is what this build measures on the same split.
    let recorded = r.file().evaluation.clone().expect("evaluation");
    assert_eq!(category, recorded.category);
    assert_eq!(difficulty, recorded.difficulty);
    assert!(
        category.accuracy() >= 0.8,
        "category accuracy {}",
        category.accuracy()
    );
    assert!(
        difficulty.accuracy() > 1.0 / 3.0,
        "difficulty accuracy {} is no better than chance",
        difficulty.accuracy()
    );
    // The levelled dataset's held-out problems, which it never trained on, are GSM8K train's
    // validation problems (the difficulty head's results on them are checked by retraining,
    // below: one embedding of the 400, not two).
    let levelled = recorded
        .levelled
        .expect("the shipped file records its levelled evaluation");
    assert_eq!(levelled.data, router::data::DEFAULT_LEVELLED);
    if let Some(set) = default_levelled() {
        assert_eq!(levelled.heldout_examples, set.held_out.len());
    }
}

/// GSM8K train from the public benchmark directory, levelled as `ponder router train` levels
/// it; `None` (with a note) on a machine without the benchmark files.
fn default_levelled() -> Option<router::data::Levelled> {
    let path = router::data::default_levelled_path();
    if !path.is_file() {
        eprintln!(
            "skipped: {} not found (set PONDER_DATASETS to the public benchmark files)",
            path.display()
        );
        return None;
    }
    Some(
        router::data::load_levelled(
            &path,
            router::data::DEFAULT_LEVEL_BINS,
            router::data::DEFAULT_PER_LEVEL,
            router::data::DEFAULT_HELD_OUT,
        )
        .expect("levelled set"),
    )
}

/// `ponder router train` with its defaults rebuilds the shipped classifier from the committed
/// data and GSM8K train's fit problems (to float noise across builds) and the same held-out
/// evaluation.
#[test]
fn shipped_router_is_what_router_train_makes_from_the_committed_data() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let examples =
        router::data::load_labelled(&root.join("data/router/labelled.jsonl")).expect("labelled");
    let Some(levelled) = default_levelled() else {
        return;
    };
    let (classifier, evaluation) = router::train::train_and_evaluate(
        embedder(),
        &examples,
        Some((router::data::DEFAULT_LEVELLED, &levelled)),
        0.2,
        0,
        &router::TrainOptions::default(),
    )
    .expect("train");
    let shipped = shipped();
    let file = shipped.file();
    for (name, ours, theirs) in [
        ("category", &classifier.category, &file.classifier.category),
        (
            "difficulty",
            &classifier.difficulty,
            &file.classifier.difficulty,
        ),
    ] {
        assert_eq!(ours.labels, theirs.labels, "{name} labels");
        let most = ours
            .weights
            .iter()
            .flatten()
            .zip(theirs.weights.iter().flatten())
            .chain(ours.bias.iter().zip(&theirs.bias))
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(
            most < 1e-3,
            "{name} head differs by {most}: retrain with `ponder router train`"
        );
    }
    // The same held-out results (accuracies are ratios of these counts; JSON parsing may move
    // their last bit).
    let recorded = file.evaluation.clone().expect("evaluation");
    assert_eq!(
        (evaluation.category, evaluation.difficulty),
        (recorded.category, recorded.difficulty)
    );
    let (ours, theirs) = (
        evaluation.levelled.expect("levelled"),
        recorded.levelled.expect("levelled"),
    );
    assert!((ours.math_share - theirs.math_share).abs() < 1e-9);
    assert_eq!(
        (ours.data, ours.train_examples, ours.difficulty),
        (theirs.data, theirs.train_examples, theirs.difficulty)
    );
}

#[test]
fn chat_is_answered_directly_and_hard_math_thinks() {
    let r = shipped();
    let chat = r
        .route("Hey! How are you doing this evening?", 2048, 0.0)
        .expect("route");
    assert_eq!(chat.category, "chat");
    assert!(!chat.allocation.think);
    assert_eq!(chat.allocation.strategy, "direct");
    let math = r
        .route(
            "Find all integer solutions of x^3 - 6x^2 + 11x - 6 = 0 and prove there are no others.",
            2048,
            0.0,
        )
        .expect("route");
    assert_eq!(math.category, "math");
    assert!(math.allocation.think);
    assert!(math.allocation.budget_tokens <= 2048);
    // Under load the same query gets fewer branches, and at full load none at all.
    let busy = r
        .route(
            "Find all integer solutions of x^3 - 6x^2 + 11x - 6 = 0 and prove there are no others.",
            2048,
            0.8,
        )
        .expect("route");
    assert!(
        busy.allocation.n < math.allocation.n || busy.allocation.n == 1,
        "{busy:?}"
    );
    let full = r
        .route(
            "Find all integer solutions of x^3 - 6x^2 + 11x - 6 = 0 and prove there are no others.",
            2048,
            1.0,
        )
        .expect("route");
    assert!(!full.allocation.think);
}

/// A router over the shipped encoder and classifier with `rows` as its calibration table.
pub(crate) fn router_with_table(rows: serde_json::Value) -> Arc<Router> {
    router_with(|table| table.rows = serde_json::from_value(rows).expect("rows"))
}

/// The shipped router file with its calibration table edited by `edit`.
pub(crate) fn router_with(edit: impl FnOnce(&mut router::CalibrationTable)) -> Arc<Router> {
    let shipped_path = Path::new(env!("CARGO_MANIFEST_DIR")).join(router::file::DEFAULT_ROUTER);
    let mut file = RouterFile::load(&shipped_path).expect("shipped router");
    edit(&mut file.allocator.table);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("router.json");
    file.save(&path).expect("save");
    Arc::new(Router::load(&path, &embedder_dir()).expect("router with a test table"))
}
