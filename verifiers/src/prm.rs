//! The process-reward-model protocol, the part that needs no model: cutting a solution into
//! steps, laying a problem and its steps out the way a PRM was trained to read them, reading a
//! judge's "Yes"/"No" from its top alternatives, and deciding when a solution has no answer.
//!
//! A [`PrmFormat`] is a prompt prefix (with the problem in it), then every step followed by a
//! step tag; the PRM is read at the last token of each tag. The presets follow the published
//! models: Qwen2.5-Math-PRM (Zhang et al. 2025, "The Lessons of Developing Process Reward Models
//! in Mathematical Reasoning": a Qwen chat prompt, steps each followed by `<extra_0>`, a two-class
//! head read at every `<extra_0>`) and Math-Shepherd (Wang et al. 2024: the question, then steps
//! each ending in ` ки`, the logits of `+` against `-` read at every tag).
//!
//! The engine-backed PRMs tokenise the pieces separately (prefix, then per step: separator,
//! body, tag). A step's tokens therefore never depend on the steps after it, which is what makes
//! scoring step `k` on the cached tokens of steps `1..k-1` give exactly what scoring the whole
//! solution gives.
//!
//! Invariant: nothing here panics or fails on any input; a solution that gives no answer is
//! described by [`AnswerState`], never an error.

use crate::equivalence::Answer;
use crate::extract::extract_answer;
use crate::verifier::Solution;

/// Splits a solution text into steps at `delimiter` (e.g. `"\n\n"`), trimming each step and
/// dropping blank ones. An empty delimiter keeps the whole text as one step.
///
/// ```
/// use ponder_verifiers::prm::split_steps;
///
/// let steps = split_steps("2 + 2 = 4.\n\n\n\nSo the answer is \\boxed{4}.\n\n", "\n\n");
/// assert_eq!(steps, vec!["2 + 2 = 4.", "So the answer is \\boxed{4}."]);
/// assert!(split_steps("  \n\n ", "\n\n").is_empty());
/// ```
pub fn split_steps(text: &str, delimiter: &str) -> Vec<String> {
    let pieces: Vec<&str> = if delimiter.is_empty() {
        vec![text]
    } else {
        text.split(delimiter).collect()
    };
    pieces
        .into_iter()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// How a PRM reads a problem and its steps: `prefix` (with `{problem}` replaced), then for
/// every step its `separator` (not before the first), its text (trimmed), and `step_tag`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PrmFormat {
    /// Text before the first step; every `{problem}` in it is replaced by the problem.
    pub prefix: String,
    /// Text between one step's tag and the next step's text.
    pub separator: String,
    /// Text after every step; the PRM is read at the last token of each tag.
    pub step_tag: String,
}

/// One step as a PRM reads it: separator, trimmed body, tag (tokenised in that order, apart).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepPiece<'a> {
    /// Empty for the first step.
    pub separator: &'a str,
    /// The step's text, trimmed.
    pub body: &'a str,
    /// The tag the PRM is read at.
    pub step_tag: &'a str,
}

/// The system prompt Qwen2.5-Math-PRM was trained with.
pub const QWEN_MATH_SYSTEM: &str =
    "Please reason step by step, and put your final answer within \\boxed{}.";

impl PrmFormat {
    /// Qwen2.5-Math-PRM: the Qwen chat prompt, steps each followed by `<extra_0>`.
    pub fn qwen_math_prm() -> Self {
        Self {
            prefix: format!(
                "<|im_start|>system\n{QWEN_MATH_SYSTEM}<|im_end|>\n<|im_start|>user\n{{problem}}<|im_end|>\n<|im_start|>assistant\n"
            ),
            separator: String::new(),
            step_tag: "<extra_0>".into(),
        }
    }

    /// Math-Shepherd: `problem`, a space, then steps each ending in ` ки`, one per line.
    pub fn math_shepherd() -> Self {
        Self {
            prefix: "{problem} ".into(),
            separator: "\n".into(),
            step_tag: " ки".into(),
        }
    }

    /// The prefix with the problem in it.
    pub fn prefix_for(&self, problem: &str) -> String {
        self.prefix.replace("{problem}", problem)
    }

    /// The steps as the PRM reads them, in order.
    pub fn pieces<'a>(&'a self, steps: &'a [String]) -> impl Iterator<Item = StepPiece<'a>> + 'a {
        steps.iter().enumerate().map(move |(i, s)| StepPiece {
            separator: if i == 0 { "" } else { &self.separator },
            body: s.trim(),
            step_tag: &self.step_tag,
        })
    }

    /// The whole text the PRM reads (for people and logs; the engine tokenises the pieces).
    ///
    /// ```
    /// use ponder_verifiers::prm::PrmFormat;
    ///
    /// let steps = vec!["1 + 1 = 2".to_string(), " \\boxed{2}\n".to_string()];
    /// let text = PrmFormat::math_shepherd().render("What is 1 + 1?", &steps);
    /// assert_eq!(text, "What is 1 + 1? 1 + 1 = 2 ки\n\\boxed{2} ки");
    /// ```
    pub fn render(&self, problem: &str, steps: &[String]) -> String {
        let mut out = self.prefix_for(problem);
        for p in self.pieces(steps) {
            out.push_str(p.separator);
            out.push_str(p.body);
            out.push_str(p.step_tag);
        }
        out
    }
}

/// The probability of the "good" class from the logits of the good and bad classes (a softmax
/// over two): Qwen2.5-Math-PRM's `softmax(head)[1]`, Math-Shepherd's `softmax([+, -])[0]`.
/// NaN logits give 0, the worst score.
pub fn good_probability(good_logit: f32, bad_logit: f32) -> f32 {
    let p = 1.0 / (1.0 + ((bad_logit as f64) - (good_logit as f64)).exp());
    if p.is_nan() {
        0.0
    } else {
        p as f32
    }
}

/// P("Yes") among a judge's first-token alternatives `(text, logprob)`, renormalised over the
/// "Yes" and "No" variants (any case, surrounding spaces and punctuation ignored). `None` when
/// neither appears.
///
/// ```
/// use ponder_verifiers::prm::yes_probability;
///
/// let top = vec![(" Yes".to_string(), -0.2f32), ("No".to_string(), -2.0), (" yes".to_string(), -3.0)];
/// let p = yes_probability(&top).unwrap_or(0.0);
/// let (y, n) = ((-0.2f64).exp() + (-3.0f64).exp(), (-2.0f64).exp());
/// assert!((p as f64 - y / (y + n)).abs() < 1e-6);
/// assert_eq!(yes_probability(&[("Maybe".to_string(), -0.1)]), None);
/// ```
pub fn yes_probability(top: &[(String, f32)]) -> Option<f32> {
    let (mut yes, mut no) = (0.0f64, 0.0f64);
    for (text, logprob) in top {
        let word = text
            .trim()
            .trim_matches(|c: char| c.is_ascii_punctuation())
            .to_ascii_lowercase();
        let p = (*logprob as f64).exp();
        if !p.is_finite() {
            continue;
        }
        match word.as_str() {
            "yes" => yes += p,
            "no" => no += p,
            _ => {}
        }
    }
    (yes + no > 0.0).then(|| (yes / (yes + no)) as f32)
}

/// Where a solution stands as to its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerState {
    /// No steps, or only blank ones.
    Empty,
    /// Still being written: it has no answer yet, and that is fine.
    Partial,
    /// Finished, but no final answer can be extracted.
    NoAnswer,
    /// Finished with an answer that is written as LaTeX yet does not read as math (`\frac{}{}`,
    /// unbalanced braces).
    Unparsable,
    /// Finished with a readable answer.
    Answered,
}

impl AnswerState {
    /// Classifies `solution`.
    ///
    /// ```
    /// use ponder_verifiers::prm::AnswerState;
    /// use ponder_verifiers::Solution;
    ///
    /// let state = |steps: &[&str], complete| {
    ///     let steps: Vec<String> = steps.iter().map(|s| s.to_string()).collect();
    ///     AnswerState::of(&Solution { problem: "p", steps: &steps, complete, confidence: None })
    /// };
    /// assert_eq!(state(&[], true), AnswerState::Empty);
    /// assert_eq!(state(&["  "], false), AnswerState::Empty);
    /// assert_eq!(state(&["Let us think."], false), AnswerState::Partial);
    /// assert_eq!(state(&["Let us think."], true), AnswerState::NoAnswer);
    /// assert_eq!(state(&[r"So \boxed{\frac{1}{}}."], true), AnswerState::Unparsable);
    /// assert_eq!(state(&["So", r"\boxed{\frac{1}{2}}."], true), AnswerState::Answered);
    /// assert_eq!(state(&["The answer is Monday."], true), AnswerState::Answered);
    /// ```
    pub fn of(solution: &Solution<'_>) -> Self {
        if solution.steps.iter().all(|s| s.trim().is_empty()) {
            return Self::Empty;
        }
        if !solution.complete {
            return Self::Partial;
        }
        let Some(answer) = extract_answer(&solution.text()) else {
            return Self::NoAnswer;
        };
        let prepared = Answer::new(&answer);
        let norm = prepared.normalized();
        if norm.trim().is_empty() {
            return Self::NoAnswer;
        }
        let latex_like = norm.contains(['\\', '{', '}', '^', '_']);
        if !balanced_braces(norm) || (latex_like && prepared.expr().is_none()) {
            return Self::Unparsable;
        }
        Self::Answered
    }

    /// Whether a verifier should score this solution as "no answer"
    /// ([`Scores::no_answer`](crate::Scores::no_answer)) instead of running a model.
    pub fn is_no_answer(self) -> bool {
        matches!(self, Self::Empty | Self::NoAnswer | Self::Unparsable)
    }
}

fn balanced_braces(s: &str) -> bool {
    let mut depth = 0i64;
    let mut escaped = false;
    for c in s.chars() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth < 0 {
                    return false;
                }
            }
            _ => {}
        }
    }
    depth == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_delimiter_keeps_one_step() {
        assert_eq!(split_steps(" a\n\nb ", ""), vec!["a\n\nb"]);
        assert!(split_steps("", "\n").is_empty());
    }

    #[test]
    fn qwen_format_puts_a_tag_after_every_step() {
        let steps = vec!["a".to_string(), "b".to_string()];
        let text = PrmFormat::qwen_math_prm().render("Q?", &steps);
        assert!(text.starts_with("<|im_start|>system\nPlease reason step by step"));
        assert!(text.ends_with(
            "<|im_start|>user\nQ?<|im_end|>\n<|im_start|>assistant\na<extra_0>b<extra_0>"
        ));
        assert_eq!(PrmFormat::qwen_math_prm().pieces(&[]).count(), 0);
    }

    #[test]
    fn good_probability_is_a_two_way_softmax() {
        assert!((good_probability(0.0, 0.0) - 0.5).abs() < 1e-7);
        assert!(good_probability(10.0, -10.0) > 0.999);
        assert!(good_probability(-1000.0, 1000.0) >= 0.0);
        assert_eq!(good_probability(f32::NAN, 0.0), 0.0);
        assert!((good_probability(2.0, 1.0) - 1.0 / (1.0 + (-1.0f32).exp())).abs() < 1e-6);
    }

    #[test]
    fn yes_probability_ignores_other_tokens_and_nan() {
        let top = vec![
            ("The".to_string(), -0.1),
            ("YES.".to_string(), -1.0),
            ("no".to_string(), -1.0),
            ("yes".to_string(), f32::NAN),
        ];
        assert_eq!(yes_probability(&top), Some(0.5));
        assert_eq!(yes_probability(&[]), None);
    }

    #[test]
    fn answer_states_of_bad_solutions() {
        let s = |steps: &[&str]| -> AnswerState {
            let steps: Vec<String> = steps.iter().map(|x| x.to_string()).collect();
            AnswerState::of(&Solution {
                problem: "p",
                steps: &steps,
                complete: true,
                confidence: None,
            })
        };
        assert!(s(&[]).is_no_answer());
        assert!(s(&["no answer here"]).is_no_answer());
        assert!(s(&[r"\boxed{\frac{}{}}"]).is_no_answer());
        assert!(s(&[r"\boxed{}"]).is_no_answer());
        assert!(!s(&["so the answer is 12"]).is_no_answer());
        assert!(!AnswerState::Partial.is_no_answer());
    }
}
