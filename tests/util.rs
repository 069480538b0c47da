//! Shared fixtures: the default model, loaded once per test binary.

use std::path::PathBuf;
use std::sync::OnceLock;

use ponder::engine::{LoadOptions, LoadedModel};

/// Path of the installed SmolLM2 GGUF; panics with the setup command when it is missing.
pub(crate) fn smollm2_path() -> PathBuf {
    let path = ponder::models::default_llm_path();
    assert!(path.is_file(), "{} is missing: {}", path.display(), ponder::models::SETUP_HINT);
    path
}

/// SmolLM2 with tokenizer and template, shared by every test.
pub(crate) fn smollm2() -> &'static LoadedModel {
    static MODEL: OnceLock<LoadedModel> = OnceLock::new();
    MODEL.get_or_init(|| match LoadedModel::load(&LoadOptions::cpu(smollm2_path())) {
        Ok(m) => m,
        Err(e) => panic!("loading the default model failed: {e}"),
    })
}

/// Largest absolute difference between two equally long vectors.
pub(crate) fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "length mismatch");
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}
