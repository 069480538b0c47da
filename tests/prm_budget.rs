//! A verifier's tokens are part of the search's budget: `Context::score` reserves the
//! verifier's `cost_bound` before the call (refusing past the cap) and charges its reported
//! cost after; a search whose solutions give no answer is scored, not killed.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use ponder::prm::{ModelPrm, PrmOptions};
use ponder_strategies::fake::{FakeChunk, FakeGenerator};
use ponder_strategies::{
    run, BestOfN, BestOfNParams, Budget, Context, Problem, Sampling, ScoreBy, StepSpec,
    StrategyError,
};
use ponder_verifiers::{Scores, Solution, Verifier};

use crate::prm_fixture::write_checkpoint;

/// Promises at most `bound` tokens per call, reports `cost`.
struct Costly {
    bound: u64,
    cost: u64,
    calls: AtomicUsize,
}

#[async_trait]
impl Verifier for Costly {
    fn name(&self) -> &str {
        "costly"
    }

    async fn score(&self, solution: Solution<'_>) -> ponder_verifiers::Result<Scores> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(Scores::uniform(solution.steps.len(), 0.5).with_cost(self.cost))
    }

    fn cost_bound(&self, _: &Solution<'_>) -> u64 {
        self.bound
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

fn spec() -> StepSpec {
    StepSpec {
        max_tokens: 32,
        stop: vec!["\n\n".into()],
        sampling: Sampling::greedy(0),
    }
}

#[test]
fn verifier_tokens_are_reserved_first_and_charged_after() {
    let verifier = Arc::new(Costly {
        bound: 40,
        cost: 25,
        calls: AtomicUsize::new(0),
    });
    let ctx = Context::new(
        Arc::new(FakeGenerator::arithmetic()),
        Problem::new("What is 2+3?"),
        Budget::tokens(10_000),
    )
    .with_verifier(verifier.clone());
    rt().block_on(async {
        let mut branch = ctx.open().await.expect("open");
        for _ in 0..3 {
            branch = ctx
                .extend(vec![(branch, 0)], &spec())
                .await
                .expect("extend")
                .remove(0);
        }
        let before = ctx.usage();
        let score = ctx.score(&branch, ScoreBy::PrmMin).await.expect("score");
        let after = ctx.usage();
        assert_eq!(score, 0.5);
        assert_eq!(
            (after.verifier_calls, after.verifier_tokens),
            (before.verifier_calls + 1, 25)
        );
        assert_eq!(
            after.spent(),
            before.spent() + 25,
            "only what the verifier reported is charged; the rest of the reservation is released"
        );
        assert_eq!(ctx.available(), 10_000 - after.spent());
    });
}

#[test]
fn a_verifier_call_that_could_pass_the_cap_is_refused_before_it_runs() {
    let verifier = Arc::new(Costly {
        bound: 40,
        cost: 1,
        calls: AtomicUsize::new(0),
    });
    rt().block_on(async {
        // Learn what the solution costs to generate, then give a budget 39 tokens above that.
        let probe = Context::new(
            Arc::new(FakeGenerator::arithmetic()),
            Problem::new("What is 2+3?"),
            Budget::tokens(10_000),
        );
        let mut branch = probe.open().await.expect("open");
        branch = probe
            .extend(vec![(branch, 0)], &spec())
            .await
            .expect("extend")
            .remove(0);
        let spent = probe.usage().spent();

        let ctx = Context::new(
            Arc::new(FakeGenerator::arithmetic()),
            Problem::new("What is 2+3?"),
            Budget::tokens(spent + 39),
        )
        .with_verifier(verifier.clone());
        let mut branch2 = ctx.open().await.expect("open");
        branch2 = ctx
            .extend(vec![(branch2, 0)], &spec())
            .await
            .expect("extend")
            .remove(0);
        assert_eq!(ctx.usage().spent(), spent);
        let err = ctx
            .score(&branch2, ScoreBy::PrmMin)
            .await
            .expect_err("bound 40 > 39 available");
        assert!(
            matches!(err, StrategyError::BudgetExhausted { needed: 40, .. }),
            "{err}"
        );
        assert_eq!(
            verifier.calls.load(Ordering::SeqCst),
            0,
            "refused before the call"
        );
        assert_eq!(
            ctx.usage().spent(),
            spent,
            "nothing charged, nothing left reserved"
        );
        assert_eq!(ctx.available(), 39);
        drop(branch);
    });
}

#[test]
fn a_search_scored_by_a_prm_charges_its_tokens_and_survives_answerless_solutions() {
    let ck = write_checkpoint(5, true);
    let prm = Arc::new(
        ModelPrm::start(&PrmOptions {
            kv_memory: 8 << 20,
            ..PrmOptions::qwen_math_prm(ck.path())
        })
        .expect("prm"),
    );
    let rt = rt();
    let params = BestOfNParams {
        n: 3,
        max_tokens: 64,
        score_by: ScoreBy::PrmMin,
        ..BestOfNParams::default()
    };
    let strategy = BestOfN::new(params, false).expect("strategy");

    // Solutions with answers: scored by the PRM, its tokens charged.
    let ctx = Context::new(
        Arc::new(FakeGenerator::arithmetic()),
        Problem::new("What is 2+3?"),
        Budget::tokens(4_000),
    )
    .with_verifier(prm.clone());
    let before = rt.block_on(prm.executor().counters()).expect("counters");
    let outcome = rt.block_on(run(&strategy, ctx)).expect("search");
    let after = rt.block_on(prm.executor().counters()).expect("counters");
    let computed = after.score_tokens_computed - before.score_tokens_computed;
    assert!(computed > 0);
    assert_eq!(
        outcome.usage.verifier_tokens, computed,
        "the PRM's engine work is charged to the search"
    );
    assert!(outcome.usage.spent() <= 4_000);
    assert!(outcome
        .candidates
        .iter()
        .all(|c| c.score.is_some_and(|s| (0.0..=1.0).contains(&s))));

    // Solutions that never answer: scored "no answer" (0), free, and the search completes.
    let rambling = FakeGenerator::new(|_| {
        FakeChunk::last("I keep thinking about it but I am not sure.", -0.3)
    });
    let ctx = Context::new(
        Arc::new(rambling),
        Problem::new("What is 2+3?"),
        Budget::tokens(4_000),
    )
    .with_verifier(prm.clone());
    let outcome = rt
        .block_on(run(&strategy, ctx))
        .expect("answerless solutions must not kill the search");
    assert_eq!(outcome.usage.verifier_tokens, 0);
    assert_eq!(outcome.usage.verifier_calls, 3);
    assert!(
        outcome.candidates.iter().all(|c| c.score == Some(0.0)),
        "{:?}",
        outcome.candidates
    );
}

/// Regression (issue 32): `ponder serve` held one LLM-as-PRM for every request, so its step
/// cache (and its generator's paid prefixes) were global — a search's charges depended on what
/// ran before it, and the state grew with every request. Given per search, 1,000 identical
/// verifier-scored searches are charged identically and each one's PRM state dies with it.
#[test]
fn per_search_prm_state_lives_and_dies_with_the_search() {
    use ponder::prm::VerifierChoice;
    use ponder::reason::{reason, ReasonRequest};
    use ponder_strategies::{Generator, Registry};

    let rt = rt();
    let served = ponder::models::FittedModel::of_file(&ponder::models::default_llm_path())
        .expect("the default model");
    let source = VerifierChoice::LlmPrm
        .search_verifier(&served)
        .expect("llm-prm")
        .expect("a verifier");
    let registry = Registry::with_builtins();
    let req = ReasonRequest {
        problem: "What is 2+3?".into(),
        history: Vec::new(),
        shots: Vec::new(),
        strategy: "best_of_n".into(),
        params: serde_json::json!({"n": 2, "max_tokens": 64}),
        budget_tokens: 5_000,
        deadline_ms: None,
        seed: 7,
    };
    let mut first = None;
    for i in 0..1000 {
        // As the server does: the search's generator, and a fresh one for the judge.
        let generator = Arc::new(FakeGenerator::arithmetic());
        let judge = Arc::new(FakeGenerator::arithmetic());
        let verifier = rt
            .block_on(source.for_search(Arc::clone(&judge) as Arc<dyn Generator>))
            .expect("verifier");
        let state = Arc::downgrade(&verifier);
        let out = rt
            .block_on(reason(
                &registry,
                generator,
                Some(verifier),
                &req,
                tokio_util::sync::CancellationToken::new(),
            ))
            .expect("search");
        let mut usage = out.usage;
        usage.wall_ms = 0;
        assert!(
            usage.verifier_calls > 0 && usage.verifier_tokens > 0,
            "{usage:?}"
        );
        assert_eq!(
            *first.get_or_insert(usage),
            usage,
            "search {i}: charges drifted"
        );
        assert!(state.upgrade().is_none(), "search {i}: its PRM outlived it");
        assert_eq!(
            judge.counters().live,
            0,
            "search {i}: the judge leaked sequences"
        );
    }
}
