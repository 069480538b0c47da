//! The caller's sampling fields reach every strategy's generations (`SamplingOverride`, applied
//! by the `Context`): temperature and truncation replace the strategy's on every branch, a stop
//! string ends the branch it appears in, `max_tokens` caps each branch over all its steps — for
//! every built-in strategy, on the scripted `FakeGenerator` seen through a generator that
//! records each request. An empty override changes nothing: the search replays as before.

// Tests state expectations with `expect` (clippy.toml allows it in `#[test]` functions).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use ponder_strategies::fake::FakeGenerator;
use ponder_strategies::{
    run, Budget, ChatTemplateKwargs, Context, ExtendRequest, Extension, Generator, Outcome,
    Problem, Prompt, Registry, Result, SamplingOverride, SeqHandle,
};

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(f)
}

/// [`FakeGenerator::arithmetic`], recording every request it is asked to extend and the
/// chat-template variables of every prompt it opens.
struct Recording {
    inner: FakeGenerator,
    seen: Mutex<Vec<ExtendRequest>>,
    opened: Mutex<Vec<ChatTemplateKwargs>>,
}

#[async_trait]
impl Generator for Recording {
    async fn open(
        &self,
        prompt: &Prompt,
        template: &ChatTemplateKwargs,
    ) -> Result<(SeqHandle, usize)> {
        self.opened.lock().expect("lock").push(template.clone());
        self.inner.open(prompt, template).await
    }
    fn fork(&self, seq: SeqHandle) -> Result<SeqHandle> {
        self.inner.fork(seq)
    }
    fn append(&self, seq: SeqHandle, text: &str) -> Result<usize> {
        self.inner.append(seq, text)
    }
    fn prefill_bound(&self, seq: SeqHandle) -> Result<usize> {
        self.inner.prefill_bound(seq)
    }
    async fn extend(&self, batch: &[ExtendRequest]) -> Result<Vec<Extension>> {
        self.seen
            .lock()
            .expect("lock")
            .extend(batch.iter().cloned());
        self.inner.extend(batch).await
    }
    fn release(&self, seq: SeqHandle) {
        self.inner.release(seq)
    }
}

/// Runs `name` with its defaults under `sampling`; returns the outcome and every request.
fn solve(name: &str, sampling: Option<SamplingOverride>) -> (Outcome, Vec<ExtendRequest>) {
    let generator = Arc::new(Recording {
        inner: FakeGenerator::arithmetic(),
        seen: Mutex::new(Vec::new()),
        opened: Mutex::new(Vec::new()),
    });
    let strategy = Registry::with_builtins()
        .build(name, serde_json::Value::Null)
        .expect("builds");
    let mut ctx = Context::new(
        generator.clone(),
        Problem::new("What is 2+3?"),
        Budget::tokens(200_000),
    )
    .with_seed(3);
    if let Some(s) = sampling {
        ctx = ctx.with_sampling(s);
    }
    let outcome = block_on(run(strategy.as_ref(), ctx)).expect(name);
    let seen = generator.seen.lock().expect("lock").clone();
    (outcome, seen)
}

/// An answer probe: a greedy read of the answer so far, which keeps its own sampling.
fn is_probe(r: &ExtendRequest) -> bool {
    r.stop == ["}"] && r.sampling.temperature == 0.0 && r.sampling.top_logprobs == 0
}

fn strategies() -> Vec<String> {
    Registry::with_builtins().names()
}

#[test]
fn temperature_and_truncation_reach_every_branch_of_every_strategy() {
    let asked = SamplingOverride {
        temperature: Some(0.0),
        top_p: Some(0.5),
        top_k: Some(7),
        min_p: Some(0.05),
        ..SamplingOverride::default()
    };
    for name in strategies() {
        let (_, seen) = solve(&name, Some(asked.clone()));
        let generations: Vec<_> = seen.iter().filter(|r| !is_probe(r)).collect();
        assert!(!generations.is_empty(), "{name} generated nothing");
        for r in generations {
            let s = r.sampling;
            assert_eq!(
                (s.temperature, s.top_p, s.top_k, s.min_p),
                (0.0, 0.5, 7, 0.05),
                "{name}: {r:?}"
            );
        }
        // Unset, the strategy's own sampling stays (no request has the caller's top_k).
        let (_, seen) = solve(&name, None);
        assert!(seen.iter().all(|r| r.sampling.top_k != 7), "{name}");
    }
}

#[test]
fn an_empty_override_replays_the_search_exactly() {
    for name in strategies() {
        // Everything but the wall-clock time.
        let replay = |sampling| {
            let (mut outcome, _) = solve(&name, sampling);
            outcome.usage.wall_ms = 0;
            serde_json::to_value(&outcome).expect("json")
        };
        assert_eq!(
            replay(None),
            replay(Some(SamplingOverride::default())),
            "{name}"
        );
    }
}

#[test]
fn max_tokens_caps_each_branch_over_all_its_steps() {
    // The fake's solution is 5 + 4 + 6 tokens in three steps; a cap of 7 ends every branch
    // inside its second step, whatever the strategy's step size.
    let asked = SamplingOverride {
        max_tokens: Some(7),
        ..SamplingOverride::default()
    };
    for name in strategies() {
        let (outcome, seen) = solve(&name, Some(asked.clone()));
        assert!(!outcome.candidates.is_empty(), "{name}");
        for c in &outcome.candidates {
            assert!(c.tokens <= 7, "{name}: a branch of {} tokens", c.tokens);
            assert!(!c.text.contains("boxed"), "{name}: {:?}", c.text);
        }
        assert!(
            seen.iter()
                .filter(|r| !is_probe(r))
                .all(|r| r.max_tokens <= 7),
            "{name}: no single call may ask for more than the cap"
        );
    }
}

#[test]
fn a_stop_string_ends_the_branch_it_appears_in() {
    let asked = SamplingOverride {
        stop: vec!["sum".into()],
        ..SamplingOverride::default()
    };
    for name in strategies() {
        let (outcome, seen) = solve(&name, Some(asked.clone()));
        assert!(
            seen.iter()
                .filter(|r| !is_probe(r))
                .all(|r| r.stop.contains(&"sum".to_string())),
            "{name}: the stop reaches every generation"
        );
        assert!(!outcome.candidates.is_empty(), "{name}");
        for c in &outcome.candidates {
            // Generation stops on the token that completes the stop: nothing after it. (A
            // strategy may have stopped a branch earlier by its own rule.)
            assert!(!c.text.contains("boxed"), "{name}: {:?}", c.text);
            if let Some(at) = c.text.find("sum") {
                assert_eq!(c.text.get(at..).map(str::trim_end), Some("sum"), "{name}");
                assert!(c.finished, "{name}: a stopped branch is finished");
            }
        }
    }
}

#[test]
fn every_prompt_of_every_strategy_is_opened_with_the_callers_template_variables() {
    let mut vars = serde_json::Map::new();
    vars.insert("enable_thinking".into(), serde_json::Value::Bool(false));
    let template = ChatTemplateKwargs::new(vars).expect("not reserved");
    for name in strategies() {
        let generator = Arc::new(Recording {
            inner: FakeGenerator::arithmetic(),
            seen: Mutex::new(Vec::new()),
            opened: Mutex::new(Vec::new()),
        });
        let strategy = Registry::with_builtins()
            .build(&name, serde_json::Value::Null)
            .expect("builds");
        let ctx = Context::new(
            generator.clone(),
            Problem::new("What is 2+3?"),
            Budget::tokens(200_000),
        )
        .with_seed(3)
        .with_template_kwargs(template.clone());
        block_on(run(strategy.as_ref(), ctx)).expect(&name);
        let opened = generator.opened.lock().expect("lock").clone();
        assert!(!opened.is_empty(), "{name} opened no prompt");
        // Synthesis and refinement prompts too, not only the problem's.
        assert!(opened.iter().all(|t| *t == template), "{name}: {opened:?}");
    }
}

#[test]
fn the_renderers_own_template_variables_are_refused_naming_the_field() {
    for name in ChatTemplateKwargs::RESERVED {
        let mut vars = serde_json::Map::new();
        vars.insert(name.into(), serde_json::Value::Bool(true));
        match ChatTemplateKwargs::new(vars) {
            Err(ponder_strategies::GeneratorError::InvalidRequest { field, reason }) => {
                assert_eq!(field, "chat_template_kwargs");
                assert!(reason.contains(name), "{reason}");
            }
            other => panic!("{name}: {other:?}"),
        }
    }
}
