//! One plain (strategy-less) request's choices, folded from the generator's pieces as they
//! arrive: each choice's text and tokens, what of them has been sent (holding back what may
//! still be the start of a stop string), its finish, and its thinking-token count. The request
//! path itself (`direct`) is in `generate.rs`.

use std::time::Instant;

use ponder_strategies::{Piece, StopKind, Stops, TokenInfo};
use ponder_verifiers::ReasoningParser;

use super::metrics::Metrics;
use super::responses::ChoiceFinish;
use super::sse::ChoiceOut;
use super::thinking;
use super::types::Logprobs;

/// One choice as its pieces arrive: its text and tokens so far (the generator's text keeps a
/// stop string; the reply does not), what of them has been sent, and why it ended.
#[derive(Debug, Default)]
pub(super) struct Choice {
    pub(super) text: String,
    pub(super) tokens: Vec<TokenInfo>,
    sent_bytes: usize,
    pub(super) sent_tokens: usize,
    /// The text length of the tokens whose logprobs were sent (where the next one starts).
    pub(super) sent_token_bytes: usize,
    pub(super) finish: Option<StopKind>,
}

impl Choice {
    /// The reply's text: up to the first stop string (which OpenAI does not return), and that
    /// stop string.
    pub(super) fn cut<'a>(&'a self, stops: &'a Stops) -> (&'a str, Option<&'a str>) {
        match stops.first_in(&self.text) {
            Some((at, s)) => (self.text.get(..at).unwrap_or_default(), Some(s)),
            None => (&self.text, None),
        }
    }

    pub(super) fn finish_reason(&self) -> Option<ChoiceFinish> {
        self.finish.map(|f| match f {
            StopKind::Length => ChoiceFinish::Length,
            StopKind::Stop | StopKind::Eos => ChoiceFinish::Stop,
        })
    }

    pub(super) fn out(&self, stops: &Stops, logprobs: Option<Logprobs>) -> ChoiceOut {
        let (text, stop) = self.cut(stops);
        ChoiceOut {
            text: text.to_string(),
            logprobs,
            finish: self.finish_reason().unwrap_or(ChoiceFinish::Stop),
            stop_reason: stop.map(str::to_string),
            reasoning: None,
        }
    }
}

/// A plain request's choices, folded from the generator's pieces.
pub(super) struct PlainRun {
    pub(super) choices: Vec<Choice>,
    pub(super) stops: Stops,
    first_token: bool,
}

impl PlainRun {
    pub(super) fn new(n: usize, stops: Stops) -> Self {
        Self {
            choices: (0..n).map(|_| Choice::default()).collect(),
            stops,
            first_token: true,
        }
    }

    /// Adds `piece` to its choice (timing the request's first token); returns the choice.
    pub(super) fn push(
        &mut self,
        piece: Piece,
        metrics: &Metrics,
        start: Instant,
    ) -> Option<usize> {
        if self.first_token && !piece.tokens.is_empty() {
            self.first_token = false;
            metrics.ttft(start.elapsed());
        }
        let choice = self.choices.get_mut(piece.index)?;
        choice.text.push_str(&piece.text);
        choice.tokens.extend(piece.tokens);
        choice.finish = piece.finish.or(choice.finish);
        Some(piece.index)
    }

    /// Text of choice `i` not yet sent; while it runs, holds back what could still turn out to
    /// be the start of a stop string.
    pub(super) fn delta(&mut self, i: usize) -> Option<String> {
        let choice = self.choices.get_mut(i)?;
        let (text, stop) = choice.cut(&self.stops);
        let mut end = text.len();
        if choice.finish.is_none() && stop.is_none() {
            end = end.saturating_sub(self.stops.hold_back());
            while end > 0 && !text.is_char_boundary(end) {
                end -= 1;
            }
        }
        if end <= choice.sent_bytes {
            return None;
        }
        let delta = text.get(choice.sent_bytes..end).map(str::to_string);
        choice.sent_bytes = end;
        delta
    }

    /// Thinking tokens over every choice ([`thinking::reasoning_tokens`]).
    pub(super) fn reasoning_tokens(&self, parser: Option<&ReasoningParser>, opened: bool) -> u64 {
        self.choices
            .iter()
            .map(|c| thinking::reasoning_tokens(parser, &c.tokens, &c.text, opened))
            .sum()
    }

    /// Counts every choice by its finish reason, and the request's end-to-end latency.
    pub(super) fn finished(
        &self,
        metrics: &Metrics,
        prompt_tokens: u64,
        completion: &[u64],
        start: Instant,
    ) {
        for (c, tokens) in self.choices.iter().zip(completion) {
            let reason = c.finish_reason().map_or("abort", ChoiceFinish::as_str);
            metrics.finished(reason, prompt_tokens, *tokens);
        }
        metrics.e2e(start.elapsed());
    }
}
