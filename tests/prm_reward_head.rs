//! Engine-run PRMs on tiny checkpoints written by the tests: a Qwen2.5-Math-PRM-style reward
//! head and a Math-Shepherd-style token-logit PRM score exactly what a direct candle forward
//! pass computes; scoring step by step computes each step's tokens once and equals scoring the
//! whole solution; candidates batch; bad solutions score "no answer" without touching the model.

use ponder::prm::{ModelPrm, PrmOptions};
use ponder_verifiers::{PrmFormat, Scores, Solution, Verifier};

use crate::prm_fixture::{write_checkpoint, Checkpoint, SPECIALS};

/// Engine vs reference probability: same math in f32, different kernels and summation order.
const SCORE_TOL: f32 = 1e-4;
/// Step-by-step vs all-at-once through the same engine: only chunking differs.
const INCREMENTAL_TOL: f32 = 1e-5;

const PROBLEM: &str = "What is (3 + 4) * 2?";
const STEPS: [&str; 5] = [
    "We first add 3 and 4.",
    "3 + 4 = 7.",
    "Then we double it: 7 * 2 = 14.",
    "Check: 14 / 2 = 7, and 7 - 4 = 3.",
    "So the answer is \\boxed{14}.",
];

fn steps(n: usize) -> Vec<String> {
    STEPS[..n].iter().map(|s| s.to_string()).collect()
}

fn options(ck: &Checkpoint) -> PrmOptions {
    PrmOptions {
        kv_memory: 8 << 20,
        ..PrmOptions::qwen_math_prm(ck.path())
    }
}

/// The layout the test expects, computed here independently: the Qwen prompt, then per step
/// its tokens and `<extra_0>`. Returns the tokens and the tag positions.
fn expected_layout(ck: &Checkpoint, n: usize) -> (Vec<u32>, Vec<usize>) {
    let extra = 256
        + SPECIALS
            .iter()
            .position(|s| *s == "<extra_0>")
            .expect("tag") as u32;
    let mut tokens = ck.encode(&PrmFormat::qwen_math_prm().prefix_for(PROBLEM));
    let mut tags = Vec::new();
    for step in &STEPS[..n] {
        tokens.extend(ck.encode(step));
        tokens.push(extra);
        tags.push(tokens.len() - 1);
    }
    (tokens, tags)
}

fn assert_close(got: &[f32], want: &[f32], tol: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol,
            "{what}: step {i}: engine {g} vs reference {w} (tol {tol})"
        );
        assert!(
            (0.0..=1.0).contains(g),
            "{what}: step {i}: {g} is not a probability"
        );
    }
}

#[test]
fn reward_head_scores_equal_a_direct_forward_pass() {
    let ck = write_checkpoint(7, true);
    let prm = ModelPrm::start(&options(&ck)).expect("load the reward model");
    let all = steps(5);
    let scores = crate::util::runtime(2)
        .block_on(prm.score(Solution {
            problem: PROBLEM,
            steps: &all,
            complete: true,
            confidence: None,
        }))
        .expect("score");

    let (tokens, tags) = expected_layout(&ck, 5);
    let want = ck.reference_reward(&ck.reference_hidden(&tokens, &tags));
    assert_close(&scores.steps, &want, SCORE_TOL, "reward head");
    let spread =
        want.iter().fold(0f32, |m, &w| m.max(w)) - want.iter().fold(1f32, |m, &w| m.min(w));
    assert!(
        spread > 0.01,
        "a random head should tell steps apart (spread {spread})"
    );
    assert_eq!(
        scores.overall,
        scores.steps.iter().copied().fold(f32::INFINITY, f32::min),
        "default aggregation is min"
    );
    assert_eq!(
        scores.cost,
        tokens.len() as u64,
        "a cold engine computes every token once"
    );
    let max_diff = scores
        .steps
        .iter()
        .zip(&want)
        .map(|(g, w)| (g - w).abs())
        .fold(0f32, f32::max);
    eprintln!(
        "reward head: {} tokens, max |engine - reference| = {max_diff:e}",
        tokens.len()
    );
}

#[test]
fn token_logit_prm_scores_equal_a_direct_forward_pass() {
    let ck = write_checkpoint(11, false);
    let opts = PrmOptions {
        kv_memory: 8 << 20,
        ..PrmOptions::math_shepherd(ck.path())
    };
    let prm = ModelPrm::start(&opts).expect("load the causal LM");
    let all = steps(3);
    let scores = crate::util::runtime(2)
        .block_on(prm.score(Solution {
            problem: PROBLEM,
            steps: &all,
            complete: false,
            confidence: None,
        }))
        .expect("score");

    // Math-Shepherd layout: "problem ", then per step ["\n"] body " ки", read at the tag's last token.
    let format = PrmFormat::math_shepherd();
    let mut tokens = ck.encode(&format.prefix_for(PROBLEM));
    let mut tags = Vec::new();
    for (i, step) in STEPS[..3].iter().enumerate() {
        if i > 0 {
            tokens.extend(ck.encode("\n"));
        }
        tokens.extend(ck.encode(step));
        tokens.extend(ck.encode(" ки"));
        tags.push(tokens.len() - 1);
    }
    let (good, bad) = (u32::from(b'+'), u32::from(b'-'));
    let want = ck.reference_token_logits(&ck.reference_hidden(&tokens, &tags), good, bad);
    assert_close(&scores.steps, &want, SCORE_TOL, "token logits");
    assert_eq!(scores.cost, tokens.len() as u64);
}

#[test]
fn step_by_step_computes_each_step_once_and_equals_all_at_once() {
    let ck = write_checkpoint(7, true);
    let rt = crate::util::runtime(2);
    let prm = ModelPrm::start(&options(&ck)).expect("load");
    let (tokens, tags) = expected_layout(&ck, 5);
    let mut incremental = Vec::new();
    let mut computed_before = 0;
    for n in 1..=5 {
        let partial = steps(n);
        let scores = rt
            .block_on(prm.score(Solution {
                problem: PROBLEM,
                steps: &partial,
                complete: n == 5,
                confidence: None,
            }))
            .expect("score");
        assert_eq!(scores.steps.len(), n);
        assert_eq!(
            &scores.steps[..n - 1],
            &incremental[..],
            "earlier steps keep their scores"
        );
        // Step n's tokens: from just after step n-1's tag (the prompt too, for step 1) to its own tag.
        let new_tokens = tags[n - 1] + 1 - if n == 1 { 0 } else { tags[n - 2] + 1 };
        assert_eq!(
            scores.cost, new_tokens as u64,
            "step {n} computes only its own tokens"
        );
        let c = rt.block_on(prm.executor().counters()).expect("counters");
        assert_eq!(
            c.score_tokens_computed - computed_before,
            new_tokens as u64,
            "engine counter, step {n}"
        );
        computed_before = c.score_tokens_computed;
        incremental.push(scores.steps[n - 1]);
    }
    let c = rt.block_on(prm.executor().counters()).expect("counters");
    assert_eq!(
        c.score_tokens_computed,
        tokens.len() as u64,
        "five steps scored one by one compute the solution once"
    );
    assert_eq!(c.score_requests, 5);
    eprintln!("incremental: {c:?}");

    // The same solution at once, on a fresh engine and a fresh cache.
    let fresh = ModelPrm::start(&options(&ck)).expect("load");
    let all = steps(5);
    let at_once = rt
        .block_on(fresh.score(Solution {
            problem: PROBLEM,
            steps: &all,
            complete: true,
            confidence: None,
        }))
        .expect("score");
    assert_eq!(at_once.cost, tokens.len() as u64);
    assert_close(
        &incremental,
        &at_once.steps,
        INCREMENTAL_TOL,
        "step by step vs at once",
    );

    // Scoring it again costs nothing: every step is cached.
    let again = rt
        .block_on(prm.score(Solution {
            problem: PROBLEM,
            steps: &all,
            complete: true,
            confidence: None,
        }))
        .expect("score");
    assert_eq!((again.cost, again.steps), (0, incremental));
}

#[test]
fn a_sibling_step_is_computed_on_its_parents_kv() {
    let ck = write_checkpoint(7, true);
    let rt = crate::util::runtime(2);
    let prm = ModelPrm::start(&options(&ck)).expect("load");
    let parent = steps(2);
    rt.block_on(prm.score(Solution {
        problem: PROBLEM,
        steps: &parent,
        complete: false,
        confidence: None,
    }))
    .expect("score");
    // Two siblings of step 3 (beam search's children), scored in one batch.
    let a = vec![
        parent[0].clone(),
        parent[1].clone(),
        "Then 7 * 2 = 14.".to_string(),
    ];
    let b = vec![
        parent[0].clone(),
        parent[1].clone(),
        "Then 7 + 2 = 9, which is wrong.".to_string(),
    ];
    let sols = [
        Solution {
            problem: PROBLEM,
            steps: &a,
            complete: false,
            confidence: None,
        },
        Solution {
            problem: PROBLEM,
            steps: &b,
            complete: false,
            confidence: None,
        },
    ];
    let batch = rt.block_on(prm.score_batch(&sols)).expect("batch");
    for (s, text) in batch.iter().zip([&a[2], &b[2]]) {
        assert_eq!(
            s.cost,
            (ck.encode(text).len() + 1) as u64,
            "only the new step and its tag are computed"
        );
    }
    assert_ne!(batch[0].steps[2], batch[1].steps[2]);
    // Each equals scoring it alone on a fresh engine.
    let fresh = ModelPrm::start(&options(&ck)).expect("load");
    for (sol, scored) in sols.iter().zip(&batch) {
        let alone = rt.block_on(fresh.score(*sol)).expect("score");
        assert_close(
            &scored.steps,
            &alone.steps,
            INCREMENTAL_TOL,
            "batched vs alone",
        );
    }
}

#[test]
fn bad_solutions_score_no_answer_without_touching_the_model() {
    let ck = write_checkpoint(7, true);
    let rt = crate::util::runtime(2);
    let prm = ModelPrm::start(&options(&ck)).expect("load");
    let cases: [(&str, Vec<String>); 4] = [
        ("empty solution", Vec::new()),
        ("blank steps", vec!["  ".into(), "\n".into()]),
        (
            "no answer",
            vec![
                "We add the two numbers.".into(),
                "Then we double the result.".into(),
            ],
        ),
        (
            "unparsable answer",
            vec!["So the answer is \\boxed{\\frac{1}{}}.".into()],
        ),
    ];
    for (what, steps) in &cases {
        let solution = Solution {
            problem: PROBLEM,
            steps,
            complete: true,
            confidence: None,
        };
        assert_eq!(prm.cost_bound(&solution), 0, "{what}: nothing to compute");
        let scores = rt
            .block_on(prm.score(solution))
            .unwrap_or_else(|e| panic!("{what} must not be an error: {e}"));
        assert_eq!(scores, Scores::no_answer(steps.len()), "{what}");
    }
    // A batch mixing them with a good solution scores each on its own.
    let good = steps(5);
    let mut sols: Vec<Solution<'_>> = cases
        .iter()
        .map(|(_, s)| Solution {
            problem: PROBLEM,
            steps: s,
            complete: true,
            confidence: None,
        })
        .collect();
    sols.push(Solution {
        problem: PROBLEM,
        steps: &good,
        complete: true,
        confidence: None,
    });
    let batch = rt.block_on(prm.score_batch(&sols)).expect("batch");
    assert!(batch[..4].iter().all(|s| s.cost == 0 && s.overall == 0.0));
    assert!(batch[4].cost > 0 && batch[4].steps.len() == 5);
    let c = rt.block_on(prm.executor().counters()).expect("counters");
    assert_eq!(
        c.score_requests, 1,
        "only the good solution reached the engine"
    );
}

#[test]
fn cost_bound_covers_the_cost_and_drops_to_zero_once_cached() {
    let ck = write_checkpoint(7, true);
    let rt = crate::util::runtime(2);
    let prm = ModelPrm::start(&options(&ck)).expect("load");
    let (tokens, _) = expected_layout(&ck, 5);
    let all = steps(5);
    let sol = Solution {
        problem: PROBLEM,
        steps: &all,
        complete: true,
        confidence: None,
    };
    let bound = prm.cost_bound(&sol);
    assert_eq!(bound, tokens.len() as u64, "cold: the whole layout");
    let scores = rt.block_on(prm.score(sol)).expect("score");
    assert!(scores.cost <= bound);
    assert_eq!(prm.cost_bound(&sol), 0, "every step cached");
}

#[test]
fn a_checkpoint_without_a_score_head_is_refused_with_its_name() {
    let ck = write_checkpoint(3, false);
    let err = ModelPrm::start(&options(&ck)).expect_err("a causal LM has no score head");
    assert!(err.to_string().contains("score.0.weight"), "{err}");
}
