//! A chat reply's thinking block, split off its `content`: returned as `reasoning` (vLLM's
//! field) and `reasoning_content` (DeepSeek's), whole or as it streams, and counted in
//! `usage.completion_tokens_details.reasoning_tokens`.
//!
//! The request's [`ReasoningParser`] (its `reasoning_parser`, else the server's
//! `--reasoning-parser`; by default `auto`, the tags the model's chat template writes; `none`
//! turns splitting off) knows the tags; whether the reply starts inside a block is read from the
//! rendered prompt (a template that opens `<think>` for the model). A model that writes no
//! block gets its reply as `content`, untouched. Text completions are never split. Only the
//! splitting lives here; which parser a server runs is the CLI's choice.

use ponder_strategies::TokenInfo;
use ponder_verifiers::reasoning::{Delta, Parsed, ReasoningParser, ReasoningStream};

/// One chat reply's split, whole.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Split {
    /// What goes in `content`.
    pub(crate) content: String,
    /// What goes in `reasoning` / `reasoning_content` (`None`: the reply has no block).
    pub(crate) reasoning: Option<String>,
}

/// Splits a whole reply (`opened`: its prompt left a block open).
pub(crate) fn split(parser: Option<&ReasoningParser>, text: &str, opened: bool) -> Split {
    let Some(parser) = parser else {
        return Split {
            content: text.to_string(),
            reasoning: None,
        };
    };
    let Parsed {
        reasoning,
        content,
        thought,
        ..
    } = parser.split(text, opened);
    Split {
        content,
        reasoning: thought.then_some(reasoning),
    }
}

/// A search's chosen text, split: its prompt is the strategy's, not rendered here, so a text
/// that closes a block it never opened (a template that opened it in the prompt) is read as
/// starting inside one, as vLLM's DeepSeek-R1 parser reads it.
pub(crate) fn split_searched(parser: Option<&ReasoningParser>, text: &str) -> Split {
    let opened =
        parser.is_some_and(|p| !text.trim_start().starts_with(p.start()) && text.contains(p.end()));
    split(parser, text, opened)
}

/// How many of a reply's `tokens` are thinking: every token up to the one that closes the
/// block (all of them while it is unclosed). Counted from each token's text where the
/// generator reports it (the tokens' texts make up `text`); else in proportion to the
/// thinking's share of the text's bytes.
pub(crate) fn reasoning_tokens(
    parser: Option<&ReasoningParser>,
    tokens: &[TokenInfo],
    text: &str,
    opened: bool,
) -> u64 {
    let Some(parser) = parser else { return 0 };
    let whole: usize = tokens.iter().map(|t| t.text.len()).sum();
    if whole == text.len() && tokens.iter().all(|t| !t.text.is_empty()) {
        let mut stream = parser.stream(opened);
        let mut thinking = 0u64;
        for t in tokens {
            let before = stream.closed();
            let _ = stream.push(&t.text);
            if !before && stream.thought() {
                thinking += 1;
            }
        }
        return thinking;
    }
    let parsed = parser.split(text, opened);
    if !parsed.thought || text.is_empty() {
        return 0;
    }
    let share = (text.len() - parsed.content.len()) as f64 / text.len() as f64;
    (share * tokens.len() as f64).round() as u64
}

/// One streamed chat choice's splitter: `None` where nothing is split.
#[derive(Debug)]
pub(crate) struct StreamSplit(Option<ReasoningStream>);

impl StreamSplit {
    pub(crate) fn new(parser: Option<&ReasoningParser>, opened: bool) -> Self {
        Self(parser.map(|p| p.stream(opened)))
    }

    /// The next piece of reply text, split.
    pub(crate) fn push(&mut self, text: &str) -> Delta {
        match &mut self.0 {
            Some(stream) => stream.push(text),
            None => Delta {
                reasoning: String::new(),
                content: text.to_string(),
            },
        }
    }

    /// The reply has ended: what was held back.
    pub(crate) fn finish(&mut self) -> Delta {
        match &mut self.0 {
            Some(stream) => stream.finish(),
            None => Delta::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(texts: &[&str]) -> Vec<TokenInfo> {
        texts
            .iter()
            .map(|t| TokenInfo {
                text: (*t).to_string(),
                logprob: -0.1,
                top: Vec::new(),
            })
            .collect()
    }

    #[test]
    fn thinking_tokens_are_those_up_to_the_closing_tag() {
        let p = ReasoningParser::think();
        let t = tokens(&["<think>", "\n", "3+4", "</think>", "\n\n", "7"]);
        let text: String = t.iter().map(|t| t.text.as_str()).collect();
        assert_eq!(reasoning_tokens(Some(&p), &t, &text, false), 4);
        // Opened in the prompt: the reply's first token is already thinking.
        let t = tokens(&["3+4", "</", "think>", "7"]);
        assert_eq!(reasoning_tokens(Some(&p), &t, "3+4</think>7", true), 3);
        // No block, or no parser: none.
        assert_eq!(reasoning_tokens(Some(&p), &t, "3+4</think>7", false), 0);
        assert_eq!(reasoning_tokens(None, &t, "3+4</think>7", true), 0);
    }

    #[test]
    fn without_token_texts_the_count_follows_the_thinkings_share() {
        let p = ReasoningParser::think();
        let t = tokens(&["", "", "", ""]);
        // 17 of its 18 bytes are the block.
        assert_eq!(
            reasoning_tokens(Some(&p), &t, "<think>ab</think>c", false),
            4
        );
    }

    #[test]
    fn a_searched_text_that_only_closes_a_block_started_inside_one() {
        let p = ReasoningParser::think();
        let s = split_searched(Some(&p), "adding: 7</think>\n\n\\boxed{7}");
        assert_eq!(s.reasoning.as_deref(), Some("adding: 7"));
        assert_eq!(s.content, "\\boxed{7}");
        let s = split_searched(Some(&p), "The answer is 7.");
        assert_eq!(
            (s.reasoning, s.content.as_str()),
            (None, "The answer is 7.")
        );
    }
}
