//! The engine on `--device cuda` against the CPU (feature `cuda`; run by
//! `scripts/gpu-engine-check.sh` on a machine with a GPU). Without a usable device every test
//! prints why and passes (skips); each prints one `GPU_ENGINE {json}` line.
//!
//! Parity: a tiny random llama checkpoint (f32 safetensors, GQA, two layers) loaded on both
//! devices; a group of greedy branches forked from one prompt must produce the same tokens on
//! both, and the chosen tokens' logprobs must agree within [`LOGPROB_TOL`]. Two prompts: a short
//! one (fork + copy-on-write of a partial block, plain paged attention) and one long enough
//! (> 1024 tokens, 4 branches) for the CUDA plan to group the shared prefix (cascade attention).
//!
//! Timing (ignored by default): a Llama-ish 1B shape in bf16 generated on the device, decode
//! tokens/s for 1 and for 16 branches sharing a 2048-token prompt.

use std::sync::Arc;
use std::time::Instant;

use candle_core::{DType, Device, Tensor};
use ponder_engine::batching::{Event, GroupRequest, Scheduler, SchedulerConfig, SeqFinish};
use ponder_engine::forward::SamplingParams;
use ponder_engine::forward::{
    Architecture, LoadOptions, LoadedModel, Model, ModelConfig, PagedKvStore, RopeStyle,
    SampledToken, WeightDtype,
};
use ponder_engine::{ComputeDevice, EngineError};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Largest difference allowed between CPU and CUDA logprobs of the same token (f32 weights, f32
/// KV: the devices differ only in summation order).
const LOGPROB_TOL: f32 = 2e-3;
/// A near tie: when greedy choices differ, the CPU's top two must be closer than this.
const TIE_TOL: f32 = 2e-3;
const VOCAB: usize = 264;
const HIDDEN: usize = 64;
const INTER: usize = 112;
const LAYERS: usize = 2;

/// A random llama checkpoint (f32 on disk) with the PRM fixture's byte tokenizer.
fn write_llama(seed: u64) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut tensor = |shape: &[usize], centre: f32, spread: f32| -> Tensor {
        let n: usize = shape.iter().product();
        let data: Vec<f32> = (0..n)
            .map(|_| centre + rng.random_range(-spread..spread))
            .collect();
        Tensor::from_vec(data, shape, &Device::Cpu).expect("tensor")
    };
    let (q, kv) = (64, 32); // 4 heads, 2 kv heads, head_dim 16
    let mut t = std::collections::HashMap::new();
    t.insert(
        "model.embed_tokens.weight".to_string(),
        tensor(&[VOCAB, HIDDEN], 0.0, 1.0),
    );
    t.insert("model.norm.weight".to_string(), tensor(&[HIDDEN], 1.0, 0.1));
    t.insert(
        "lm_head.weight".to_string(),
        tensor(&[VOCAB, HIDDEN], 0.0, 0.3),
    );
    for i in 0..LAYERS {
        let p = format!("model.layers.{i}");
        for (name, rows, cols) in [
            ("self_attn.q_proj", q, HIDDEN),
            ("self_attn.k_proj", kv, HIDDEN),
            ("self_attn.v_proj", kv, HIDDEN),
            ("self_attn.o_proj", HIDDEN, q),
            ("mlp.gate_proj", INTER, HIDDEN),
            ("mlp.up_proj", INTER, HIDDEN),
            ("mlp.down_proj", HIDDEN, INTER),
        ] {
            t.insert(
                format!("{p}.{name}.weight"),
                tensor(&[rows, cols], 0.0, 0.15),
            );
        }
        t.insert(
            format!("{p}.input_layernorm.weight"),
            tensor(&[HIDDEN], 1.0, 0.1),
        );
        t.insert(
            format!("{p}.post_attention_layernorm.weight"),
            tensor(&[HIDDEN], 1.0, 0.1),
        );
    }
    let t: std::collections::HashMap<String, Tensor> = t
        .into_iter()
        .map(|(k, v)| (k, v.to_dtype(DType::F32).expect("f32")))
        .collect();
    candle_core::safetensors::save(&t, dir.path().join("model.safetensors")).expect("save");
    let config = serde_json::json!({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": VOCAB, "hidden_size": HIDDEN,
        "intermediate_size": INTER, "num_hidden_layers": LAYERS, "num_attention_heads": 4, "num_key_value_heads": 2,
        "max_position_embeddings": 2048, "tie_word_embeddings": false, "rope_theta": 10000.0, "rms_norm_eps": 1e-5,
        "hidden_act": "silu"
    });
    std::fs::write(dir.path().join("config.json"), config.to_string()).expect("config");
    std::fs::write(
        dir.path().join("tokenizer.json"),
        crate::prm_fixture::tokenizer_json().to_string(),
    )
    .expect("tokenizer");
    dir
}

/// `Some(reason)` when there is no usable CUDA device (the test then skips).
fn skip_reason(e: &EngineError) -> Option<String> {
    match e {
        EngineError::Cuda { op, source }
            if *op == "opening the device" || source.to_string().contains("load") =>
        {
            Some(e.to_string())
        }
        EngineError::CudaNotBuilt { .. } => Some(e.to_string()),
        _ => None,
    }
}

fn skipped(test: &str, reason: &str) {
    let line = serde_json::json!({"test": test, "skipped": true, "reason": reason});
    println!("GPU_ENGINE {line}");
    eprintln!("skipping {test}: {reason}");
}

/// Every branch's sampled tokens, in branch order.
fn run_group(
    model: &Arc<Model>,
    prompt: &[u32],
    n: usize,
    max_new: usize,
) -> Vec<Vec<SampledToken>> {
    let store = PagedKvStore::for_model(model, 64 << 20, 16).expect("store");
    let mut s = Scheduler::new(
        Arc::clone(model),
        store,
        SchedulerConfig {
            max_step_tokens: 4096,
            ..SchedulerConfig::default()
        },
    );
    let samples = (0..n)
        .map(|_| SamplingParams {
            top_logprobs: 2,
            ..SamplingParams::greedy()
        })
        .collect();
    let ids = s
        .submit(GroupRequest {
            prompt: prompt.to_vec(),
            samples,
            max_new_tokens: max_new,
            stop_tokens: vec![],
            stop_condition: None,
            priority: 0,
            keep: false,
            resume: None,
        })
        .expect("submit");
    let mut out = vec![Vec::new(); n];
    for e in s.run_to_completion().expect("run") {
        match e {
            Event::Token { seq, token } => {
                if let Some(i) = ids.iter().position(|&id| id == seq) {
                    out[i].push(token);
                }
            }
            Event::Finished {
                reason: SeqFinish::Cancelled,
                seq,
            } => panic!("branch {seq} was cancelled"),
            _ => {}
        }
    }
    out
}

#[test]
fn cuda_greedy_branches_match_cpu_tokens_and_logprobs() {
    let dir = write_llama(11);
    let cuda = match LoadedModel::load(&LoadOptions::on(dir.path(), ComputeDevice::Cuda(0))) {
        Ok(m) => m,
        Err(e) => match skip_reason(&e) {
            Some(reason) => return skipped("parity", &reason),
            None => panic!("loading on cuda: {e}"),
        },
    };
    let cpu = LoadedModel::load(&LoadOptions::cpu(dir.path())).expect("cpu model");
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut cases = Vec::new();
    for (name, prompt_len, n, max_new) in [
        ("short_prompt", 37, 3, 24),
        ("long_shared_prefix", 1100, 4, 16),
    ] {
        let prompt: Vec<u32> = (0..prompt_len).map(|_| rng.random_range(0..256)).collect();
        let started = Instant::now();
        let want = run_group(&cpu.model, &prompt, n, max_new);
        let cpu_s = started.elapsed().as_secs_f64();
        let started = Instant::now();
        let got = run_group(&cuda.model, &prompt, n, max_new);
        let cuda_s = started.elapsed().as_secs_f64();
        let (mut max_diff, mut compared, mut near_ties) = (0f32, 0usize, 0usize);
        for (b, (w, g)) in want.iter().zip(&got).enumerate() {
            assert_eq!(w.len(), g.len(), "{name}: branch {b} lengths differ");
            for (i, (wt, gt)) in w.iter().zip(g).enumerate() {
                if wt.token != gt.token {
                    let gap = match wt.top_logprobs.as_slice() {
                        [a, b2, ..] => a.1 - b2.1,
                        _ => f32::INFINITY,
                    };
                    assert!(
                        gap < TIE_TOL,
                        "{name}: branch {b} token {i}: cpu {} vs cuda {} (cpu top-2 gap {gap})",
                        wt.token,
                        gt.token
                    );
                    near_ties += 1;
                    break; // the continuations legitimately differ after a near tie
                }
                max_diff = max_diff.max((wt.logprob - gt.logprob).abs());
                compared += 1;
            }
        }
        assert!(
            max_diff <= LOGPROB_TOL,
            "{name}: logprobs differ by {max_diff} > {LOGPROB_TOL}"
        );
        cases.push(serde_json::json!({
            "case": name, "prompt_tokens": prompt_len, "branches": n, "new_tokens": max_new,
            "tokens_compared": compared, "near_ties": near_ties, "max_logprob_diff": max_diff,
            "logprob_tol": LOGPROB_TOL, "cpu_s": cpu_s, "cuda_s": cuda_s,
        }));
    }
    println!(
        "GPU_ENGINE {}",
        serde_json::json!({"test": "parity", "ok": true, "cases": cases})
    );
}

/// A Llama-ish 1B shape (Llama 3.2 1B's blocks, a 32k vocabulary to keep host sampling small).
fn one_b_config() -> ModelConfig {
    ModelConfig {
        architecture: Architecture::from_name("llama").expect("llama is registered"),
        vocab_size: 32_000,
        hidden_size: 2048,
        intermediate_size: 8192,
        num_layers: 16,
        num_heads: 32,
        num_kv_heads: 8,
        head_dim: 64,
        rope_theta: 500_000.0,
        rope_style: RopeStyle::Halves,
        rms_norm_eps: 1e-5,
        context_length: 4096,
    }
}

#[test]
#[ignore = "GPU timing: run by scripts/gpu-engine-check.sh"]
fn cuda_decode_throughput_one_vs_sixteen_branches_over_a_2k_prompt() {
    let model = match Model::random_on_cuda(one_b_config(), 0, WeightDtype::Bf16, 7) {
        Ok(m) => Arc::new(m),
        Err(e) => match skip_reason(&e) {
            Some(reason) => return skipped("decode_throughput", &reason),
            None => panic!("random model on cuda: {e}"),
        },
    };
    let (prompt_len, new_tokens) = (2048usize, 64usize);
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let prompt: Vec<u32> = (0..prompt_len)
        .map(|_| rng.random_range(0..32_000))
        .collect();
    let mut runs = Vec::new();
    for n in [1usize, 16] {
        let store = PagedKvStore::for_model(&model, 4 << 30, 16).expect("store");
        let mut s = Scheduler::new(
            Arc::clone(&model),
            store,
            SchedulerConfig {
                max_step_tokens: 4096,
                ..SchedulerConfig::default()
            },
        );
        let samples = (0..n)
            .map(|i| SamplingParams {
                temperature: 1.0,
                seed: i as u64,
                ..SamplingParams::default()
            })
            .collect();
        s.submit(GroupRequest {
            prompt: prompt.clone(),
            samples,
            max_new_tokens: new_tokens,
            stop_tokens: vec![],
            stop_condition: None,
            priority: 0,
            keep: false,
            resume: None,
        })
        .expect("submit");
        let started = Instant::now();
        let mut prefill_s = None;
        let mut decode_started = None;
        let mut tokens = 0usize;
        let mut steps = 0usize;
        while !s.is_idle() {
            let events = s.step().expect("step");
            let got = events
                .iter()
                .filter(|e| matches!(e, Event::Token { .. }))
                .count();
            tokens += got;
            if prefill_s.is_none() && got > 0 {
                prefill_s = Some(started.elapsed().as_secs_f64());
                decode_started = Some((Instant::now(), tokens));
            } else if decode_started.is_some() {
                steps += 1;
            }
        }
        let (t0, first) = decode_started.expect("decoded");
        let decode_s = t0.elapsed().as_secs_f64();
        let decoded = tokens - first;
        runs.push(serde_json::json!({
            "branches": n, "prompt_tokens": prompt_len, "new_tokens_per_branch": new_tokens,
            "prefill_s": prefill_s, "decode_steps": steps, "decode_s": decode_s,
            "decode_tokens_per_s": decoded as f64 / decode_s.max(1e-9),
            "step_ms": 1e3 * decode_s / steps.max(1) as f64,
            "kv_blocks_read_saved": s.store().attention_reads().1,
        }));
    }
    let speedup = runs[1]["decode_tokens_per_s"].as_f64().unwrap_or(0.0)
        / runs[0]["decode_tokens_per_s"]
            .as_f64()
            .unwrap_or(1.0)
            .max(1e-9);
    println!(
        "GPU_ENGINE {}",
        serde_json::json!({"test": "decode_throughput", "ok": true, "model": "llama-1b-shape bf16 (random, vocab 32000)",
                           "sampling": "host (logits copied back)", "runs": runs, "tokens_per_s_16_over_1": speedup})
    );
}
