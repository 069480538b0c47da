//! Sequential scaling against the scripted `FakeGenerator`: budget forcing (s1) never thinks
//! past its maximum and then answers after the forced delimiter; it appends "Wait" exactly when
//! the model ends its thinking before the minimum (at most `max_waits` times), computing only
//! the appended text again; with answer probes, the thinking stops once `probe_patience` probes
//! in a row agree (never before the minimum) and the probed answer is written with no answer
//! phase, while probes that never agree leave the maximum in place; bad bounds and a budget
//! below the minimum are refused naming the field.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use ponder_strategies::fake::{FakeChunk, FakeGenerator, FakeState};
use ponder_strategies::{Outcome, StrategyError};
use serde_json::json;

fn solve(
    params: serde_json::Value,
    generator: Arc<FakeGenerator>,
    budget: u64,
) -> Result<Outcome, StrategyError> {
    common::solve(
        "budget_forcing",
        params,
        generator,
        "What is 3+4?",
        budget,
        1,
    )
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

/// A model that thinks forever, one word per token; asked for its answer (Dynasor-CoT's probe,
/// which ends in `\boxed{`) after `w` thinking words it says `answer(w)`.
fn probed(answer: impl Fn(usize) -> u32 + Send + Sync + 'static) -> Arc<FakeGenerator> {
    Arc::new(FakeGenerator::new(move |s: FakeState<'_>| {
        if s.text.ends_with("\\boxed{") {
            let thought = s.text.split_once("<think>").map_or(0, |(_, t)| {
                t.split_whitespace().filter(|w| *w == "hmm").count()
            });
            FakeChunk::step(format!("{}}}", answer(thought)), -0.1)
        } else if s.text.ends_with("Final Answer: ") {
            FakeChunk::last("\\boxed{7}", -0.1)
        } else {
            FakeChunk::step("hmm ", -0.2)
        }
    }))
}

/// (probe_every, probe_patience, min_thinking_tokens, the answer after w words, thinking words
/// at the exit).
type Case = (
    usize,
    usize,
    usize,
    Box<dyn Fn(usize) -> u32 + Send + Sync>,
    usize,
);

#[test]
fn thinking_stops_once_patience_probes_agree_and_not_before_the_minimum() {
    // (probe_every, patience, min, the answer after w words) -> thinking words at the exit.
    let settles_at = |from: usize| move |w: usize| if w >= from { 7 } else { w as u32 };
    let cases: [Case; 4] = [
        // Every probe agrees: three probes, at 5, 10 and 15 words.
        (5, 3, 0, Box::new(|_| 7), 15),
        // Probes only from the minimum on: at 15, 20, 25.
        (5, 3, 12, Box::new(|_| 7), 25),
        // Answers move until 20 words, then hold: agreeing probes at 20 and 25.
        (5, 2, 0, Box::new(settles_at(20)), 25),
        (8, 1, 0, Box::new(|_| 7), 8),
    ];
    for (every, patience, min, answer, exit) in cases {
        let out = solve(
            json!({"max_thinking_tokens": 100, "min_thinking_tokens": min, "answer_tokens": 8,
                   "probe_every": every, "probe_patience": patience}),
            probed(answer),
            10_000,
        )
        .expect("search");
        assert_eq!(
            thinking_words(&out).len(),
            exit,
            "every {every}, patience {patience}, min {min}: {:?}",
            out.text
        );
        let text = out.text.as_deref().unwrap_or("");
        assert!(
            text.ends_with("</think>\n\nFinal Answer: \\boxed{7}"),
            "{text:?}"
        );
        assert_eq!(out.answer.as_deref(), Some("7"));
        // Only the thinking and the probes were generated (the answer is the probes', no answer
        // phase): a probe every `every` words from the minimum on, each one token ("7}") and
        // counted as probe tokens too.
        let first = every.max(min.div_ceil(every) * every);
        let probes = ((exit - first) / every + 1) as u64;
        assert_eq!(
            out.usage.generated_tokens,
            exit as u64 + probes,
            "{probes} probes: {:?}",
            out.usage
        );
        assert!(out.usage.probe_tokens >= probes, "{:?}", out.usage);
    }
}

#[test]
fn probes_that_never_agree_leave_the_maximum_and_the_answer_phase_in_place() {
    // Each probe answers the number of words so far: no two agree.
    let out = solve(
        json!({"max_thinking_tokens": 40, "answer_tokens": 8, "probe_every": 5,
               "probe_patience": 2}),
        probed(|w| w as u32),
        10_000,
    )
    .expect("search");
    assert_eq!(thinking_words(&out).len(), 40);
    assert_eq!(
        out.answer.as_deref(),
        Some("7"),
        "the answer phase's: {:?}",
        out.text
    );
    // Thinking, the answer phase's one token and seven one-token probes (at 5..35 words; none
    // at the maximum, where the block closes anyway).
    assert_eq!(out.usage.generated_tokens, 40 + 1 + 7, "{:?}", out.usage);
    let err = solve(
        json!({"probe_every": 5, "probe_patience": 0}),
        probed(|_| 7),
        10_000,
    )
    .expect_err("no patience");
    assert!(
        matches!(&err, StrategyError::InvalidParameter { field, .. } if field == "probe_patience"),
        "{err}"
    );
}

#[test]
fn a_template_that_opens_the_block_gets_no_second_opening_tag() {
    let template = |g: FakeGenerator| Arc::new(g.with_generation_prompt("<think>\n"));
    // The model thinks three words and closes the block the template opened.
    let generator = template(FakeGenerator::new(|s: FakeState<'_>| {
        if s.text.ends_with("Final Answer: ") {
            FakeChunk::last("\\boxed{7}", -0.1)
        } else {
            FakeChunk::step("a b c </think> ", -0.1)
        }
    }));
    let out = solve(json!({"max_thinking_tokens": 20}), generator, 10_000).expect("search");
    let text = out.text.as_deref().unwrap_or("");
    assert!(!text.contains("<think>"), "a second opening tag: {text:?}");
    assert_eq!(text.matches("</think>").count(), 1, "{text:?}");
    assert!(text.starts_with("a b c"), "{text:?}");
    assert_eq!(out.answer.as_deref(), Some("7"));
    // Without such a template the strategy opens the block itself.
    let out = solve(
        json!({"max_thinking_tokens": 20}),
        thinker(|_| FakeChunk::step("a b c </think> ", -0.1)),
        10_000,
    )
    .expect("search");
    assert!(out.text.as_deref().unwrap_or("").starts_with("<think>"));
}
