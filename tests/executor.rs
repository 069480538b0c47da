//! The continuous-batching executor on the real model: the prompt is prefilled once for N
//! samples, KV memory stays near ideal, and a sampled sequence is the same token for token
//! whether it runs alone, in a batch of 16, after a fork, or after being preempted.

use std::collections::BTreeMap;
use std::sync::Arc;

use ponder_engine::batching::{
    Event, GroupRequest, Scheduler, SchedulerConfig, ScoreOutput, ScoreRequest, SeqFinish,
};
use ponder_engine::forward::SamplingParams;
use ponder_engine::forward::{generate, PagedKvStore};
use ponder_engine::EngineError;
use ponder_strategies::Turn;

use crate::util::smollm2;

const BLOCK: usize = 16;

fn scheduler(num_blocks: usize, max_step_tokens: usize) -> Scheduler {
    let m = smollm2();
    let store = PagedKvStore::new(m.model.config(), BLOCK, num_blocks).expect("store");
    Scheduler::new(
        Arc::clone(&m.model),
        store,
        SchedulerConfig {
            max_step_tokens,
            ..SchedulerConfig::default()
        },
    )
}

fn prompt(question: &str) -> Vec<u32> {
    let m = smollm2();
    let text = m
        .render_chat(&[Turn::new("user", question)])
        .expect("template");
    m.tokenizer.encode(&text).expect("encode")
}

fn sample(seed: u64) -> SamplingParams {
    SamplingParams {
        temperature: 0.9,
        seed,
        ..SamplingParams::default()
    }
}

fn group(prompt: &[u32], samples: Vec<SamplingParams>, max_new_tokens: usize) -> GroupRequest {
    GroupRequest {
        prompt: prompt.to_vec(),
        samples,
        max_new_tokens,
        stop_tokens: Vec::new(),
        stop_condition: None,
        priority: 0,
        keep: false,
        resume: None,
    }
}

/// Tokens per branch, in submission order of the ids.
fn tokens_by_seq(events: &[Event]) -> BTreeMap<u64, Vec<u32>> {
    let mut out: BTreeMap<u64, Vec<u32>> = BTreeMap::new();
    for e in events {
        if let Event::Token { seq, token } = e {
            out.entry(*seq).or_default().push(token.token);
        }
    }
    out
}

#[test]
fn n_samples_prefill_the_prompt_once_and_stay_near_ideal_memory() {
    let p = prompt("List three prime numbers and explain why each is prime.");
    let (n, t) = (16, 12);
    let mut s = scheduler(512, 512);
    let ids = s
        .submit(group(&p, (0..n).map(sample).collect(), t))
        .expect("submit");
    let events = s.run_to_completion().expect("run");
    let c = s.counters();
    assert_eq!(
        c.prefill_tokens_computed,
        p.len() as u64,
        "the prompt must be prefilled exactly once"
    );
    let toks = tokens_by_seq(&events);
    for id in &ids {
        assert_eq!(
            toks.get(id).map(Vec::len),
            Some(t),
            "branch {id} must generate {t} tokens"
        );
    }
    let ideal = (p.len() / BLOCK + n as usize * (p.len() % BLOCK + t).div_ceil(BLOCK)) as u64;
    assert!(
        c.peak_blocks_used <= ideal + n,
        "peak {} blocks > ideal {ideal} + n",
        c.peak_blocks_used
    );
    // Branches with different seeds diverge.
    let distinct: std::collections::BTreeSet<&Vec<u32>> = toks.values().collect();
    assert!(
        distinct.len() > n as usize / 2,
        "only {} distinct samples out of {n}",
        distinct.len()
    );
}

#[test]
fn a_sample_is_identical_alone_in_a_batch_after_a_fork_and_after_preemption() {
    let p = prompt("Write a short poem about the number seven.");
    let t = 10;
    let seed = 4242;
    // Alone.
    let mut alone = scheduler(256, 512);
    let id = alone
        .submit(group(&p, vec![sample(seed)], t))
        .expect("submit")[0];
    let reference = tokens_by_seq(&alone.run_to_completion().expect("run"))[&id].clone();
    assert_eq!(reference.len(), t);

    // Branch 7 of a 16-way group (forked from the shared prompt, decoded in a batch of 16).
    let mut batch = scheduler(256, 512);
    let samples: Vec<SamplingParams> = (0..16)
        .map(|i| if i == 7 { sample(seed) } else { sample(i) })
        .collect();
    let ids = batch.submit(group(&p, samples, t)).expect("submit");
    let got = tokens_by_seq(&batch.run_to_completion().expect("run"));
    assert_eq!(got[&ids[7]], reference, "in a batch of 16 after a fork");

    // A pool too small for everyone at once: sequences are preempted and recomputed.
    let blocks = p.len().div_ceil(BLOCK) + 4 * (p.len() % BLOCK + t).div_ceil(BLOCK) + 2;
    let mut tight = scheduler(blocks, 64);
    let mut branch_of_interest = None;
    for g in 0..4 {
        let samples: Vec<SamplingParams> = (0..4)
            .map(|i| {
                if g == 3 && i == 2 {
                    sample(seed)
                } else {
                    sample(100 + g * 4 + i)
                }
            })
            .collect();
        let ids = tight.submit(group(&p, samples, t)).expect("submit");
        if g == 3 {
            branch_of_interest = Some(ids[2]);
        }
    }
    let events = tight.run_to_completion().expect("run under pressure");
    assert!(
        tight.counters().preemptions > 0,
        "the tiny pool must force preemption"
    );
    let got = tokens_by_seq(&events);
    assert_eq!(
        got[&branch_of_interest.expect("id")],
        reference,
        "after preemption and recompute"
    );
}

#[test]
fn greedy_output_equals_the_reference_forward() {
    let m = smollm2();
    let text = m
        .render_chat(&[Turn::new("user", "What is 2+3?")])
        .expect("template");
    let reference = generate(m, &text, 16, SamplingParams::greedy(), |_| {}).expect("generate");
    let mut s = scheduler(128, 512);
    let p = prompt("What is 2+3?");
    let id = s
        .submit(group(
            &p,
            vec![SamplingParams::greedy()],
            reference.tokens.len(),
        ))
        .expect("submit")[0];
    let got = tokens_by_seq(&s.run_to_completion().expect("run"));
    let expected: Vec<u32> = reference.tokens.iter().map(|t| t.token).collect();
    assert_eq!(got[&id], expected);
}

#[test]
fn a_second_request_reuses_the_cached_system_prompt() {
    let m = smollm2();
    let system =
        "You are a careful mathematician. Think step by step and box the answer. ".repeat(8);
    let render = |q: &str| {
        let text = m
            .render_chat(&[Turn::new("system", &system), Turn::new("user", q)])
            .expect("template");
        m.tokenizer.encode(&text).expect("encode")
    };
    let (a, b) = (
        render("What is 17 * 23?"),
        render("How many primes are below 30?"),
    );
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut s = scheduler(256, 512);
    s.submit(group(&a, vec![SamplingParams::greedy()], 2))
        .expect("submit");
    s.run_to_completion().expect("run");
    let before = s.counters();
    s.submit(group(&b, vec![SamplingParams::greedy()], 2))
        .expect("submit");
    s.run_to_completion().expect("run");
    let computed = s.counters().prefill_tokens_computed - before.prefill_tokens_computed;
    let reused = s.counters().prefill_tokens_reused - before.prefill_tokens_reused;
    assert_eq!(
        reused as usize,
        common / BLOCK * BLOCK,
        "whole cached blocks of the shared prefix are reused"
    );
    assert!(
        computed as usize <= b.len() - common + BLOCK,
        "computed {computed} of {} tokens",
        b.len()
    );
}

#[test]
fn the_nsample_bench_measures_fresh_batched_runs_and_reports_their_median() {
    let opts = ponder::bench::BenchOptions {
        n: 4,
        prompt_tokens: 40,
        new_tokens: 6,
        block_size: BLOCK,
        kv_memory: 64 << 20,
        max_step_tokens: 512,
        repeat: 3,
    };
    let report = ponder::bench::nsample(smollm2(), &opts).expect("nsample");
    assert_eq!(report.batched_runs.len(), 3);
    // Every batched run starts from an empty cache: the prompt is computed once, never reused.
    assert_eq!(report.prefill_tokens_computed, 40);
    assert_eq!(report.prefill_tokens_reused, 0);
    assert!(
        report.peak_kv_blocks <= report.ideal_kv_blocks + 4,
        "{} > {} + 4",
        report.peak_kv_blocks,
        report.ideal_kv_blocks
    );
    let mut walls: Vec<f64> = report.batched_runs.iter().map(|r| r.wall_s).collect();
    walls.sort_by(f64::total_cmp);
    assert_eq!(report.wall_s, walls[1], "the report is the median run");
    let median = report
        .batched_runs
        .iter()
        .find(|r| r.wall_s == report.wall_s)
        .expect("median run");
    assert_eq!(report.tokens_per_s, median.tokens_per_s);
    assert!(
        (median.tokens_per_s * median.wall_s - 24.0).abs() < 1e-6,
        "4 samples x 6 tokens in each run"
    );
    assert!(report.naive_wall_s > 0.0 && report.single_stream_tokens_per_s > 0.0);
}

#[test]
fn cancelling_mid_generation_returns_every_block() {
    let p = prompt("Count from one to fifty.");
    let mut s = scheduler(256, 512);
    let idle = s.store().stats();
    let ids = s
        .submit(group(&p, (0..4).map(sample).collect(), 40))
        .expect("submit");
    for _ in 0..5 {
        s.step().expect("step");
    }
    assert!(s.store().stats().used_blocks > 0);
    for id in &ids {
        s.cancel(*id);
    }
    let events = s.run_to_completion().expect("drain");
    let cancelled = events
        .iter()
        .filter(|e| {
            matches!(
                e,
                Event::Finished {
                    reason: SeqFinish::Cancelled,
                    ..
                }
            )
        })
        .count();
    assert_eq!(cancelled, ids.len());
    let after = s.store().stats();
    assert_eq!(
        after.used_blocks, 0,
        "no block may stay referenced: {after:?}"
    );
    assert_eq!(
        after.free_blocks + after.cached_blocks,
        idle.free_blocks,
        "{after:?}"
    );
}

#[test]
fn a_request_larger_than_the_pool_is_refused_at_admission() {
    let p = prompt("Hello");
    let mut s = scheduler(8, 512);
    let err = s
        .submit(group(&p, (0..16).map(sample).collect(), 200))
        .expect_err("must not fit");
    assert!(
        matches!(
            err,
            EngineError::ExceedsKvPool {
                what: "request",
                total: 8,
                ..
            }
        ),
        "{err}"
    );
    assert!(s.is_idle(), "nothing may be queued by a refused request");
}

#[test]
fn many_groups_on_a_tiny_pool_finish_without_panicking() {
    let p = prompt("Name a colour.");
    let per_group = p.len().div_ceil(BLOCK) + 2 * (p.len() % BLOCK + 6).div_ceil(BLOCK);
    let mut s = scheduler(per_group + 1, 32);
    let mut ids = Vec::new();
    for g in 0..6 {
        ids.extend(
            s.submit(group(&p, vec![sample(g), sample(g + 50)], 6))
                .expect("submit"),
        );
    }
    let events = s.run_to_completion().expect("run");
    let toks = tokens_by_seq(&events);
    for id in ids {
        assert_eq!(toks.get(&id).map(Vec::len), Some(6));
    }
    assert_eq!(s.store().stats().used_blocks, 0);
}

#[test]
fn the_actor_batches_concurrent_groups_and_streams_their_events() {
    let exec = ponder_engine::batching::Executor::spawn(scheduler(256, 512)).expect("spawn");
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let p1 = prompt("What is 2+2?");
        let p2 = prompt("Name a fruit.");
        let mut a = exec
            .submit(group(&p1, vec![sample(1), sample(2)], 5))
            .await
            .expect("submit a");
        let mut b = exec
            .submit(group(&p2, vec![sample(3)], 5))
            .await
            .expect("submit b");
        let mut tokens = 0;
        for handle in [&mut a, &mut b] {
            let mut open = handle.seqs.len();
            while open > 0 {
                match handle
                    .events
                    .recv()
                    .await
                    .expect("stream ended before every branch finished")
                {
                    Event::Token { seq, .. } => {
                        assert!(
                            handle.seqs.contains(&seq),
                            "events are routed to their own group"
                        );
                        tokens += 1;
                    }
                    Event::Finished { .. } => open -= 1,
                    Event::Prefill { seq, .. } => assert!(
                        handle.seqs.contains(&seq),
                        "prefill is reported on the group's own branch"
                    ),
                }
            }
        }
        assert_eq!(tokens, 15);
        let c = exec.counters().await.expect("counters");
        assert!(
            c.forward_passes < 15,
            "the two groups must share forward passes ({} passes)",
            c.forward_passes
        );
    });
}

/// A group nobody listens to is cancelled and gives every block back, kept prompt included:
/// a `submit` given up before its reply arrived (the client left while a stream was opening)
/// and a handle dropped midway, before reading the event that reports its kept prompt.
#[test]
fn a_group_nobody_listens_to_is_cancelled_and_keeps_nothing() {
    let exec = ponder_engine::batching::Executor::spawn(scheduler(256, 512)).expect("spawn");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let idle = exec.kv_stats().await.expect("stats");
        let p = prompt("Count from one to fifty, slowly.");
        let keep = |seed: u64| GroupRequest {
            keep: true,
            ..group(&p, (0..3).map(|i| sample(seed + i)).collect(), 200)
        };
        // Given up while waiting for the reply (polled once: the command is sent; the handle
        // is almost never made in time, and dropped at once if it is).
        let given_up = tokio::time::timeout(std::time::Duration::ZERO, exec.submit(keep(1))).await;
        drop(given_up);
        // Dropped after the prompt is computed, its events unread.
        let handle = exec.submit(keep(10)).await.expect("submit");
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        drop(handle);
        let mut stats = exec.kv_stats().await.expect("stats");
        for _ in 0..200 {
            if stats.used_blocks == 0 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            stats = exec.kv_stats().await.expect("stats");
        }
        assert_eq!(stats.used_blocks, 0, "no block stays referenced: {stats:?}");
        assert_eq!(
            stats.free_blocks + stats.cached_blocks,
            idle.free_blocks,
            "{stats:?}"
        );
        let c = exec.counters().await.expect("counters");
        assert!(
            c.tokens_generated < 3 * 200,
            "the abandoned groups were cancelled, not run out ({} tokens)",
            c.tokens_generated
        );
    });
}

/// Ids a `keep` group's events report as kept: its branches and its prompt.
fn kept_ids(events: &[Event]) -> Vec<u64> {
    let mut ids = Vec::new();
    for e in events {
        match e {
            Event::Prefill {
                kept_prompt: Some(p),
                ..
            } => ids.push(*p),
            Event::Finished { seq, .. } => ids.push(*seq),
            _ => {}
        }
    }
    ids
}

#[test]
fn a_kept_branch_resumes_without_recompute_and_its_release_returns_every_block() {
    let p = prompt("Count from one to ten.");
    let mut s = scheduler(256, 512);
    let idle = s.store().stats();
    let kept = |prompt: &[u32], seed: u64, resume: Option<u64>| GroupRequest {
        keep: true,
        resume,
        ..group(prompt, vec![sample(seed)], 5)
    };
    let mut all = Vec::new();
    let first = s.submit(kept(&p, 1, None)).expect("submit")[0];
    let events = s.run_to_completion().expect("run");
    all.extend(kept_ids(&events));
    let toks = tokens_by_seq(&events)[&first].clone();
    assert_eq!(toks.len(), 5);
    assert_eq!(s.counters().kept_branches, 2, "the branch and the prompt");
    // The next step: everything so far, plus forced text. Only the last sampled token (never
    // fed back) and the forced text are new; the partial last block is not recomputed.
    let mut next = p.clone();
    next.extend(&toks);
    next.extend(&p[..3]);
    let before = s.counters();
    let second = s.submit(kept(&next, 2, Some(first))).expect("submit")[0];
    let events = s.run_to_completion().expect("run");
    all.extend(kept_ids(&events));
    let computed = s.counters().prefill_tokens_computed - before.prefill_tokens_computed;
    assert_eq!(computed, 1 + 3, "only the new positions are computed");
    let next_prompt = events
        .iter()
        .find_map(|e| match e {
            Event::Prefill {
                seq,
                computed: 4,
                kept_prompt,
                ..
            } if *seq == second => *kept_prompt,
            _ => None,
        })
        .expect("the second prompt is kept");
    // The same prompt again (a node expanded a second time) computes nothing: its logits were
    // kept with it.
    let before = s.counters();
    let again = s.submit(kept(&next, 3, Some(next_prompt))).expect("submit")[0];
    let events = s.run_to_completion().expect("run");
    all.extend(kept_ids(&events));
    assert_eq!(
        s.counters().prefill_tokens_computed,
        before.prefill_tokens_computed
    );
    assert_eq!(tokens_by_seq(&events)[&again].len(), 5);
    // Resuming a sequence that was never kept (or is gone) falls back to the prefix index.
    let _ = s.submit(kept(&next, 4, Some(999))).expect("submit");
    let events = s.run_to_completion().expect("run");
    all.extend(kept_ids(&events));
    assert_eq!(s.counters().kept_branches as usize, all.len());
    for &id in &all {
        s.release_retained(id);
    }
    s.release_retained(first); // twice: a no-op
    let after = s.store().stats();
    assert_eq!(s.counters().kept_branches, 0);
    assert_eq!(
        after.used_blocks, 0,
        "released sequences hold nothing: {after:?}"
    );
    assert_eq!(after.free_blocks + after.cached_blocks, idle.free_blocks);
}

#[test]
fn kept_branches_give_way_before_anything_is_preempted_or_refused() {
    // Different prompts share no block: each kept branch holds a pool's worth.
    let prompts: Vec<Vec<u32>> = (0..6)
        .map(|i| prompt(&format!("Name colour number {i}.")))
        .collect();
    let per_group = prompts
        .iter()
        .map(|p| p.len().div_ceil(BLOCK) + 1)
        .max()
        .unwrap_or(1);
    let mut s = scheduler(per_group + 1, 512);
    for (seed, p) in prompts.iter().enumerate() {
        let req = GroupRequest {
            keep: true,
            ..group(p, vec![sample(seed as u64)], 4)
        };
        let id = s.submit(req).expect("submit")[0];
        let toks = tokens_by_seq(&s.run_to_completion().expect("run"));
        assert_eq!(toks.get(&id).map(Vec::len), Some(4), "group {seed}");
    }
    assert!(s.counters().kept_branches >= 1);
    assert_eq!(s.counters().preemptions, 0);
}

#[test]
fn prompts_submitted_together_compute_their_shared_opening_once() {
    // Three prompts sharing an opening of several whole blocks, each with its own tail (an
    // LLM judge's questions after the same instructions and problem), submitted in one go.
    let opening = prompt(
        "You check math solutions. I show you a problem and a solution, one step per line. \
         For the step I ask about, answer Yes if it is correct and No if it is wrong. \
         Problem: A farmer has 3 pens with 4 sheep in each pen.",
    );
    let shared = opening.len() / BLOCK * BLOCK;
    assert!(shared >= 3 * BLOCK, "the opening spans whole blocks");
    let tails: [&[u32]; 3] = [&[11, 12, 13], &[21, 22, 23, 24], &[31, 32]];
    let prompts: Vec<Vec<u32>> = tails
        .iter()
        .map(|t| {
            let mut p = opening[..shared].to_vec();
            p.extend_from_slice(t);
            p
        })
        .collect();
    let mut together = scheduler(256, 512);
    let ids: Vec<u64> = prompts
        .iter()
        .map(|p| {
            together
                .submit(group(p, vec![sample(7)], 4))
                .expect("submit")[0]
        })
        .collect();
    let events = together.run_to_completion().expect("run");
    let computed = together.counters().prefill_tokens_computed as usize;
    assert_eq!(
        computed,
        shared + tails.iter().map(|t| t.len()).sum::<usize>(),
        "the shared opening is computed once, then each tail"
    );
    // What each prompt samples is what it samples alone.
    let got = tokens_by_seq(&events);
    for (p, id) in prompts.iter().zip(&ids) {
        let mut alone = scheduler(256, 512);
        let one = alone.submit(group(p, vec![sample(7)], 4)).expect("submit")[0];
        let events = alone.run_to_completion().expect("run");
        assert_eq!(tokens_by_seq(&events)[&one], got[id]);
    }
}

#[test]
fn a_prompt_cancelled_midway_through_its_prefill_reports_what_it_computed() {
    // The case the property test below found: a kept prompt without samples, one chunk of its
    // prefill computed, then cancelled — its computed positions were in no event. Likewise a
    // group's prompt whose only branch is cancelled midway.
    for samples in [0, 1] {
        let mut s = scheduler(48, 16);
        let mut g = group(
            &prompt("What is 2 + 3?"),
            (0..samples).map(sample).collect(),
            3,
        );
        g.keep = true;
        let ids = s.submit(g).expect("submit");
        let mut events = s.step().expect("step");
        let computed = s.counters().prefill_tokens_computed;
        assert_eq!(computed, 16, "one chunk");
        s.cancel(ids[0]);
        events.extend(s.run_to_completion().expect("run"));
        let billed: u64 = events
            .iter()
            .map(|e| match e {
                Event::Prefill { computed, .. } => *computed,
                _ => 0,
            })
            .sum();
        assert_eq!(billed, computed, "samples {samples}: {events:?}");
        s.release_all_retained();
        assert_eq!(s.store().stats().used_blocks, 0);
    }
}

/// One operation of [`retained_kv_returns_every_block_and_bills_what_it_computes`].
#[derive(Debug, Clone)]
enum Op {
    /// A group on question `q` with `extra` more tokens, `samples` branches (0: a kept prompt
    /// only), kept or not, resuming the `resume`-th kept id if any.
    Group {
        q: usize,
        extra: usize,
        samples: usize,
        keep: bool,
        resume: Option<usize>,
    },
    /// A scoring request on question `q`'s tokens plus `extra`, read at its last position.
    Score { q: usize, extra: usize },
    /// Cancels the `i`-th generation id seen so far.
    Cancel(usize),
    /// Releases the `i`-th kept id seen so far.
    Release(usize),
    /// `n` scheduler steps.
    Step(usize),
}

fn op() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    prop_oneof![
        (
            0..3usize,
            0..6usize,
            0..3usize,
            any::<bool>(),
            proptest::option::of(0..8usize)
        )
            .prop_map(|(q, extra, samples, keep, resume)| Op::Group {
                q,
                extra,
                samples,
                keep: keep || samples == 0,
                resume,
            }),
        (0..3usize, 0..6usize).prop_map(|(q, extra)| Op::Score { q, extra }),
        (0..16usize).prop_map(Op::Cancel),
        (0..16usize).prop_map(Op::Release),
        (1..4usize).prop_map(Op::Step),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 12, ..Default::default() })]

    /// Retained KV (kept branches and prompts, parked scores) under random interleavings of
    /// groups, resumes, scores, cancels and releases on a small pool (so pressure releases some
    /// and preempts): once everything has run and every retained sequence is given up, every
    /// block's count is back to zero; and the prefill the events bill (groups' `Prefill`,
    /// scores' `computed`) is exactly the prefill the engine computed.
    #[test]
    fn retained_kv_returns_every_block_and_bills_what_it_computes(
        ops in proptest::collection::vec(op(), 1..24)
    ) {
        let questions = ["What is 2 + 3?", "Name a color.", "What is 12 times 7?"];
        let prompts: Vec<Vec<u32>> = questions.iter().map(|q| prompt(q)).collect();
        let mut s = scheduler(48, 16);
        let idle = s.store().stats();
        let (mut generation, mut kept, mut billed) = (Vec::new(), Vec::new(), 0u64);
        let mut take = |s: &mut Scheduler, events: Vec<Event>, kept: &mut Vec<u64>| {
            for e in &events {
                match e {
                    Event::Prefill { computed, kept_prompt, .. } => {
                        billed += computed;
                        kept.extend(*kept_prompt);
                    }
                    Event::Finished { seq, .. } => kept.push(*seq),
                    Event::Token { .. } => {}
                }
            }
            for (_, scored) in s.take_scored() {
                billed += scored.computed;
            }
        };
        for op in ops {
            match op {
                Op::Group { q, extra, samples, keep, resume } => {
                    let mut p = prompts[q].clone();
                    p.extend(&prompts[(q + 1) % 3][..extra]);
                    let mut g = group(&p, (0..samples as u64).map(sample).collect(), 3);
                    g.keep = keep;
                    g.resume = resume.and_then(|i| kept.get(i).copied());
                    if let Ok(ids) = s.submit(g) {
                        generation.extend(ids);
                    }
                }
                Op::Score { q, extra } => {
                    let mut tokens = prompts[q].clone();
                    tokens.extend(&prompts[(q + 2) % 3][..extra]);
                    let last = tokens.len() - 1;
                    let _ = s.submit_score(ScoreRequest {
                        tokens,
                        positions: vec![last],
                        output: ScoreOutput::Hidden,
                        priority: 0,
                    });
                }
                Op::Cancel(i) => {
                    if let Some(&id) = generation.get(i) {
                        s.cancel(id);
                    }
                }
                Op::Release(i) => {
                    if let Some(&id) = kept.get(i) {
                        s.release_retained(id);
                    }
                }
                Op::Step(n) => {
                    for _ in 0..n {
                        let events = s.step().expect("step");
                        take(&mut s, events, &mut kept);
                    }
                }
            }
        }
        let events = s.run_to_completion().expect("run");
        take(&mut s, events, &mut kept);
        proptest::prop_assert_eq!(billed, s.counters().prefill_tokens_computed);
        s.release_all_retained();
        let after = s.store().stats();
        proptest::prop_assert_eq!(after.used_blocks, 0, "{:?}", after);
        proptest::prop_assert_eq!(after.free_blocks + after.cached_blocks, idle.free_blocks);
        proptest::prop_assert_eq!((s.kept(), s.parked()), (0, 0));
    }
}
