//! Shared fixtures: the default model, loaded once per test binary; seeded random weights for
//! the tiny Qwen2 checkpoints of the parity and PRM tests.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::OnceLock;

use candle_core::{Device, Tensor};
use ponder_engine::forward::{LoadOptions, LoadedModel};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Path of the installed SmolLM2 GGUF; panics with the setup command when it is missing.
pub(crate) fn smollm2_path() -> PathBuf {
    let path = ponder::models::default_llm_path();
    assert!(
        path.is_file(),
        "{} is missing: {}",
        path.display(),
        ponder::models::SETUP_HINT
    );
    path
}

/// SmolLM2 with tokenizer and template, shared by every test.
pub(crate) fn smollm2() -> &'static LoadedModel {
    static MODEL: OnceLock<LoadedModel> = OnceLock::new();
    MODEL.get_or_init(
        || match LoadedModel::load(&LoadOptions::cpu(smollm2_path())) {
            Ok(m) => m,
            Err(e) => panic!("loading the default model failed: {e}"),
        },
    )
}

/// The folder of a thinking-model family's real `tokenizer.json` and `tokenizer_config.json`
/// (`qwen3`, `minicpm_v4_5`), installed by `scripts/setup-thinking-tokenizers.sh` under
/// `$PONDER_THINKING_TOKENIZERS`, else the target dir's `thinking-tokenizers`; panics with the
/// setup command when it is missing (never skipped).
pub(crate) fn thinking_family(name: &str) -> PathBuf {
    let root = std::env::var_os("PONDER_THINKING_TOKENIZERS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::env::var_os("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"))
                .join("thinking-tokenizers")
        });
    let dir = root.join(name);
    for file in ["tokenizer.json", "tokenizer_config.json"] {
        assert!(
            dir.join(file).is_file(),
            "{} is missing: run `bash scripts/setup-thinking-tokenizers.sh`",
            dir.join(file).display()
        );
    }
    dir
}

/// Largest absolute difference between two equally long vectors.
pub(crate) fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "length mismatch");
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// Feeds `prompt`, then `steps - 1` greedy tokens, to `ours` and to `reference` (token ids and
/// start position → last-position logits), asserting the logits agree within 1e-3 every step.
pub(crate) fn assert_tracks_reference(
    ours: &ponder_engine::forward::Model,
    prompt: &[u32],
    steps: usize,
    label: &str,
    mut reference: impl FnMut(&[u32], usize) -> Vec<f32>,
) {
    use ponder_engine::forward::{argmax, ContiguousKvStore, KvStore, LogitsFor, SeqChunk};
    let mut kv = ContiguousKvStore::new(ours.config().num_layers);
    let mut input = prompt.to_vec();
    for step in 0..steps {
        let pos = kv.seq_len(0);
        let expected = reference(&input, pos);
        let got: Vec<f32> = ours
            .forward(
                &[SeqChunk {
                    seq: 0,
                    tokens: &input,
                    start_pos: pos,
                }],
                &mut kv,
                LogitsFor::LastPosition,
            )
            .expect("forward")[0]
            .to_vec1()
            .expect("vec");
        let diff = max_abs_diff(&got, &expected);
        assert!(diff <= 1e-3, "{label} step {step}: max |Δlogit| = {diff}");
        input = vec![argmax(&expected)];
    }
}

/// Seeded random weights: every value is `centre ± spread`, drawn from one stream in call order.
pub(crate) struct RandomTensors(ChaCha8Rng);

impl RandomTensors {
    pub(crate) fn new(seed: u64) -> Self {
        Self(ChaCha8Rng::seed_from_u64(seed))
    }

    pub(crate) fn tensor(&mut self, shape: &[usize], centre: f32, spread: f32) -> Tensor {
        let n: usize = shape.iter().product();
        let data: Vec<f32> = (0..n)
            .map(|_| centre + self.0.random_range(-spread..spread))
            .collect();
        Tensor::from_vec(data, shape, &Device::Cpu).expect("tensor")
    }

    /// The weights of `layers` Qwen2 decoder layers under their checkpoint names: q/k/v
    /// projections with biases (`q`, `kv` output widths), o_proj, a SwiGLU MLP of width `inter`,
    /// and both RMSNorms.
    pub(crate) fn qwen2_layers(
        &mut self,
        t: &mut HashMap<String, Tensor>,
        layers: usize,
        hidden: usize,
        (q, kv, inter): (usize, usize, usize),
    ) {
        for i in 0..layers {
            let p = format!("model.layers.{i}");
            for (name, rows, cols, bias) in [
                ("self_attn.q_proj", q, hidden, true),
                ("self_attn.k_proj", kv, hidden, true),
                ("self_attn.v_proj", kv, hidden, true),
                ("self_attn.o_proj", hidden, q, false),
                ("mlp.gate_proj", inter, hidden, false),
                ("mlp.up_proj", inter, hidden, false),
                ("mlp.down_proj", hidden, inter, false),
            ] {
                t.insert(
                    format!("{p}.{name}.weight"),
                    self.tensor(&[rows, cols], 0.0, 0.15),
                );
                if bias {
                    t.insert(format!("{p}.{name}.bias"), self.tensor(&[rows], 0.0, 0.3));
                }
            }
            t.insert(
                format!("{p}.input_layernorm.weight"),
                self.tensor(&[hidden], 1.0, 0.1),
            );
            t.insert(
                format!("{p}.post_attention_layernorm.weight"),
                self.tensor(&[hidden], 1.0, 0.1),
            );
        }
    }
}

/// The address a spawned `ponder serve` (stdout piped) prints on its first line,
/// `ponder listening on URL`.
pub(crate) fn served_url(child: &mut std::process::Child) -> String {
    let mut line = String::new();
    let stdout = child.stdout.take().expect("ponder serve's stdout is piped");
    std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line)
        .expect("ponder serve's first line");
    let url = line
        .trim()
        .rsplit(' ')
        .next()
        .unwrap_or_default()
        .to_string();
    assert!(
        url.starts_with("http://127.0.0.1:"),
        "ponder serve printed {line:?}"
    );
    url
}

/// POSTs `body` as JSON to `url` on `rt`: the status and the JSON answer (null when none).
pub(crate) fn post_json(
    rt: &tokio::runtime::Runtime,
    client: &reqwest::Client,
    url: &str,
    body: &serde_json::Value,
) -> (u16, serde_json::Value) {
    rt.block_on(async {
        let r = client.post(url).json(body).send().await.expect("POST");
        (
            r.status().as_u16(),
            r.json().await.unwrap_or(serde_json::Value::Null),
        )
    })
}

/// A multi-threaded tokio runtime with `workers` worker threads, for tests that drive async
/// code from a plain `#[test]`.
pub(crate) fn runtime(workers: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("runtime")
}
