//! Thinking blocks: where a model's thinking ends and its answer begins.
//!
//! Thinking models (DeepSeek-R1 and its distills, Qwen3 in thinking mode) write their
//! reasoning between two tags, `<think>` and `</think>`, and their answer after the closing
//! one. A [`ReasoningParser`] knows a family's two tags and splits an output into the thinking
//! and the content, whole ([`ReasoningParser::split`]) or as it streams
//! ([`ReasoningStream`]: a tag cut across two chunks is held back until it is whole).
//!
//! The cases real chat templates make:
//! - the template opens the block in the prompt (R1's, Qwen3-Thinking's): the output has only
//!   the closing tag, so everything before it is thinking. Whether a prompt left a block open is
//!   read from the rendered prompt itself ([`ReasoningParser::opens_in`]), not guessed per
//!   family;
//! - the template writes an empty, closed block (Qwen3 with `enable_thinking: false`): the
//!   prompt closes it, the output is all content;
//! - the model opens the block itself: a block is only one that starts the output (after
//!   whitespace); a tag further on is content, as vLLM's parsers read it;
//! - the output ends inside the block (cut at a length limit): all of it is thinking and there
//!   is no content ([`Parsed::closed`] is false).
//!
//! Whitespace between the closing tag and the answer is dropped from the content; the thinking
//! is returned as written. Pure text: which parser a model gets is the server's choice
//! (`--reasoning-parser`, or a request's `reasoning_parser`: a [`ReasoningChoice`]), and what a
//! strategy does with a thinking budget is the strategy's.
//!
//! `auto` reads the tags from the model's chat template ([`ReasoningParser::from_template`]):
//! the first of the families' tag pairs ([`TEMPLATE_TAGS`]) whose two tags the template writes
//! (Qwen3's and R1's `<think>`/`</think>`, Seed-OSS's `<seed:think>`, Kimi's `◁think▷`);
//! a template with none of them, or no template, gets `<think>`/`</think>`.

use thiserror::Error;

/// Every name a reasoning-parser choice takes: `auto` (the chat template's tags), the parsers
/// (vLLM's names for the same families) and `none`.
pub const PARSER_NAMES: [&str; 5] = ["auto", "think", "deepseek_r1", "qwen3", "none"];

/// The thinking tags of the families `auto` knows, most specific first (a template is matched
/// against them in this order).
pub const TEMPLATE_TAGS: [(&str, &str); 3] = [
    ("<seed:think>", "</seed:think>"),
    ("◁think▷", "◁/think▷"),
    ("<think>", "</think>"),
];

/// A parser name or tag pair that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ReasoningParserError {
    /// A name that is not one of [`PARSER_NAMES`].
    #[error("unknown reasoning parser `{0}`: expected one of {names}", names = PARSER_NAMES.join(", "))]
    Unknown(String),
    /// A tag pair with an empty tag, or the same tag twice.
    #[error("reasoning tags must be two different non-empty strings, got `{start}` and `{end}`")]
    BadTags {
        /// The opening tag given.
        start: String,
        /// The closing tag given.
        end: String,
    },
}

/// A model family's thinking tags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReasoningParser {
    start: String,
    end: String,
}

impl Default for ReasoningParser {
    fn default() -> Self {
        Self::think()
    }
}

impl ReasoningParser {
    /// `<think>` … `</think>`, as DeepSeek-R1 and Qwen3 write it.
    pub fn think() -> Self {
        Self {
            start: "<think>".into(),
            end: "</think>".into(),
        }
    }

    /// A parser with its own tags (both non-empty and different).
    pub fn with_tags(
        start: impl Into<String>,
        end: impl Into<String>,
    ) -> Result<Self, ReasoningParserError> {
        let (start, end) = (start.into(), end.into());
        if start.is_empty() || end.is_empty() || start == end {
            return Err(ReasoningParserError::BadTags { start, end });
        }
        Ok(Self { start, end })
    }

    /// The parser `name` stands for: `Some` for a parser's name, `None` for `none` (thinking is
    /// not split off). `auto` needs a template: see [`ReasoningChoice::named`].
    pub fn named(name: &str) -> Result<Option<Self>, ReasoningParserError> {
        match ReasoningChoice::named(name)? {
            ReasoningChoice::Parser(p) => Ok(Some(p)),
            ReasoningChoice::Off => Ok(None),
            ReasoningChoice::Auto => Err(ReasoningParserError::Unknown(name.into())),
        }
    }

    /// The tags a chat template's source writes: the first pair of [`TEMPLATE_TAGS`] with both
    /// tags in it; `None` when it writes none of them.
    pub fn from_template(source: &str) -> Option<Self> {
        TEMPLATE_TAGS
            .iter()
            .find(|(start, end)| source.contains(start) && source.contains(end))
            .map(|(start, end)| Self {
                start: (*start).into(),
                end: (*end).into(),
            })
    }

    /// The opening tag.
    pub fn start(&self) -> &str {
        &self.start
    }

    /// The closing tag.
    pub fn end(&self) -> &str {
        &self.end
    }

    /// Whether `prompt` (a rendered prompt, up to where the model writes) leaves a thinking
    /// block open: its last opening tag comes after its last closing tag. Then the output
    /// starts inside the block.
    pub fn opens_in(&self, prompt: &str) -> bool {
        match (prompt.rfind(&self.start), prompt.rfind(&self.end)) {
            (Some(open), Some(close)) => open > close,
            (Some(_), None) => true,
            (None, _) => false,
        }
    }

    /// Splits a whole output; `opened`: the output starts inside a block
    /// ([`ReasoningParser::opens_in`] of its prompt). The same as streaming it in any chunks.
    pub fn split(&self, text: &str, opened: bool) -> Parsed {
        let mut stream = self.stream(opened);
        let mut parsed = Parsed::default();
        for delta in [stream.push(text), stream.finish()] {
            parsed.reasoning.push_str(&delta.reasoning);
            parsed.content.push_str(&delta.content);
        }
        parsed.thought = stream.thought();
        parsed.closed = stream.closed();
        parsed
    }

    /// A splitter for one streamed output (see [`ReasoningParser::split`] for `opened`).
    pub fn stream(&self, opened: bool) -> ReasoningStream {
        ReasoningStream {
            parser: self.clone(),
            state: if opened {
                State::Thinking
            } else {
                State::Start
            },
            held: String::new(),
            thought: opened,
        }
    }
}

/// Which parser a server (`--reasoning-parser`) or a request (`reasoning_parser`) asks for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ReasoningChoice {
    /// The model's chat template's tags ([`ReasoningParser::from_template`]), else `<think>`.
    #[default]
    Auto,
    /// This parser.
    Parser(ReasoningParser),
    /// No splitting: replies stay whole.
    Off,
}

impl ReasoningChoice {
    /// The choice `name` stands for, one of [`PARSER_NAMES`].
    pub fn named(name: &str) -> Result<Self, ReasoningParserError> {
        match name {
            "auto" => Ok(Self::Auto),
            "think" | "deepseek_r1" | "qwen3" => Ok(Self::Parser(ReasoningParser::think())),
            "none" => Ok(Self::Off),
            other => Err(ReasoningParserError::Unknown(other.into())),
        }
    }

    /// The parser this choice is for a model whose chat template's source is `template`
    /// (`None`: no template known); `None` for [`ReasoningChoice::Off`].
    pub fn resolve(&self, template: Option<&str>) -> Option<ReasoningParser> {
        match self {
            Self::Auto => Some(
                template
                    .and_then(ReasoningParser::from_template)
                    .unwrap_or_default(),
            ),
            Self::Parser(p) => Some(p.clone()),
            Self::Off => None,
        }
    }
}

impl From<Option<ReasoningParser>> for ReasoningChoice {
    /// A parser, or `None` for no splitting.
    fn from(parser: Option<ReasoningParser>) -> Self {
        parser.map_or(Self::Off, Self::Parser)
    }
}

/// An output split in two.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parsed {
    /// The thinking, as written (without the tags).
    pub reasoning: String,
    /// The answer after the block (leading whitespace dropped), or the whole output when it
    /// has no block.
    pub content: String,
    /// Whether the output had a thinking block (opened in the prompt or by the model), even
    /// an empty one.
    pub thought: bool,
    /// Whether the block was closed (false: the output ended while thinking, or had none).
    pub closed: bool,
}

/// What one streamed chunk adds to each side.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Delta {
    /// New thinking text.
    pub reasoning: String,
    /// New content text.
    pub content: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Nothing but whitespace seen yet, no block opened in the prompt.
    Start,
    /// Inside the block.
    Thinking,
    /// After the closing tag, before the first non-whitespace character.
    AfterBlock,
    /// Writing content.
    Content,
}

/// Splits one output as it streams ([`ReasoningParser::stream`]).
#[derive(Debug, Clone)]
pub struct ReasoningStream {
    parser: ReasoningParser,
    state: State,
    /// Text not yet given out: whitespace before the output's first word, or what may be the
    /// start of a tag.
    held: String,
    thought: bool,
}

impl ReasoningStream {
    /// Reads the next chunk; returns what of it (and of earlier held text) is now certain.
    pub fn push(&mut self, text: &str) -> Delta {
        self.held.push_str(text);
        let mut out = Delta::default();
        loop {
            match self.state {
                State::Start => {
                    let rest = self.held.trim_start();
                    if rest.is_empty() {
                        return out;
                    }
                    let start = self.parser.start.as_str();
                    if let Some(inside) = rest.strip_prefix(start) {
                        self.held = inside.to_string();
                        self.state = State::Thinking;
                        self.thought = true;
                    } else if start.starts_with(rest) {
                        // Maybe the opening tag, cut short: wait for more.
                        return out;
                    } else {
                        self.state = State::Content;
                    }
                }
                State::Thinking => {
                    let end = self.parser.end.as_str();
                    if let Some(at) = self.held.find(end) {
                        out.reasoning.push_str(&self.held[..at]);
                        self.held = self.held[at + end.len()..].to_string();
                        self.state = State::AfterBlock;
                    } else {
                        let keep = partial_tag_suffix(&self.held, end);
                        let certain = self.held.len() - keep;
                        out.reasoning.push_str(&self.held[..certain]);
                        self.held.drain(..certain);
                        return out;
                    }
                }
                State::AfterBlock => {
                    let rest = self.held.trim_start();
                    if rest.is_empty() {
                        self.held.clear();
                        return out;
                    }
                    self.held = rest.to_string();
                    self.state = State::Content;
                }
                State::Content => {
                    out.content.push_str(&self.held);
                    self.held.clear();
                    return out;
                }
            }
        }
    }

    /// The output has ended: gives out what was held (an unfinished tag is text).
    pub fn finish(&mut self) -> Delta {
        let held = std::mem::take(&mut self.held);
        match self.state {
            State::Start | State::Content => Delta {
                reasoning: String::new(),
                content: held,
            },
            State::Thinking => Delta {
                reasoning: held,
                content: String::new(),
            },
            State::AfterBlock => Delta::default(),
        }
    }

    /// Whether the output is (or was) inside a thinking block.
    pub fn thought(&self) -> bool {
        self.thought
    }

    /// Whether the block has been closed.
    pub fn closed(&self) -> bool {
        matches!(self.state, State::AfterBlock | State::Content) && self.thought
    }

    /// Whether the output is inside its thinking block now.
    pub fn thinking(&self) -> bool {
        self.state == State::Thinking
    }
}

/// The length of the longest end of `text` that is a proper beginning of `tag` (cut at a
/// character boundary of `text`).
fn partial_tag_suffix(text: &str, tag: &str) -> usize {
    let longest = tag.len().saturating_sub(1).min(text.len());
    (1..=longest)
        .rev()
        .find(|&n| {
            text.is_char_boundary(text.len() - n) && tag.starts_with(&text[text.len() - n..])
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(text: &str, opened: bool) -> (String, String, bool, bool) {
        let p = ReasoningParser::think().split(text, opened);
        (p.reasoning, p.content, p.thought, p.closed)
    }

    #[test]
    fn a_block_the_model_opens_is_thinking_and_the_rest_content() {
        assert_eq!(
            split("<think>\n2+2 is 4.\n</think>\n\nThe answer is 4.", false),
            (
                "\n2+2 is 4.\n".into(),
                "The answer is 4.".into(),
                true,
                true
            )
        );
        // Whitespace before the block is not content.
        assert_eq!(split("  \n<think>x</think>y", false).1, "y");
    }

    #[test]
    fn a_block_the_template_opened_ends_at_the_closing_tag() {
        let p = ReasoningParser::think();
        let prompt = "<|im_start|>assistant\n<think>\n";
        assert!(p.opens_in(prompt));
        assert_eq!(
            split("Let me see. 4.</think>\n\n4", p.opens_in(prompt)),
            ("Let me see. 4.".into(), "4".into(), true, true)
        );
    }

    #[test]
    fn an_empty_block_in_the_prompt_leaves_the_output_all_content() {
        // Qwen3 with enable_thinking: false writes `<think>\n\n</think>\n\n` itself.
        let p = ReasoningParser::think();
        let prompt = "<|im_start|>assistant\n<think>\n\n</think>\n\n";
        assert!(!p.opens_in(prompt));
        assert_eq!(
            split("Paris.", p.opens_in(prompt)),
            (String::new(), "Paris.".into(), false, false)
        );
        // An empty block the model writes is a block.
        assert_eq!(
            split("<think>\n\n</think>\n\nParis.", false),
            ("\n\n".into(), "Paris.".into(), true, true)
        );
    }

    #[test]
    fn an_output_cut_while_thinking_has_no_content() {
        assert_eq!(
            split("<think>so far 12", false),
            ("so far 12".into(), String::new(), true, false)
        );
        assert_eq!(
            split("so far 12</thi", true),
            ("so far 12</thi".into(), String::new(), true, false)
        );
    }

    #[test]
    fn a_tag_after_the_start_is_content_and_no_tag_is_all_content() {
        assert_eq!(
            split("Answer: 4 <think>no</think>", false),
            (
                String::new(),
                "Answer: 4 <think>no</think>".into(),
                false,
                false
            )
        );
        assert_eq!(split(" 4 ", false).1, " 4 ");
        assert_eq!(split("<thin", false).1, "<thin");
    }

    #[test]
    fn a_tag_cut_across_chunks_is_held_until_whole() {
        let mut s = ReasoningParser::think().stream(false);
        assert_eq!(s.push("<thi"), Delta::default());
        assert_eq!(
            s.push("nk>ab</"),
            Delta {
                reasoning: "ab".into(),
                content: String::new()
            }
        );
        assert!(s.thinking());
        assert_eq!(s.push("thi"), Delta::default());
        assert_eq!(s.push("nk>\n"), Delta::default());
        assert!(s.closed());
        assert_eq!(
            s.push("\n4"),
            Delta {
                reasoning: String::new(),
                content: "4".into()
            }
        );
        assert_eq!(s.finish(), Delta::default());
    }

    #[test]
    fn multibyte_text_next_to_a_partial_tag_is_not_cut() {
        let mut s = ReasoningParser::with_tags("«", "»")
            .map(|p| p.stream(true))
            .ok();
        let s = s.as_mut().map(|s| (s.push("é«é"), s.push("»ü")));
        assert_eq!(
            s,
            Some((
                Delta {
                    reasoning: "é«é".into(),
                    content: String::new()
                },
                Delta {
                    reasoning: String::new(),
                    content: "ü".into()
                }
            ))
        );
    }

    #[test]
    fn names_and_tags_are_checked() {
        assert_eq!(
            ReasoningParser::named("qwen3"),
            Ok(Some(ReasoningParser::think()))
        );
        assert_eq!(ReasoningParser::named("none"), Ok(None));
        assert!(matches!(
            ReasoningParser::named("r1"),
            Err(ReasoningParserError::Unknown(n)) if n == "r1"
        ));
        let unknown = ReasoningChoice::named("r1").err().map(|e| e.to_string());
        assert_eq!(
            unknown.as_deref(),
            Some("unknown reasoning parser `r1`: expected one of auto, think, deepseek_r1, qwen3, none")
        );
        assert_eq!(ReasoningChoice::named("auto"), Ok(ReasoningChoice::Auto));
        assert!(ReasoningParser::with_tags("", "</t>").is_err());
        assert!(ReasoningParser::with_tags("<t>", "<t>").is_err());
    }

    #[test]
    fn auto_takes_the_tags_the_template_writes_and_else_think() {
        let qwen3 =
            "{%- if enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}";
        let seed = "{{ '<seed:think>' + m.reasoning_content + '</seed:think>' }}";
        let kimi = "{{ '◁think▷' + r + '◁/think▷' }}";
        let chatml = "{{ '<|im_start|>assistant\\n' }}";
        let tags = |t: Option<&str>| {
            ReasoningChoice::Auto
                .resolve(t)
                .map(|p| (p.start().to_string(), p.end().to_string()))
        };
        let pair = |a: &str, b: &str| Some((a.to_string(), b.to_string()));
        assert_eq!(tags(Some(qwen3)), pair("<think>", "</think>"));
        assert_eq!(tags(Some(seed)), pair("<seed:think>", "</seed:think>"));
        assert_eq!(tags(Some(kimi)), pair("◁think▷", "◁/think▷"));
        // No tags in the template, or no template: today's default.
        assert_eq!(tags(Some(chatml)), pair("<think>", "</think>"));
        assert_eq!(tags(None), pair("<think>", "</think>"));
        // A template that writes only one of a pair does not choose it.
        assert_eq!(ReasoningParser::from_template("{{ '</think>' }}"), None);
        assert_eq!(ReasoningChoice::Off.resolve(Some(qwen3)), None);
        assert_eq!(
            ReasoningChoice::from(Some(ReasoningParser::think())).resolve(Some(seed)),
            Some(ReasoningParser::think())
        );
    }
}
