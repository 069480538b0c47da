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

/// Feeds `prompt`, then `steps - 1` greedy tokens, to `ours` and to `reference` (token ids and
/// start position → last-position logits), asserting the logits agree within 1e-3 every step.
pub(crate) fn assert_tracks_reference(
    ours: &ponder::engine::Model,
    prompt: &[u32],
    steps: usize,
    label: &str,
    mut reference: impl FnMut(&[u32], usize) -> Vec<f32>,
) {
    use ponder::engine::{argmax, ContiguousKvStore, KvStore, LogitsFor, SeqChunk};
    let mut kv = ContiguousKvStore::new(ours.config().num_layers);
    let mut input = prompt.to_vec();
    for step in 0..steps {
        let pos = kv.seq_len(0);
        let expected = reference(&input, pos);
        let got: Vec<f32> = ours
            .forward(&[SeqChunk { seq: 0, tokens: &input, start_pos: pos }], &mut kv, LogitsFor::LastPosition)
            .expect("forward")[0]
            .to_vec1()
            .expect("vec");
        let diff = max_abs_diff(&got, &expected);
        assert!(diff <= 1e-3, "{label} step {step}: max |Δlogit| = {diff}");
        input = vec![argmax(&expected)];
    }
}
