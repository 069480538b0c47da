//! [`FakeGenerator`]: a deterministic, scripted [`Generator`] for algorithm tests and docs.
//!
//! A script maps the state of a sequence (prompt, text so far, seed) to the next chunk of text
//! it "generates", whether the chunk ends the solution, and the logprob of each of its tokens.
//! The fake splits chunks into word tokens, honours stop strings and token caps exactly like
//! the engine (a stop string ends the step after the token that completes it), keeps an
//! unbounded prefix cache (token-level, like the engine's radix index) so that forks share
//! "KV" and only context never seen before is charged as prefill, and counts everything, so tests
//! can assert trees, budgets and prefill accounting exactly. Each `extend` yields to the
//! executor once before it runs, so calls a strategy submits together are in flight together
//! (`max_in_flight` counts how many), as they would be on the engine.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use crate::error::{GeneratorError, Result, StrategyError};
use crate::generator::{
    ChatTemplateKwargs, Cost, ExtendRequest, Extension, Generator, Prompt, SeqHandle, StopKind,
    TokenInfo, Turn,
};
use crate::stop::Stops;

/// What the script sees.
#[derive(Debug, Clone, Copy)]
pub struct FakeState<'a> {
    /// The user message.
    pub prompt: &'a str,
    /// Everything after the prompt so far (generated and appended text).
    pub text: &'a str,
    /// This extension's seed.
    pub seed: u64,
}

/// What the script generates next.
#[derive(Debug, Clone, PartialEq)]
pub struct FakeChunk {
    /// Text to emit (split into word tokens).
    pub text: String,
    /// Whether the solution ends after this chunk.
    pub eos: bool,
    /// Logprob of every token of the chunk.
    pub logprob: f32,
}

impl FakeChunk {
    /// A chunk that does not end the solution.
    pub fn step(text: impl Into<String>, logprob: f32) -> Self {
        Self {
            text: text.into(),
            eos: false,
            logprob,
        }
    }

    /// A chunk that ends the solution.
    pub fn last(text: impl Into<String>, logprob: f32) -> Self {
        Self {
            text: text.into(),
            eos: true,
            logprob,
        }
    }
}

type Script = dyn Fn(FakeState<'_>) -> FakeChunk + Send + Sync;

#[derive(Debug, Clone)]
struct FakeSeq {
    prompt: Arc<str>,
    /// The rendered prompt (system + user).
    rendered: Arc<str>,
    /// Everything after the prompt.
    text: String,
}

impl FakeSeq {
    fn tokens(&self) -> Vec<&str> {
        let mut t = fake_tokens(&self.rendered);
        t.extend(fake_tokens(&self.text));
        t
    }
}

/// Hashes of every token prefix ever computed: an unbounded "radix cache".
fn prefix_hashes(tokens: &[&str]) -> Vec<u64> {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    tokens
        .iter()
        .map(|t| {
            t.hash(&mut h);
            h.finish()
        })
        .collect()
}

/// Counters a test can check.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FakeCounters {
    /// Sum of every call's cost.
    pub cost: Cost,
    /// `extend` calls.
    pub extend_calls: u64,
    /// Sequences extended (over all calls).
    pub sequences_extended: u64,
    /// Live sequences now.
    pub live: usize,
    /// Most `extend` calls in flight at once (above 1: the strategy overlapped its calls).
    pub max_in_flight: usize,
}

#[derive(Default)]
struct Inner {
    seqs: HashMap<u64, FakeSeq>,
    cache: std::collections::HashSet<u64>,
    next: u64,
    counters: FakeCounters,
    in_flight: usize,
}

/// A scripted generator.
pub struct FakeGenerator {
    script: Box<Script>,
    inner: Mutex<Inner>,
    /// What the chat format writes where the assistant's reply begins (an R1-style template's
    /// `<think>\n`); empty by default.
    generation_prompt: String,
}

impl std::fmt::Debug for FakeGenerator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeGenerator")
            .field("counters", &self.counters())
            .finish_non_exhaustive()
    }
}

/// Word tokens: each token is a run of non-space characters with the spaces that follow it.
pub fn fake_tokens(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut in_space = false;
    for (i, ch) in text.char_indices() {
        let space = ch.is_whitespace();
        if in_space && !space {
            out.push(&text[start..i]);
            start = i;
        }
        in_space = space;
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

impl FakeGenerator {
    /// A generator following `script`.
    pub fn new(script: impl Fn(FakeState<'_>) -> FakeChunk + Send + Sync + 'static) -> Self {
        Self {
            script: Box::new(script),
            inner: Mutex::new(Inner::default()),
            generation_prompt: String::new(),
        }
    }

    /// The same generator with a chat format that ends every rendered prompt with `text`, as a
    /// template that opens the thinking block for the model does (`<think>\n`): opened prompts
    /// end with it, and [`Generator::render_chat`] shows it.
    pub fn with_generation_prompt(mut self, text: &str) -> Self {
        self.generation_prompt = text.to_string();
        self
    }

    /// The conversation as this fake's chat format renders it: the system message and every
    /// turn's text, then the generation prompt.
    fn render<'a>(&self, system: Option<&str>, turns: impl Iterator<Item = &'a str>) -> String {
        let turns: Vec<&str> = turns.collect();
        format!(
            "{} {}{}",
            system.unwrap_or(""),
            turns.join(" "),
            self.generation_prompt
        )
    }

    /// Solves "What is a+b?" in three steps ending in `\boxed{a+b}`; every step's tokens have
    /// logprob −0.1. Answer probes (text ending in `\boxed{`) are answered with the sum.
    pub fn arithmetic() -> Self {
        Self::new(|s| {
            let sum = parse_sum(s.prompt).unwrap_or(0);
            if s.text.ends_with("\\boxed{") {
                return FakeChunk::last(format!("{sum}}}"), -0.05);
            }
            match s.text.matches("\n\n").count() {
                0 => FakeChunk::step("We add the two numbers.\n\n", -0.1),
                1 => FakeChunk::step(format!("The sum is {sum}.\n\n"), -0.1),
                _ => FakeChunk::last(format!("The answer is \\boxed{{{sum}}}."), -0.1),
            }
        })
    }

    /// Counters so far.
    pub fn counters(&self) -> FakeCounters {
        let inner = self.lock();
        FakeCounters {
            live: inner.seqs.len(),
            ..inner.counters
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn unknown(seq: SeqHandle) -> StrategyError {
        GeneratorError::UnknownSequence(seq.0).into()
    }

    fn extend_one(&self, inner: &mut Inner, seq: &mut FakeSeq, req: &ExtendRequest) -> Extension {
        let context = seq.tokens();
        let hashes = prefix_hashes(&context);
        let cached = hashes
            .iter()
            .take_while(|h| inner.cache.contains(h))
            .count();
        let prefill_computed = (context.len() - cached) as u64;
        let prefill_reused = cached as u64;
        inner.cache.extend(hashes);
        // Like a model, keep generating (chunk after chunk) until a stop string, the end of
        // the solution or the token cap.
        let stops = Stops::new(&req.stop);
        let mut text = String::new();
        let mut tokens = Vec::new();
        let stop = 'gen: loop {
            let so_far = format!("{}{}", seq.text, text);
            let chunk = (self.script)(FakeState {
                prompt: &seq.prompt,
                text: &so_far,
                seed: req.sampling.seed,
            });
            let pieces = fake_tokens(&chunk.text);
            if pieces.is_empty() {
                break if chunk.eos {
                    StopKind::Eos
                } else {
                    StopKind::Length
                };
            }
            for (i, tok) in pieces.iter().enumerate() {
                if tokens.len() == req.max_tokens {
                    break 'gen StopKind::Length;
                }
                text.push_str(tok);
                tokens.push(TokenInfo {
                    text: (*tok).to_string(),
                    logprob: chunk.logprob,
                    top: top_alternatives(chunk.logprob, req.sampling.top_logprobs),
                });
                if chunk.eos && i + 1 == pieces.len() {
                    break 'gen StopKind::Eos;
                }
                if stops.any_in(&text) {
                    break 'gen StopKind::Stop;
                }
            }
            if tokens.len() == req.max_tokens {
                break StopKind::Length;
            }
        };
        seq.text.push_str(&text);
        // Decoding computed every generated token's KV but the last one's, as in the engine.
        let after = seq.tokens();
        let hashes = prefix_hashes(&after);
        inner
            .cache
            .extend(hashes.iter().take(after.len().saturating_sub(1)).copied());
        let cost = Cost {
            generated: tokens.len() as u64,
            prefill_computed,
            prefill_reused,
            // The fake's prefix cache is exact: nothing is computed twice.
            recomputed: 0,
            tree: prefill_computed + tokens.len() as u64,
        };
        Extension {
            text,
            tokens,
            stop,
            cost,
        }
    }
}

/// The sampled token first, then `k − 1` alternatives sharing the remaining probability mass
/// evenly — so a likely token has a confident (peaked) distribution, as in a real model.
fn top_alternatives(logprob: f32, k: usize) -> Vec<(String, f32)> {
    let k = k.max(1);
    let rest = (1.0 - logprob.exp()).max(1e-6) / (k - 1).max(1) as f32;
    std::iter::once(("tok".to_string(), logprob))
        .chain((1..k).map(|i| (format!("alt{i}"), rest.ln())))
        .collect()
}

/// `a+b` from "What is a+b?".
fn parse_sum(prompt: &str) -> Option<i64> {
    let expr: String = prompt
        .chars()
        .filter(|c| c.is_ascii_digit() || *c == '+')
        .collect();
    let mut parts = expr.split('+').filter(|p| !p.is_empty());
    let a: i64 = parts.next()?.parse().ok()?;
    let b: i64 = parts.next()?.parse().ok()?;
    Some(a + b)
}

#[async_trait]
impl Generator for FakeGenerator {
    async fn open(
        &self,
        prompt: &Prompt,
        _template: &ChatTemplateKwargs,
    ) -> Result<(SeqHandle, usize)> {
        // No template variables: this fake's format has none to change. The whole conversation
        // counts towards the prompt, as a chat template renders it.
        let turns = prompt
            .history
            .iter()
            .map(|t| t.content.as_str())
            .chain(std::iter::once(prompt.user.as_str()));
        let rendered = self.render(prompt.system.as_deref(), turns);
        let seq = FakeSeq {
            prompt: prompt.user.as_str().into(),
            rendered: rendered.as_str().into(),
            text: String::new(),
        };
        let len = seq.tokens().len();
        let mut inner = self.lock();
        inner.next += 1;
        let id = inner.next;
        inner.seqs.insert(id, seq);
        Ok((SeqHandle(id), len))
    }

    fn fork(&self, seq: SeqHandle) -> Result<SeqHandle> {
        let mut inner = self.lock();
        let copy = inner
            .seqs
            .get(&seq.0)
            .cloned()
            .ok_or_else(|| Self::unknown(seq))?;
        inner.next += 1;
        let id = inner.next;
        inner.seqs.insert(id, copy);
        Ok(SeqHandle(id))
    }

    fn render_chat(&self, turns: &[Turn], _template: &ChatTemplateKwargs) -> Result<String> {
        let system = turns
            .first()
            .filter(|t| t.role == "system")
            .map(|t| t.content.as_str());
        let rest = turns
            .iter()
            .skip(usize::from(system.is_some()))
            .map(|t| t.content.as_str());
        Ok(self.render(system, rest))
    }

    fn append(&self, seq: SeqHandle, text: &str) -> Result<usize> {
        let mut inner = self.lock();
        let s = inner
            .seqs
            .get_mut(&seq.0)
            .ok_or_else(|| Self::unknown(seq))?;
        let before = s.tokens().len();
        s.text.push_str(text);
        Ok(s.tokens().len() - before)
    }

    fn prefill_bound(&self, seq: SeqHandle) -> Result<usize> {
        let inner = self.lock();
        let s = inner.seqs.get(&seq.0).ok_or_else(|| Self::unknown(seq))?;
        let context = s.tokens();
        let cached = prefix_hashes(&context)
            .iter()
            .take_while(|h| inner.cache.contains(h))
            .count();
        Ok(context.len() - cached)
    }

    fn prefill_bound_batch(&self, seqs: &[SeqHandle]) -> Result<usize> {
        // Sequences of one batch are extended in order: a prefix the first computes is cached
        // for the rest.
        let inner = self.lock();
        let mut seen: std::collections::HashSet<u64> = std::collections::HashSet::new();
        let mut total = 0;
        for seq in seqs {
            let s = inner.seqs.get(&seq.0).ok_or_else(|| Self::unknown(*seq))?;
            let hashes = prefix_hashes(&s.tokens());
            let cached = hashes
                .iter()
                .take_while(|h| inner.cache.contains(h) || seen.contains(h))
                .count();
            total += hashes.len() - cached;
            seen.extend(hashes);
        }
        Ok(total)
    }

    async fn extend(&self, batch: &[ExtendRequest]) -> Result<Vec<Extension>> {
        // A call takes a turn of the executor before it runs, as an engine call waits for the
        // next forward pass: calls a strategy submits together are in flight together.
        {
            let mut inner = self.lock();
            inner.in_flight += 1;
            inner.counters.max_in_flight = inner.counters.max_in_flight.max(inner.in_flight);
        }
        YieldOnce(false).await;
        let mut inner = self.lock();
        inner.in_flight -= 1;
        let mut out = Vec::with_capacity(batch.len());
        for req in batch {
            let mut seq = inner
                .seqs
                .get(&req.seq.0)
                .cloned()
                .ok_or_else(|| Self::unknown(req.seq))?;
            let ext = self.extend_one(&mut inner, &mut seq, req);
            inner.counters.cost += ext.cost;
            inner.seqs.insert(req.seq.0, seq);
            out.push(ext);
        }
        inner.counters.extend_calls += 1;
        inner.counters.sequences_extended += batch.len() as u64;
        Ok(out)
    }

    fn release(&self, seq: SeqHandle) {
        self.lock().seqs.remove(&seq.0);
    }
}

/// A future that is pending once (waking itself) and then ready.
struct YieldOnce(bool);

impl std::future::Future for YieldOnce {
    type Output = ();
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if self.0 {
            std::task::Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_keep_trailing_space() {
        assert_eq!(fake_tokens("a bc\n\nd"), vec!["a ", "bc\n\n", "d"]);
        assert!(fake_tokens("").is_empty());
    }
}
