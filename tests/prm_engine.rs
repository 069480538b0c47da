//! The engine's scoring path on a tiny qwen2 checkpoint, through the scheduler directly:
//! scoring requests ride in the same forward passes as decoding without changing what decoding
//! produces, parked scored sequences give their blocks back before anything is preempted, and
//! malformed requests are refused at submission with nothing queued.

use std::collections::BTreeMap;
use std::sync::Arc;

use ponder_engine::batching::{
    Event, GroupRequest, Scheduler, SchedulerConfig, ScoreOutput, ScoreRequest, Scored,
};
use ponder_engine::forward::SamplingParams;
use ponder_engine::forward::{LoadOptions, LoadedModel, PagedKvStore};
use ponder_engine::EngineError;

use crate::prm_fixture::{write_checkpoint, Checkpoint};

/// The same reading computed alone and batched with other work (different matmul shapes).
const BATCH_TOL: f32 = 1e-5;

fn scheduler(ck: &Checkpoint, blocks: usize, max_parked: usize) -> Scheduler {
    let m = LoadedModel::load(&LoadOptions::cpu(ck.path())).expect("load");
    let store = PagedKvStore::new(m.model.config(), 16, blocks).expect("store");
    Scheduler::new(
        Arc::clone(&m.model),
        store,
        SchedulerConfig {
            max_step_tokens: 64,
            max_parked,
            ..SchedulerConfig::default()
        },
    )
}

fn generation(prompt: Vec<u32>, max_new_tokens: usize) -> GroupRequest {
    let greedy = SamplingParams {
        temperature: 0.0,
        ..SamplingParams::default()
    };
    GroupRequest {
        prompt,
        samples: vec![greedy],
        max_new_tokens,
        stop_tokens: Vec::new(),
        stop_condition: None,
        priority: 0,
        keep: false,
        resume: None,
    }
}

fn tokens_of(events: &[Event]) -> BTreeMap<u64, Vec<u32>> {
    let mut out: BTreeMap<u64, Vec<u32>> = BTreeMap::new();
    for e in events {
        if let Event::Token { seq, token } = e {
            out.entry(*seq).or_default().push(token.token);
        }
    }
    out
}

fn score_requests(ck: &Checkpoint) -> Vec<ScoreRequest> {
    let text = ck.encode("Step 1: 3 + 4 = 7. Step 2: 7 * 2 = 14. So the answer is 14.");
    let positions = vec![10, 25, text.len() - 1];
    vec![
        ScoreRequest {
            tokens: text.clone(),
            positions: positions.clone(),
            output: ScoreOutput::Hidden,
            priority: 0,
        },
        ScoreRequest {
            tokens: text,
            positions,
            output: ScoreOutput::TokenLogits(vec![43, 45]),
            priority: 0,
        },
    ]
}

fn assert_readings_close(a: &Scored, b: &Scored) {
    assert_eq!(a.values.len(), b.values.len());
    for (x, y) in a.values.iter().zip(&b.values) {
        assert_eq!(x.len(), y.len());
        let diff = x
            .iter()
            .zip(y)
            .map(|(p, q)| (p - q).abs())
            .fold(0f32, f32::max);
        assert!(diff <= BATCH_TOL, "readings differ by {diff}");
    }
}

#[test]
fn scoring_rides_along_with_decoding_without_changing_it() {
    let ck = write_checkpoint(11, false);
    let prompt = ck.encode("Once upon a time, a small model learned to count:");

    let mut alone = scheduler(&ck, 256, 0);
    let id = alone
        .submit(generation(prompt.clone(), 24))
        .expect("submit")[0];
    let reference = tokens_of(&alone.run_to_completion().expect("run"))[&id].clone();
    let mut scored_alone = Vec::new();
    for req in score_requests(&ck) {
        let mut s = scheduler(&ck, 256, 0);
        s.submit_score(req).expect("submit");
        s.run_to_completion().expect("run");
        scored_alone.push(s.take_scored().remove(0).1);
    }

    let mut mixed = scheduler(&ck, 256, 0);
    let gen_id = mixed.submit(generation(prompt, 24)).expect("submit")[0];
    let score_ids: Vec<u64> = score_requests(&ck)
        .into_iter()
        .map(|r| mixed.submit_score(r).expect("submit"))
        .collect();
    let events = mixed.run_to_completion().expect("run");
    assert_eq!(
        tokens_of(&events)[&gen_id],
        reference,
        "decoding is unchanged by scoring in the same passes"
    );
    let scored: BTreeMap<u64, Scored> = mixed.take_scored().into_iter().collect();
    for (id, want) in score_ids.iter().zip(&scored_alone) {
        assert_readings_close(&scored[id], want);
        assert_eq!(scored[id].values.len(), 3);
    }
    assert_eq!(
        scored[&score_ids[0]].values[0].len(),
        64,
        "hidden states are hidden_size wide"
    );
    assert_eq!(
        scored[&score_ids[1]].values[0].len(),
        2,
        "token logits: one per requested id"
    );
    let c = mixed.counters();
    assert_eq!(c.score_requests, 2);
    assert!(
        c.forward_passes < 24 + 4,
        "scoring shared the decoding passes ({} passes)",
        c.forward_passes
    );
    assert!(events.iter().all(|e| !matches!(e, Event::Prefill { seq, .. } | Event::Token { seq, .. } if score_ids.contains(seq))));
}

#[test]
fn parked_scored_sequences_give_way_before_anything_is_preempted() {
    let ck = write_checkpoint(11, false);
    let mut s = scheduler(&ck, 24, 8);
    for i in 0..5 {
        let tokens = ck.encode(&format!("Distinct text number {i}, three blocks."));
        let last = tokens.len() - 1;
        s.submit_score(ScoreRequest {
            tokens,
            positions: vec![last],
            output: ScoreOutput::Hidden,
            priority: 0,
        })
        .expect("submit");
    }
    s.run_to_completion().expect("run");
    assert_eq!(s.take_scored().len(), 5);
    assert_eq!(s.parked(), 5);
    let held = s.store().stats().used_blocks;
    assert!(
        held >= 10,
        "parked sequences hold their blocks ({held} of 24)"
    );

    // A generation needing most of the pool.
    let prompt =
        ck.encode("A prompt of some length that, with its continuation, needs most of the pool.");
    let id = s.submit(generation(prompt, 200)).expect("submit")[0];
    let events = s.run_to_completion().expect("the pool is freed for it");
    assert_eq!(tokens_of(&events)[&id].len(), 200);
    assert_eq!(s.counters().preemptions, 0, "parked sequences went first");
    assert!(s.parked() < 5);
}

#[test]
fn malformed_scoring_requests_are_refused_with_nothing_queued() {
    let reward = write_checkpoint(7, true);
    let mut s = scheduler(&reward, 64, 8);
    let tokens = reward.encode("some text to score");
    let req = |tokens: Vec<u32>, positions: Vec<usize>, output| ScoreRequest {
        tokens,
        positions,
        output,
        priority: 0,
    };
    let cases = [
        ("no tokens", req(Vec::new(), vec![0], ScoreOutput::Hidden)),
        (
            "no positions",
            req(tokens.clone(), Vec::new(), ScoreOutput::Hidden),
        ),
        (
            "decreasing",
            req(tokens.clone(), vec![3, 2], ScoreOutput::Hidden),
        ),
        (
            "past the end",
            req(tokens.clone(), vec![tokens.len()], ScoreOutput::Hidden),
        ),
        (
            "bad token",
            req(vec![1, 99_999], vec![1], ScoreOutput::Hidden),
        ),
        (
            "logits of a headless model",
            req(tokens.clone(), vec![1], ScoreOutput::TokenLogits(vec![43])),
        ),
        (
            "too long for the pool",
            req(vec![1; 64 * 16], vec![5], ScoreOutput::Hidden),
        ),
    ];
    for (what, r) in cases {
        let err = s.submit_score(r).expect_err(what);
        assert!(
            matches!(
                err,
                EngineError::InvalidInput { .. }
                    | EngineError::PromptTooLong { .. }
                    | EngineError::ExceedsKvPool { .. }
            ),
            "{what}: {err}"
        );
    }
    assert!(s.is_idle(), "nothing was queued");
}
