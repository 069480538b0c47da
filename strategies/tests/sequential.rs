//! Sequential scaling against the scripted `FakeGenerator`: budget forcing (s1) never thinks
//! past its maximum and then answers after the forced delimiter; it appends "Wait" exactly when
//! the model ends its thinking before the minimum (at most `max_waits` times), computing only
//! the appended text again; bad bounds and a budget below the minimum are refused naming the
//! field.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use ponder_strategies::fake::{FakeChunk, FakeGenerator, FakeState};
use ponder_strategies::{run, Budget, Context, Outcome, Problem, Registry, StrategyError};
use serde_json::json;

fn solve(
    params: serde_json::Value,
    generator: Arc<FakeGenerator>,
    budget: u64,
) -> Result<Outcome, StrategyError> {
    let strategy = Registry::with_builtins().build("budget_forcing", params)?;
    let ctx = Context::new(
        generator,
        Problem::new("What is 3+4?"),
        Budget::tokens(budget),
    )
    .with_seed(1);
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(run(strategy.as_ref(), ctx))
}

/// Answers `\boxed{7}` after the delimiter; before it, thinks with `think`.
fn thinker(think: impl Fn(&str) -> FakeChunk + Send + Sync + 'static) -> Arc<FakeGenerator> {
    Arc::new(FakeGenerator::new(move |s: FakeState<'_>| {
        if s.text.ends_with("Final Answer: ") {
            FakeChunk::last("\\boxed{7}", -0.1)
        } else {
            think(s.text)
        }
    }))
}

/// The words of the reply's thinking block.
fn thinking_words(out: &Outcome) -> Vec<String> {
    let text = out.text.as_deref().unwrap_or("");
    let inside = text
        .split_once("<think>")
        .and_then(|(_, rest)| rest.split_once("</think>"))
        .map(|(inside, _)| inside)
        .unwrap_or_else(|| panic!("no closed block in {text:?}"));
    inside.split_whitespace().map(str::to_string).collect()
}

#[test]
fn the_maximum_is_never_exceeded_and_an_answer_follows_the_forced_delimiter() {
    for max in [1usize, 7, 20] {
        // A model that would think forever.
        let out = solve(
            json!({"max_thinking_tokens": max, "answer_tokens": 8}),
            thinker(|_| FakeChunk::step("hmm ", -0.2)),
            10_000,
        )
        .expect("search");
        let words = thinking_words(&out);
        assert_eq!(
            words.len(),
            max,
            "thinks exactly up to the maximum: {out:?}"
        );
        assert!(words.iter().all(|w| w == "hmm"));
        let text = out.text.as_deref().unwrap_or("");
        assert!(
            text.contains("</think>\n\nFinal Answer: \\boxed{7}"),
            "{text:?}"
        );
        assert_eq!(out.answer.as_deref(), Some("7"));
        // Thinking and the answer phase are generation; nothing else was.
        assert_eq!(
            out.usage.generated_tokens,
            max as u64 + 1,
            "{:?}",
            out.usage
        );
    }
}

/// Thinks `words` words then closes its block — every time it is asked.
fn early_closer(words: usize) -> Arc<FakeGenerator> {
    thinker(move |_| {
        let thought: Vec<String> = (0..words).map(|i| format!("t{i}")).collect();
        FakeChunk::step(format!(" {} </think> ", thought.join(" ")), -0.1)
    })
}

#[test]
fn wait_is_appended_exactly_when_the_model_stops_before_the_minimum() {
    // Each attempt writes 30 words and the closing tag: 31 tokens.
    let cases = [
        // (minimum, max_waits) -> waits appended
        ((0, 2), 0),  // no minimum: the model's own end stands
        ((31, 2), 0), // its first end is already at the minimum
        ((40, 2), 1), // 31 < 40: one Wait, then 62 >= 40
        ((70, 2), 2), // 31, 62 < 70: two Waits, then 93
        ((70, 1), 1), // out of waits: the second end stands below the minimum
        ((200, 3), 3),
    ];
    for ((min, max_waits), waits) in cases {
        let out = solve(
            json!({"min_thinking_tokens": min, "max_thinking_tokens": 500, "max_waits": max_waits}),
            early_closer(30),
            20_000,
        )
        .expect("search");
        let text = out.text.as_deref().unwrap_or("");
        assert_eq!(
            text.matches("Wait").count(),
            waits,
            "min {min}, max_waits {max_waits}: {text:?}"
        );
        // Every early end was taken back: one closing tag, and "Wait" where each stood.
        assert_eq!(text.matches("</think>").count(), 1, "{text:?}");
        assert_eq!(
            thinking_words(&out)
                .iter()
                .filter(|w| w.starts_with('t'))
                .count(),
            30 * (waits + 1)
        );
        assert_eq!(out.answer.as_deref(), Some("7"), "{text:?}");
    }
}

#[test]
fn a_wait_continuation_computes_only_the_appended_text() {
    let generator = early_closer(30);
    let out = solve(
        json!({"min_thinking_tokens": 70, "max_waits": 2}),
        Arc::clone(&generator),
        20_000,
    )
    .expect("search");
    let u = &out.usage;
    // Two thoughts of 30 words were re-appended after their ends were dropped; had they been
    // computed again, prefill would exceed the prompt by 60 tokens or more. Only the prompt, the
    // forced tags, "Wait"s and delimiter, and a word at each seam are computed.
    let forced = 2 + 2 * 2 + 4 + 2;
    assert!(
        u.prefill_tokens_computed <= u.prompt_tokens + forced,
        "{u:?}"
    );
    assert!(
        u.prefill_tokens_reused >= 60,
        "the thoughts came from the cache: {u:?}"
    );
}

#[test]
fn bad_bounds_and_a_budget_below_the_minimum_are_refused_naming_the_field() {
    let err = solve(
        json!({"min_thinking_tokens": 100, "max_thinking_tokens": 50}),
        early_closer(3),
        10_000,
    )
    .expect_err("min above max");
    assert!(
        matches!(&err, StrategyError::InvalidParameter { field, .. } if field == "min_thinking_tokens"),
        "{err}"
    );
    assert!(
        err.to_string().contains("at most max_thinking_tokens (50)"),
        "{err}"
    );
    let err = solve(json!({"max_thinking_tokens": 0}), early_closer(3), 10_000).expect_err("zero");
    assert!(
        matches!(&err, StrategyError::InvalidParameter { field, .. } if field == "max_thinking_tokens")
    );
    let err = solve(
        json!({"min_thinking_tokens": 500, "max_thinking_tokens": 600}),
        early_closer(3),
        300,
    )
    .expect_err("budget below the minimum");
    assert!(
        matches!(&err, StrategyError::InvalidParameter { field, .. } if field == "budget_tokens"),
        "{err}"
    );
}
