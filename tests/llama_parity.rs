//! Our forward pass on SmolLM2 (llama, Q4_1 GGUF) against candle-transformers'
//! `quantized_llama::ModelWeights` on the same file: logits after the prompt and after 16 greedy
//! steps within 1e-3, identical 32-token greedy continuations, and one batched forward call over
//! sequences of different lengths equal to running them one by one.

use candle_core::quantized::gguf_file;
use candle_core::{Device, Tensor};
use candle_transformers::models::quantized_llama::ModelWeights;
use ponder_engine::forward::{argmax, ContiguousKvStore, KvStore, LogitsFor, SeqChunk};
use ponder_strategies::Turn;

use crate::util::{max_abs_diff, smollm2, smollm2_path};

const TOLERANCE: f32 = 1e-3;
const PROMPTS: [&str; 3] = [
    "What is 2+3?",
    "Write a haiku about the sea.",
    "Explain in one sentence why the sky is blue, and then list three colours.",
];

fn reference() -> ModelWeights {
    let path = smollm2_path();
    let mut file = std::fs::File::open(&path).expect("open gguf");
    let content = gguf_file::Content::read(&mut file).expect("read gguf");
    ModelWeights::from_gguf(content, &mut file, &Device::Cpu).expect("reference model")
}

fn prompt_ids(text: &str) -> Vec<u32> {
    let m = smollm2();
    let rendered = m.render_chat(&[Turn::new("user", text)]).expect("template");
    ponder_engine::forward::encode_prompt(m, &rendered).expect("encode")
}

fn reference_logits(model: &mut ModelWeights, tokens: &[u32], pos: usize) -> Vec<f32> {
    let input = Tensor::new(tokens, &Device::Cpu)
        .and_then(|t| t.unsqueeze(0))
        .expect("input");
    model
        .forward(&input, pos)
        .and_then(|l| l.squeeze(0))
        .and_then(|l| l.to_vec1())
        .expect("reference forward")
}

#[test]
fn logits_and_greedy_continuation_match_candle_reference() {
    let ours = &smollm2().model;
    for prompt in PROMPTS {
        let mut reference = reference();
        let ids = prompt_ids(prompt);
        let mut kv = ContiguousKvStore::new(ours.config().num_layers);
        let (mut ours_input, mut ref_input) = (ids.clone(), ids.clone());
        let (mut ours_tokens, mut ref_tokens) = (Vec::new(), Vec::new());
        for step in 0..32 {
            let pos = kv.seq_len(0);
            let ref_pos = ids.len() + ref_tokens.len() - ref_input.len();
            let chunk = SeqChunk {
                seq: 0,
                tokens: &ours_input,
                start_pos: pos,
            };
            let ours_logits: Vec<f32> = ours
                .forward(&[chunk], &mut kv, LogitsFor::LastPosition)
                .expect("forward")[0]
                .to_vec1()
                .expect("vec");
            let ref_logits = reference_logits(&mut reference, &ref_input, ref_pos);
            if step <= 16 {
                let diff = max_abs_diff(&ours_logits, &ref_logits);
                assert!(
                    diff <= TOLERANCE,
                    "prompt {prompt:?} step {step}: max |Δlogit| = {diff}"
                );
            }
            let (a, b) = (argmax(&ours_logits), argmax(&ref_logits));
            ours_tokens.push(a);
            ref_tokens.push(b);
            ours_input = vec![a];
            ref_input = vec![b];
        }
        assert_eq!(
            ours_tokens, ref_tokens,
            "greedy continuations differ for {prompt:?}"
        );
    }
}

#[test]
fn one_batched_call_equals_sequences_one_by_one() {
    let ours = &smollm2().model;
    let prompts: Vec<Vec<u32>> = PROMPTS.iter().map(|p| prompt_ids(p)).collect();
    assert!(prompts[0].len() != prompts[1].len() && prompts[1].len() != prompts[2].len());
    let layers = ours.config().num_layers;

    // One by one, each with its own store; then 8 greedy decode steps.
    let mut solo: Vec<Vec<Vec<f32>>> = Vec::new();
    for ids in &prompts {
        let mut kv = ContiguousKvStore::new(layers);
        let mut input = ids.clone();
        let mut steps = Vec::new();
        for _ in 0..8 {
            let chunk = SeqChunk {
                seq: 7,
                tokens: &input,
                start_pos: kv.seq_len(7),
            };
            let logits: Vec<f32> = ours
                .forward(&[chunk], &mut kv, LogitsFor::LastPosition)
                .expect("forward")[0]
                .to_vec1()
                .expect("vec");
            input = vec![argmax(&logits)];
            steps.push(logits);
        }
        solo.push(steps);
    }

    // All three in one call per step, sharing a store.
    let mut kv = ContiguousKvStore::new(layers);
    let mut inputs = prompts.clone();
    for step in 0..8 {
        let chunks: Vec<SeqChunk<'_>> = inputs
            .iter()
            .enumerate()
            .map(|(i, t)| SeqChunk {
                seq: i as u64,
                tokens: t,
                start_pos: kv.seq_len(i as u64),
            })
            .collect();
        let logits = ours
            .forward(&chunks, &mut kv, LogitsFor::LastPosition)
            .expect("batched forward");
        let mut next = Vec::new();
        for (i, (l, alone)) in logits.iter().zip(&solo).enumerate() {
            let l: Vec<f32> = l.to_vec1().expect("vec");
            let diff = max_abs_diff(&l, &alone[step]);
            assert!(
                diff <= TOLERANCE,
                "sequence {i} step {step}: batched vs solo max |Δlogit| = {diff}"
            );
            next.push(vec![argmax(&l)]);
        }
        inputs = next;
    }
}

#[test]
fn all_position_logits_agree_with_last_position() {
    let ours = &smollm2().model;
    let ids = prompt_ids(PROMPTS[0]);
    let layers = ours.config().num_layers;
    let chunk = [SeqChunk {
        seq: 0,
        tokens: &ids,
        start_pos: 0,
    }];
    let all = ours
        .forward(
            &chunk,
            &mut ContiguousKvStore::new(layers),
            LogitsFor::AllPositions,
        )
        .expect("forward")[0]
        .clone();
    assert_eq!(all.dims(), &[ids.len(), ours.config().vocab_size]);
    let last_row: Vec<f32> = all
        .get(ids.len() - 1)
        .and_then(|t| t.to_vec1())
        .expect("row");
    let last: Vec<f32> = ours
        .forward(
            &chunk,
            &mut ContiguousKvStore::new(layers),
            LogitsFor::LastPosition,
        )
        .expect("forward")[0]
        .to_vec1()
        .expect("vec");
    // The output projection runs over 1 row or over all rows; candle picks its q-matmul kernel
    // by row count, so the two agree to quantization noise, not bitwise.
    let diff = max_abs_diff(&last_row, &last);
    assert!(diff <= 0.05, "max |Δlogit| = {diff}");
    assert_eq!(argmax(&last_row), argmax(&last));
}

#[test]
fn forked_branches_continue_exactly_like_an_unforked_sequence() {
    let ours = &smollm2().model;
    let ids = prompt_ids(PROMPTS[1]);
    let layers = ours.config().num_layers;
    let (head, tail) = ids.split_at(ids.len() - 1);

    // Control: one sequence, prefill the head, then the tail token.
    let mut control_kv = ContiguousKvStore::new(layers);
    ours.forward(
        &[SeqChunk {
            seq: 0,
            tokens: head,
            start_pos: 0,
        }],
        &mut control_kv,
        LogitsFor::LastPosition,
    )
    .expect("prefill");
    let control: Vec<f32> = ours
        .forward(
            &[SeqChunk {
                seq: 0,
                tokens: tail,
                start_pos: head.len(),
            }],
            &mut control_kv,
            LogitsFor::LastPosition,
        )
        .expect("step")[0]
        .to_vec1()
        .expect("vec");

    // Prefill once, fork, feed the tail token to parent and child in one batch.
    let mut kv = ContiguousKvStore::new(layers);
    ours.forward(
        &[SeqChunk {
            seq: 1,
            tokens: head,
            start_pos: 0,
        }],
        &mut kv,
        LogitsFor::LastPosition,
    )
    .expect("prefill");
    kv.fork(1, 2).expect("fork");
    assert_eq!(kv.seq_len(2), head.len());
    let p = head.len();
    let out = ours
        .forward(
            &[
                SeqChunk {
                    seq: 1,
                    tokens: tail,
                    start_pos: p,
                },
                SeqChunk {
                    seq: 2,
                    tokens: tail,
                    start_pos: p,
                },
            ],
            &mut kv,
            LogitsFor::LastPosition,
        )
        .expect("forward forks");
    for l in out {
        let l: Vec<f32> = l.to_vec1().expect("vec");
        assert!(max_abs_diff(&l, &control) <= TOLERANCE);
    }
    // The branches are independent afterwards: releasing one leaves the other intact.
    kv.release(1);
    assert_eq!(kv.seq_len(2), ids.len());
}

#[test]
fn a_failed_forward_leaves_the_store_unchanged() {
    let ours = &smollm2().model;
    let mut kv = ContiguousKvStore::new(ours.config().num_layers);
    let ids = prompt_ids(PROMPTS[0]);
    ours.forward(
        &[SeqChunk {
            seq: 0,
            tokens: &ids,
            start_pos: 0,
        }],
        &mut kv,
        LogitsFor::LastPosition,
    )
    .expect("prefill");
    let bad = [u32::MAX];
    let err = ours.forward(
        &[SeqChunk {
            seq: 0,
            tokens: &bad,
            start_pos: ids.len(),
        }],
        &mut kv,
        LogitsFor::LastPosition,
    );
    assert!(err.is_err());
    assert_eq!(kv.seq_len(0), ids.len());
    let wrong_pos = ours.forward(
        &[SeqChunk {
            seq: 0,
            tokens: &ids[..1],
            start_pos: 3,
        }],
        &mut kv,
        LogitsFor::LastPosition,
    );
    assert!(
        wrong_pos.is_err(),
        "a chunk at the wrong position must be refused"
    );
}
