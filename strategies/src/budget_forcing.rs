//! Budget forcing: sequential scaling by controlling how long the model thinks.
//!
//! **Method** (Muennighoff et al. 2025, "s1: Simple test-time scaling"): one trace thinks inside
//! a `<think>` … `</think>` block, then answers.
//! - A **maximum** of `max_thinking_tokens`: thinking is generated up to what is left of it; when
//!   it runs out, the block is ended for the model — the closing tag and the answer delimiter
//!   (`answer_delimiter`, "Final Answer:") are appended — and the answer phase follows.
//! - A **minimum** of `min_thinking_tokens`: when the model ends its thinking (writes the closing
//!   tag, or ends the sequence) before the minimum, its end is dropped and `wait_text` ("Wait")
//!   is appended in its place, so it thinks on — at most `max_waits` times, as s1 does; after
//!   that its end stands. s1 suppresses the end-of-thinking token and appends "Wait" when the
//!   model would emit it; here the thinking is generated up to the closing tag (a stop string),
//!   and the continuation is the thinking without that tag plus "Wait", forked from the point
//!   before it. The engine's prefix cache holds the thinking just generated, so only the
//!   appended tokens are computed again; over `--backend` this is s1's stop, append, continue.
//! - The **answer phase** (`answer_tokens`) follows the closed block, after the delimiter, and is
//!   counted like any generation. The answer is read after the block (a forced `\boxed{` probe
//!   when the text marks none).
//!
//! - **Early exit inside the thinking** (Fu et al. 2025, Dynasor-CoT's certainty-based exit;
//!   off unless `probe_every` > 0): past the minimum, every `probe_every` thinking tokens the
//!   model is asked for its answer so far (a fork of the trace with Dynasor-CoT's probe text
//!   appended, decoded greedily until its `\boxed{}` closes, at most `probe_tokens`; charged as
//!   probe tokens); once `probe_patience` probes in a row give the same answer, the thinking stops
//!   there, the block is closed and the probed answer written after the delimiter — no answer
//!   phase is generated.
//!
//! Any model works: the strategy opens the block itself (`"<think>\n"` appended after the prompt),
//! so one without native thinking tokens thinks between text tags, and the reply's thinking is
//! split off its content by the server like a thinking model's. Where the chat template opens
//! the block itself (DeepSeek-R1 and its distills), the strategy does not open a second one
//! ([`Context::prompt_opens_thinking`]).
//!
//! **Parameters** ([`BudgetForcingParams`]): `max_thinking_tokens` (512),
//! `min_thinking_tokens` (0), `max_waits` (2), `wait_text`, `answer_delimiter`, `answer_tokens`
//! (64), `probe_every` (0: no early exit), `probe_patience` (3), `probe_tokens` (12), `decoding`.
//!
//! **Budget.** The thinking, the appended text (prefill) and the answer phase are metered like
//! every search; a budget that cannot cover the prompt and the minimum thinking is refused
//! before anything runs, naming `budget_tokens`.

use async_trait::async_trait;
use ponder_verifiers::canonical_answer;
use serde::{Deserialize, Serialize};

use crate::budget::Charge;
use crate::context::{Branch, Context, StepSpec};
use crate::error::{GeneratorError, Result, StrategyError};
use crate::generator::{Extension, StopKind};
use crate::outcome::Selection;
use crate::params::{positive, Decoding};
use crate::strategy::Strategy;

/// The tag that opens the thinking block.
pub const THINK_START: &str = "<think>";
/// The tag that closes it.
pub const THINK_END: &str = "</think>";

/// Parameters of `budget_forcing`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BudgetForcingParams {
    /// Most thinking tokens; the block is ended for the model when they run out.
    pub max_thinking_tokens: usize,
    /// Fewest thinking tokens: an earlier end is replaced by `wait_text` (up to `max_waits`).
    pub min_thinking_tokens: usize,
    /// Most times an early end is replaced.
    pub max_waits: usize,
    /// What replaces an early end.
    pub wait_text: String,
    /// Appended after the closed block, before the answer.
    pub answer_delimiter: String,
    /// Most tokens of the answer phase.
    pub answer_tokens: usize,
    /// Thinking tokens between answer probes (0: no probes, no early exit).
    pub probe_every: usize,
    /// Probes in a row that must agree for the thinking to stop early.
    pub probe_patience: usize,
    /// Most tokens one probe decodes.
    pub probe_tokens: usize,
    /// Sampling of the thinking and the answer.
    pub decoding: Decoding,
}

impl Default for BudgetForcingParams {
    fn default() -> Self {
        Self {
            max_thinking_tokens: 512,
            min_thinking_tokens: 0,
            max_waits: 2,
            wait_text: "Wait".into(),
            answer_delimiter: "Final Answer:".into(),
            answer_tokens: 64,
            probe_every: 0,
            probe_patience: 3,
            probe_tokens: 12,
            decoding: Decoding::default(),
        }
    }
}

/// How the thinking ended.
enum Thought {
    /// The block is closed (the branch is after its closing tag): the answer phase follows.
    Closed(Branch),
    /// The caller's stop string or `max_tokens` ended the trace inside the block.
    Ended(Branch),
    /// `probe_patience` probes in a row agreed on this answer (the branch is still inside the
    /// block).
    Converged(Branch, String),
}

/// Think within a minimum and a maximum, then answer.
#[derive(Debug, Clone)]
pub struct BudgetForcing {
    params: BudgetForcingParams,
}

const NAME: &str = "budget_forcing";

impl BudgetForcing {
    /// Validates `params`: a maximum of at least 1, a minimum no larger than it, an answer
    /// phase of at least one token, a non-empty "Wait" where waits are allowed.
    pub fn new(params: BudgetForcingParams) -> Result<Self> {
        positive(NAME, "max_thinking_tokens", params.max_thinking_tokens)?;
        positive(NAME, "answer_tokens", params.answer_tokens)?;
        if params.probe_every > 0 {
            positive(NAME, "probe_patience", params.probe_patience)?;
            positive(NAME, "probe_tokens", params.probe_tokens)?;
        }
        if params.min_thinking_tokens > params.max_thinking_tokens {
            return Err(StrategyError::invalid(
                NAME,
                "min_thinking_tokens",
                format!(
                    "must be at most max_thinking_tokens ({}), got {}",
                    params.max_thinking_tokens, params.min_thinking_tokens
                ),
            ));
        }
        if params.max_waits > 0 && params.wait_text.trim().is_empty() {
            return Err(StrategyError::invalid(
                NAME,
                "wait_text",
                "must not be empty while max_waits is above 0",
            ));
        }
        params.decoding.validate(NAME)?;
        Ok(Self { params })
    }

    /// One extension of `branch` (drawn with `draw`), with what it generated.
    async fn step(
        &self,
        ctx: &Context,
        branch: &Branch,
        draw: u64,
        max_tokens: usize,
        stop: Vec<String>,
    ) -> Result<(Branch, Extension)> {
        let spec = StepSpec {
            max_tokens,
            stop,
            sampling: self.params.decoding.sampling(),
        };
        ctx.extend_as(vec![(branch.clone(), draw)], &spec, Charge::Generation)
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| GeneratorError::Missing { what: "thinking" }.into())
    }

    /// Thinks from the open block at `branch` until the block is closed (by the model, past
    /// the minimum or out of waits; or for it, at the maximum) or the caller's limits end it.
    async fn think(&self, ctx: &Context, mut branch: Branch) -> Result<Thought> {
        let p = &self.params;
        let (mut used, mut waits, mut draw) = (0usize, 0usize, 0u64);
        // The answers of the probes since the last disagreement.
        let mut agreeing: Vec<String> = Vec::new();
        loop {
            let left = p.max_thinking_tokens - used;
            if left == 0 {
                return Ok(Thought::Closed(
                    ctx.force(&branch, &format!("\n{THINK_END}"))?,
                ));
            }
            // Where an early end would be taken back from.
            let before = ctx.fork(&branch)?;
            let chunk = match p.probe_every {
                0 => left,
                every => left.min(every),
            };
            let stepped = self
                .step(ctx, &branch, draw, chunk, vec![THINK_END.into()])
                .await;
            let (next, ext) = match stepped {
                Ok(s) => s,
                Err(e) => {
                    ctx.release(&before);
                    return Err(e);
                }
            };
            draw += 1;
            used += ext.tokens.len();
            // The caller's own end (a stop string of theirs, their `max_tokens`) ends the trace
            // where it stands: no answer phase follows.
            let callers_stop = ext.stop == StopKind::Stop && !ext.text.contains(THINK_END);
            if callers_stop || (next.finished && ext.stop != StopKind::Eos) {
                ctx.release(&before);
                return Ok(Thought::Ended(next));
            }
            let ended = matches!(ext.stop, StopKind::Stop | StopKind::Eos);
            if ended && used < p.min_thinking_tokens && waits < p.max_waits {
                // Too early: the end is dropped and "Wait" appended where it stood.
                waits += 1;
                ctx.prune(&next);
                let thought = ext
                    .text
                    .rfind(THINK_END)
                    .and_then(|at| ext.text.get(..at))
                    .unwrap_or(&ext.text)
                    .trim_end();
                // `before` becomes the trace (forcing text appends to its sequence).
                branch = ctx.force(&before, &format!("{thought}\n{}", p.wait_text))?;
                continue;
            }
            match ext.stop {
                // The model closed the block itself.
                StopKind::Stop => {
                    ctx.release(&before);
                    return Ok(Thought::Closed(next));
                }
                // It ended the sequence inside the block: its thinking, closed for it (from
                // before the end-of-sequence token, which the model must not see mid-reply).
                StopKind::Eos => {
                    ctx.prune(&next);
                    let closed = ctx.force(&before, &format!("{}\n{THINK_END}", ext.text))?;
                    return Ok(Thought::Closed(closed));
                }
                // At the cap this call had: thinking goes on (the loop ends it at the maximum)
                // unless nothing came (the caller's `max_tokens` left no room): then it ends here.
                StopKind::Length => {
                    ctx.release(&before);
                    if ext.tokens.is_empty() {
                        return Ok(Thought::Closed(
                            ctx.force(&next, &format!("\n{THINK_END}"))?,
                        ));
                    }
                    if p.probe_every > 0
                        && used >= p.min_thinking_tokens
                        && used < p.max_thinking_tokens
                    {
                        // A probe the budget refuses reads nothing and the thinking goes on
                        // (its next step meets the same budget); a deadline or a cancellation
                        // ends the search.
                        let probed = match ctx.probe_answer(&next, p.probe_tokens).await {
                            Ok(a) => a.map(|a| canonical_answer(&a)),
                            Err(StrategyError::BudgetExhausted { .. }) => None,
                            Err(e) => return Err(e),
                        };
                        match probed {
                            Some(a) if agreeing.last().is_none_or(|last| *last == a) => {
                                agreeing.push(a)
                            }
                            Some(a) => agreeing = vec![a],
                            None => agreeing.clear(),
                        }
                        ctx.with_tree(|t| t.note(next.node, "probe", agreeing.last().cloned()));
                        if agreeing.len() >= p.probe_patience {
                            if let Some(answer) = agreeing.pop() {
                                return Ok(Thought::Converged(next, answer));
                            }
                        }
                    }
                    branch = next;
                }
            }
        }
    }
}

#[async_trait]
impl Strategy for BudgetForcing {
    fn name(&self) -> &str {
        NAME
    }

    async fn search(&self, ctx: &Context) -> Result<Selection> {
        let p = &self.params;
        let root = ctx.open().await?;
        let needed = ctx.prompt_tokens() + p.min_thinking_tokens as u64 + 1;
        if ctx.available() < needed {
            ctx.release(&root);
            return Err(StrategyError::invalid(
                NAME,
                "budget_tokens",
                format!(
                    "{} tokens cannot cover the prompt ({}) and min_thinking_tokens ({})",
                    ctx.budget().tokens,
                    ctx.prompt_tokens(),
                    p.min_thinking_tokens
                ),
            ));
        }
        // A template that opens the block for the model (R1-style) has opened it already.
        let opened = if ctx.prompt_opens_thinking() {
            root
        } else {
            ctx.force(&root, &format!("{THINK_START}\n"))?
        };
        let closed = match self.think(ctx, opened).await? {
            Thought::Closed(branch) => branch,
            Thought::Converged(branch, answer) => {
                // The probes settled: the block is closed and their answer written for the
                // model, with nothing more generated.
                let answered = ctx.force(
                    &branch,
                    &format!(
                        "\n{THINK_END}\n\n{} \\boxed{{{answer}}}",
                        p.answer_delimiter.trim_end()
                    ),
                )?;
                ctx.with_tree(|t| t.note(answered.node, "early_exit", answer.clone()));
                let i = ctx.add_candidate_with_answer(&answered, None, Some(answer.clone()));
                return Ok(Selection {
                    answer: Some(answer),
                    candidate: Some(i),
                    support: None,
                });
            }
            Thought::Ended(branch) => {
                let i = ctx.add_candidate(&branch, None);
                let answer = ctx.candidates().get(i).and_then(|c| c.answer.clone());
                return Ok(Selection {
                    answer,
                    candidate: Some(i),
                    support: None,
                });
            }
        };
        let answering = ctx.force(&closed, &format!("\n\n{} ", p.answer_delimiter.trim_end()))?;
        let (answered, _) = self
            .step(ctx, &answering, u64::MAX, p.answer_tokens, Vec::new())
            .await?;
        let i = ctx.add_candidate_forced(&answered, None).await;
        let answer = ctx.candidates().get(i).and_then(|c| c.answer.clone());
        Ok(Selection {
            answer,
            candidate: Some(i),
            support: None,
        })
    }
}
