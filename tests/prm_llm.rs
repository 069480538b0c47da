//! The LLM-as-PRM with the real SmolLM2 through the `Generator` port: scores are probabilities,
//! scoring step by step equals scoring at once, each new step is computed on the cached prefix
//! of the steps before (engine counters), the cost bound holds, and bad solutions score "no
//! answer".

use std::sync::Arc;

use ponder::prm::{LlmPrm, LlmPrmConfig};
use ponder_engine::{Runtime, RuntimeOptions};
use ponder_strategies::Generator;
use ponder_verifiers::{Scores, Solution, Verifier};

/// Step-by-step vs at once: the same sequences, computed in different chunks and batches.
const INCREMENTAL_TOL: f32 = 1e-3;
const BLOCK: usize = 16;

const PROBLEM: &str =
    "Tom has 3 apples and buys 4 more. Then he eats 2. How many apples does he have?";
const GOOD: [&str; 4] = [
    "Tom starts with 3 apples.",
    "He buys 4 more, so he has 3 + 4 = 7 apples.",
    "He eats 2, so 7 - 2 = 5 apples are left.",
    "The answer is \\boxed{5}.",
];
const BAD: [&str; 2] = [
    "Tom has 3 apples, and 3 * 100 = 12 apples.",
    "The answer is \\boxed{12}.",
];

fn owned(steps: &[&str]) -> Vec<String> {
    steps.iter().map(|s| s.to_string()).collect()
}

fn start() -> (tokio::runtime::Runtime, Runtime) {
    crate::util::smollm2_path();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let engine = Runtime::start(&RuntimeOptions {
        block_size: BLOCK,
        ..RuntimeOptions::for_model(ponder::models::default_llm_path())
    })
    .expect("engine");
    (rt, engine)
}

#[test]
fn llm_prm_on_smollm2_is_incremental_and_matches_scoring_at_once() {
    let (rt, engine) = start();
    let tok = &engine.model.tokenizer;
    let config = LlmPrmConfig::default();
    let generator: Arc<dyn Generator> = engine.generator();
    let prm = rt
        .block_on(LlmPrm::new(Arc::clone(&generator), config.clone()))
        .expect("judge");

    // Step by step: each call asks only about the newest step.
    let mut incremental = Vec::new();
    for n in 1..=GOOD.len() {
        let steps = owned(&GOOD[..n]);
        let sol = Solution {
            problem: PROBLEM,
            steps: &steps,
            complete: n == GOOD.len(),
            confidence: None,
        };
        let bound = prm.cost_bound(&sol);
        let before = rt.block_on(engine.counters()).expect("counters");
        let started = std::time::Instant::now();
        let scores = rt.block_on(prm.score(sol)).expect("score");
        let after = rt.block_on(engine.counters()).expect("counters");
        let computed = after.prefill_tokens_computed - before.prefill_tokens_computed;
        let reused = after.prefill_tokens_reused - before.prefill_tokens_reused;
        assert_eq!(scores.steps.len(), n);
        assert_eq!(
            &scores.steps[..n - 1],
            &incremental[..],
            "earlier steps come from the cache"
        );
        assert!(
            scores.steps.iter().all(|p| (0.0..=1.0).contains(p)),
            "{:?} are not probabilities",
            scores.steps
        );
        assert_eq!(
            scores.cost,
            computed + 1,
            "the verifier reports what the engine computed, plus its one sampled token"
        );
        assert!(
            scores.cost <= bound,
            "step {n}: cost {} > bound {bound}",
            scores.cost
        );
        // New text of this question: the step's line and the question (plus the problem for
        // step 1); at most one partial block of the shared prefix is recomputed.
        let step_line = config
            .step
            .replace("{n}", &n.to_string())
            .replace("{step}", GOOD[n - 1]);
        let question = config.question.replace("{n}", &n.to_string());
        let new = tok.encode(&step_line).expect("encode").len()
            + tok.encode(&question).expect("encode").len();
        if n > 1 {
            assert!(
                computed as usize <= new + BLOCK,
                "step {n}: computed {computed} tokens for {new} new ones"
            );
            assert!(
                reused as usize > computed as usize,
                "step {n}: the shared prefix ({reused} tokens) is served from cache"
            );
        }
        eprintln!(
            "llm-prm step {n}: p(yes) {:.4}, computed {computed}, reused {reused}, new {new}, bound {bound}, {:?}",
            scores.steps[n - 1],
            started.elapsed()
        );
        incremental.push(scores.steps[n - 1]);
    }

    // All at once, on a judge with a fresh cache: one extend with every question.
    let fresh = rt
        .block_on(LlmPrm::new(Arc::clone(&generator), config))
        .expect("judge");
    let steps = owned(&GOOD);
    let started = std::time::Instant::now();
    let at_once = rt
        .block_on(fresh.score(Solution {
            problem: PROBLEM,
            steps: &steps,
            complete: true,
            confidence: None,
        }))
        .expect("score");
    eprintln!(
        "llm-prm at once: {:?} in {:?}",
        at_once.steps,
        started.elapsed()
    );
    for (k, (a, b)) in incremental.iter().zip(&at_once.steps).enumerate() {
        assert!(
            (a - b).abs() <= INCREMENTAL_TOL,
            "step {}: {a} step by step vs {b} at once",
            k + 1
        );
    }
}

#[test]
fn llm_prm_scores_a_correct_and_a_wrong_solution_in_one_batch() {
    let (rt, engine) = start();
    let prm = rt
        .block_on(LlmPrm::new(engine.generator(), LlmPrmConfig::default()))
        .expect("judge");
    let (good, bad) = (owned(&GOOD[..2]), owned(&BAD));
    let sols = [
        Solution {
            problem: PROBLEM,
            steps: &good,
            complete: false,
            confidence: None,
        },
        Solution {
            problem: PROBLEM,
            steps: &bad,
            complete: true,
            confidence: None,
        },
    ];
    let bounds: Vec<u64> = sols.iter().map(|s| prm.cost_bound(s)).collect();
    let batch = rt.block_on(prm.score_batch(&sols)).expect("batch");
    for ((scores, sol), bound) in batch.iter().zip(&sols).zip(bounds) {
        assert_eq!(scores.steps.len(), sol.steps.len());
        assert!(
            scores
                .steps
                .iter()
                .chain([&scores.overall])
                .all(|p| (0.0..=1.0).contains(p)),
            "{scores:?}"
        );
        assert!(
            scores.cost > 0 && scores.cost <= bound,
            "cost {} vs bound {bound}",
            scores.cost
        );
    }
    eprintln!("llm-prm correct: {:?}  wrong: {:?}", batch[0], batch[1]);
}

#[test]
fn llm_prm_scores_bad_solutions_as_no_answer() {
    let (rt, engine) = start();
    let prm = rt
        .block_on(LlmPrm::new(engine.generator(), LlmPrmConfig::default()))
        .expect("judge");
    let before = rt.block_on(engine.counters()).expect("counters");
    for (what, steps) in [
        ("empty", Vec::new()),
        (
            "no answer",
            owned(&["Tom buys some apples.", "Then he eats some of them."]),
        ),
        (
            "unparsable answer",
            vec!["The answer is \\boxed{\\frac{5}{}}.".to_string()],
        ),
    ] {
        let sol = Solution {
            problem: PROBLEM,
            steps: &steps,
            complete: true,
            confidence: None,
        };
        assert_eq!(prm.cost_bound(&sol), 0, "{what}");
        let scores = rt
            .block_on(prm.score(sol))
            .unwrap_or_else(|e| panic!("{what} must not fail: {e}"));
        assert_eq!(scores, Scores::no_answer(steps.len()), "{what}");
    }
    let after = rt.block_on(engine.counters()).expect("counters");
    assert_eq!(
        after.prefill_tokens_computed, before.prefill_tokens_computed,
        "no model call for bad solutions"
    );
}
