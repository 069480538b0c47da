//! Every built-in strategy end to end on the real SmolLM2 through the executor: the budget is
//! a hard cap, the per-request usage matches the engine's own counters, forks share the
//! prompt's KV (prefill computed once per distinct prefix), and a seed replays a search.

use std::sync::OnceLock;

use ponder::reason::{reason, ReasonRequest};
use ponder_engine::{Runtime, RuntimeOptions};
use ponder_strategies::{Outcome, Registry, StrategyError};
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn start() -> Runtime {
    let opts = RuntimeOptions {
        model: crate::util::smollm2_path(),
        ..RuntimeOptions::for_model(ponder::models::default_llm_path())
    };
    match Runtime::start(&opts) {
        Ok(r) => r,
        Err(e) => panic!("starting the runtime failed: {e}"),
    }
}

/// A runtime shared by the tests that do not read its counters.
fn runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(start)
}

/// Tokens of the rendered prompt for `problem` (default system prompt).
fn prompt_tokens(problem: &str) -> u64 {
    let model = &runtime().model;
    let messages = [
        ponder_strategies::Turn::new("system", ponder_strategies::DEFAULT_SYSTEM_PROMPT),
        ponder_strategies::Turn::new("user", problem),
    ];
    let text = model.render_chat(&messages).expect("template");
    ponder_engine::forward::encode_prompt(model, &text)
        .expect("encode")
        .len() as u64
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(f)
}

fn solve_on(
    rt: &Runtime,
    problem: &str,
    strategy: &str,
    params: serde_json::Value,
    budget: u64,
    seed: u64,
) -> Result<Outcome, StrategyError> {
    let req = ReasonRequest {
        problem: problem.into(),
        history: Vec::new(),
        shots: Vec::new(),
        strategy: strategy.into(),
        params,
        budget_tokens: budget,
        deadline_ms: None,
        seed,
    };
    block_on(reason(
        &Registry::with_builtins(),
        rt.generator(),
        None,
        &req,
        CancellationToken::new(),
    ))
}

fn solve(
    problem: &str,
    strategy: &str,
    params: serde_json::Value,
    budget: u64,
    seed: u64,
) -> Result<Outcome, StrategyError> {
    solve_on(runtime(), problem, strategy, params, budget, seed)
}

/// Small settings so the whole table runs in about a minute on two cores.
pub(crate) fn small_params(name: &str) -> serde_json::Value {
    let steps = json!({"max_step_tokens": 40, "max_steps": 3});
    match name {
        "best_of_n" | "weighted_best_of_n" => json!({"n": 3, "max_tokens": 64}),
        "self_consistency" => json!({"n": 3, "max_tokens": 64}),
        "beam_search" => json!({"n": 4, "width": 2, "steps": steps, "rollout_tokens": 64}),
        "dvts" => json!({"n": 4, "width": 2, "steps": steps, "rollout_tokens": 64}),
        "a_star" => json!({"expansions": 2, "max_expansions": 3, "steps": steps}),
        "mcts" => json!({"iterations": 2, "expansions": 2, "steps": steps}),
        "ab_mcts" => json!({"iterations": 2, "batch": 2, "max_tokens": 64}),
        "answer_convergence" => {
            json!({"patience": 2, "steps": {"max_step_tokens": 40, "max_steps": 4}})
        }
        "deepconf" => {
            json!({"n": 4, "warmup": 2, "window": 8, "chunk_tokens": 16, "max_tokens": 64})
        }
        "first_finish" => json!({"k": 3, "chunk_tokens": 16, "max_tokens": 64}),
        "short_m_of_k" => json!({"k": 4, "m": 2, "chunk_tokens": 16, "max_tokens": 64}),
        "adaptive_parallel" => {
            json!({"initial": 2, "grow": 1, "max_n": 3, "chunk_tokens": 16, "max_tokens": 64})
        }
        _ => json!({}),
    }
}

#[test]
fn every_strategy_runs_on_the_real_engine_within_budget_and_metered_exactly() {
    // Its own executor, so that the counters see only this test's requests.
    let rt = start();
    let registry = Registry::with_builtins();
    let problems = [
        "What is 12 + 7?",
        "Tom has 5 apples and buys 3 more. How many apples does he have?",
    ];
    // Each strategy on one of the two problems, in turn: every run after the first two finds
    // blocks of its problem that an earlier strategy left in the cache, which is what the
    // metering below has to get right.
    for (i, name) in registry.names().into_iter().enumerate() {
        let problem = problems[i % problems.len()];
        let budget = 1500;
        let before = block_on(rt.counters()).expect("counters");
        let out = solve_on(&rt, problem, &name, small_params(&name), budget, 1)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let after = block_on(rt.counters()).expect("counters");
        let u = out.usage;
        assert!(
            u.spent() <= budget,
            "{name}: spent {} of {budget}",
            u.spent()
        );
        assert!(!out.candidates.is_empty(), "{name}: no candidate");
        assert!(out.tree.len() > 1, "{name}: empty tree");
        // The request's usage is what the engine did for it: every generated token, and every
        // prefilled position — charged as computed unless this search itself computed it
        // before, so the charge is at least what the engine computed (blocks an earlier
        // strategy left in the cache save the engine work, not the search budget).
        let engine_computed = after.prefill_tokens_computed - before.prefill_tokens_computed;
        let engine_reused = after.prefill_tokens_reused - before.prefill_tokens_reused;
        assert_eq!(
            u.generated_tokens,
            after.tokens_generated - before.tokens_generated,
            "{name}: generated"
        );
        assert_eq!(
            u.prefill_tokens_computed + u.prefill_tokens_reused,
            engine_computed + engine_reused,
            "{name}: prefilled positions"
        );
        assert!(
            u.prefill_tokens_computed >= engine_computed,
            "{name}: charged {} < computed {engine_computed}",
            u.prefill_tokens_computed
        );
    }
}

#[test]
fn parallel_samples_prefill_the_prompt_once() {
    let problem = "Name three prime numbers below ten.";
    let out = solve(
        problem,
        "self_consistency",
        // No answer probes: they read each branch's context again, which is not the point here.
        json!({"n": 4, "max_tokens": 24, "force_answer": false}),
        4000,
        3,
    )
    .expect("solve");
    let u = out.usage;
    // One group of four branches: the prompt's context is read once, not four times (the
    // system prompt's blocks may already be cached by an earlier request).
    assert_eq!(
        u.prefill_tokens_computed + u.prefill_tokens_reused,
        prompt_tokens(problem)
    );
    assert!(u.prefill_tokens_computed > 0, "the question itself is new");
    assert_eq!(out.candidates.len(), 4);
}

#[test]
fn beam_search_steps_reuse_their_cached_prefixes() {
    let params = json!({"n": 4, "width": 2, "steps": {"max_step_tokens": 32, "max_steps": 3}});
    let out = solve(
        "A farmer has 3 pens with 4 sheep each. How many sheep?",
        "beam_search",
        params,
        20_000,
        5,
    )
    .expect("solve");
    let u = out.usage;
    // Every step re-opens each beam's context; the engine must find all but the unfinished
    // last block (and the last sampled token) in its prefix index.
    let steps = out.tree.nodes().filter(|n| n.depth > 0).count() as u64;
    assert!(
        u.prefill_tokens_reused > u.prefill_tokens_computed,
        "reused {} vs computed {}",
        u.prefill_tokens_reused,
        u.prefill_tokens_computed
    );
    let prompt = 60; // generous bound on the rendered prompt
    assert!(
        u.prefill_tokens_computed <= prompt + steps * 16,
        "computed {} for {steps} steps",
        u.prefill_tokens_computed
    );
}

#[test]
fn a_seed_replays_the_same_search() {
    let params = json!({"n": 3, "width": 1, "steps": {"max_step_tokens": 24, "max_steps": 2}});
    let a = solve("What is 9 times 8?", "dvts", params.clone(), 50_000, 11).expect("first run");
    let b = solve("What is 9 times 8?", "dvts", params, 50_000, 11).expect("second run");
    let texts = |o: &Outcome| o.tree.nodes().map(|n| n.text.clone()).collect::<Vec<_>>();
    assert_eq!(
        texts(&a),
        texts(&b),
        "same seed, same tree (the second run even hits the cache)"
    );
    assert_eq!(a.answer, b.answer);
}

#[test]
fn a_binding_budget_replays_the_same_search_whatever_the_cache_holds() {
    // 8 x 48 tokens do not fit in 300: the budget decides how far the branches get, so a charge
    // that depended on what earlier requests cached would change the second run.
    let rt = start();
    let params = json!({"n": 8, "max_tokens": 48});
    let run = || {
        solve_on(
            &rt,
            "What is 14 plus 27?",
            "self_consistency",
            params.clone(),
            300,
            4,
        )
        .expect("solve")
    };
    let (a, b) = (run(), run());
    let before = block_on(rt.counters()).expect("counters");
    let c = run();
    let after = block_on(rt.counters()).expect("counters");
    assert!(
        after.prefill_tokens_reused > before.prefill_tokens_reused,
        "the later runs hit the engine's cache"
    );
    for (x, name) in [(&b, "second"), (&c, "third")] {
        assert_eq!(x.answer, a.answer, "{name} run");
        let answers = |o: &Outcome| {
            o.candidates
                .iter()
                .map(|c| (c.text.clone(), c.tokens))
                .collect::<Vec<_>>()
        };
        assert_eq!(answers(x), answers(&a), "{name} run");
        let (mut ua, mut ux) = (a.usage, x.usage);
        (ua.wall_ms, ux.wall_ms) = (0, 0);
        assert_eq!(ux, ua, "{name} run: usage");
    }
}

#[test]
fn bad_requests_get_named_errors() {
    let err = |strategy: &str, params: serde_json::Value, budget: u64| {
        solve("What is 1+1?", strategy, params, budget, 0)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    assert!(err("best_of_n", json!({}), 0).contains("budget_tokens"));
    assert!(err("nonesuch", json!({}), 100).contains("valid strategies"));
    assert!(err("beam_search", json!({"width": 0}), 100).contains("width"));
    let tiny = err("best_of_n", json!({}), 10);
    assert!(tiny.contains("too small"), "{tiny}");
}

/// Issue 32: every branch keeps its KV across a strategy's calls (its partial last block
/// included), so on a fresh engine a search computes each position of its tree exactly once —
/// before, every step re-prefilled each branch's trailing partial block — and once the search
/// ends its kept branches are released: no KV block stays held.
#[test]
fn a_search_computes_each_tree_position_once_and_then_holds_no_block() {
    for name in [
        "beam_search",
        "dvts",
        "a_star",
        "mcts",
        "ab_mcts",
        "answer_convergence",
        "deepconf",
    ] {
        let rt = start();
        let out = solve_on(&rt, "What is 12 + 7?", name, small_params(name), 1500, 1)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let u = out.usage;
        // AB-MCTS's refinements are new prompts that restate the question: they fork the
        // search's kept root prompt (its partial last block included) instead of recomputing.
        assert_eq!(u.recomputed_tokens, 0, "{name}: {u:?}");
        assert!(
            u.tree_tokens > u.prompt_tokens
                && u.tree_tokens <= u.prefill_tokens_computed + u.generated_tokens,
            "{name}: {u:?}"
        );
        let counters = block_on(rt.counters()).expect("counters");
        let kv = block_on(rt.executor.kv_stats()).expect("kv stats");
        assert_eq!(
            counters.kept_branches, 0,
            "{name}: kept branches outlived the search"
        );
        assert_eq!(kv.used_blocks, 0, "{name}: blocks still held: {kv:?}");
    }
    // Several answer-convergence chains, each probing while its next step runs: a probe and
    // the step continue the same branch, whose last sampled token one of them computes once.
    let rt = start();
    let params = json!({"n": 3, "patience": 2, "steps": {"max_step_tokens": 12, "max_steps": 6}});
    let out = solve_on(
        &rt,
        "What is 12 + 7?",
        "answer_convergence",
        params,
        3000,
        1,
    )
    .unwrap_or_else(|e| panic!("answer_convergence: {e}"));
    let u = out.usage;
    assert!(u.probe_tokens > 0, "the chains probed: {u:?}");
    assert_eq!(u.recomputed_tokens, 0, "{u:?}");
}

/// Issue 34: plain decoding goes through the generator port. A streamed `extend` sends every
/// token as it is sampled, each with the text it completes; the pieces of a choice concatenate
/// to exactly the text and tokens the call returns, the last one says why it ended, and
/// streaming changes nothing the call computes (same seeds, same text).
#[test]
fn streamed_pieces_rebuild_each_choice_exactly() {
    use ponder_strategies::{
        CostTally, ExtendRequest, Generator, LogitAdjust, Sampling, StopKind, Turn,
    };
    let generator = runtime().generator();
    let run = |stream: bool| {
        block_on(async {
            let turns = [Turn::new("user", "Write one sentence about the sea.")];
            let text = generator
                .render_chat(&turns, &Default::default())
                .expect("render");
            let (root, prompt) = generator.open_text(&text).await.expect("open");
            assert_eq!(Some(prompt as u64), Some(prompt_tokens_of(&text)));
            let requests: Vec<ExtendRequest> = (0..3u64)
                .map(|i| ExtendRequest {
                    seq: if i == 0 {
                        root
                    } else {
                        generator.fork(root).expect("fork")
                    },
                    max_tokens: 24,
                    stop: vec![".".into()],
                    sampling: Sampling {
                        seed: 11 + i,
                        ..Sampling::default()
                    },
                    logits: LogitAdjust::default(),
                })
                .collect();
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
            let tally = CostTally::default();
            let out = if stream {
                generator.extend_streamed(&requests, &tally, &tx).await
            } else {
                generator.extend_tallied(&requests, &tally).await
            }
            .expect("extend");
            drop(tx);
            let mut pieces = Vec::new();
            while let Some(p) = rx.recv().await {
                pieces.push(p);
            }
            for r in &requests {
                generator.release(r.seq);
            }
            (out, pieces)
        })
    };
    let (out, pieces) = run(true);
    for (i, ext) in out.iter().enumerate() {
        let mine: Vec<_> = pieces.iter().filter(|p| p.index == i).collect();
        let text: String = mine.iter().map(|p| p.text.as_str()).collect();
        let tokens: Vec<_> = mine.iter().flat_map(|p| p.tokens.clone()).collect();
        assert_eq!(text, ext.text, "choice {i}: pieces rebuild the text");
        assert_eq!(tokens, ext.tokens, "choice {i}: pieces carry every token");
        assert!(mine.len() > 2, "choice {i} streamed token by token");
        let last = mine.last().expect("a last piece");
        assert_eq!(
            last.finish,
            Some(ext.stop),
            "choice {i}: the last piece ends it"
        );
        assert!(mine.iter().rev().skip(1).all(|p| p.finish.is_none()));
        let joined: String = ext.tokens.iter().map(|t| t.text.as_str()).collect();
        assert_eq!(
            joined, ext.text,
            "choice {i}: each token carries its own text"
        );
        assert!(matches!(
            ext.stop,
            StopKind::Stop | StopKind::Eos | StopKind::Length
        ));
    }
    let (plain, none) = run(false);
    assert!(none.is_empty(), "extend without a stream sends no pieces");
    let texts = |o: &[ponder_strategies::Extension]| -> Vec<String> {
        o.iter().map(|e| e.text.clone()).collect()
    };
    assert_eq!(
        texts(&plain),
        texts(&out),
        "streaming changes nothing computed"
    );
}

fn prompt_tokens_of(text: &str) -> u64 {
    ponder_engine::forward::encode_prompt(&runtime().model, text)
        .expect("encode")
        .len() as u64
}
