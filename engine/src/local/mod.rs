//! [`LocalGenerator`]: the strategies' `Generator` port over the local executor.
//!
//! Sequences are token lists kept here; the KV lives in the executor's paged store. Every branch
//! is submitted with [`GroupRequest::keep`]: when it finishes, the executor keeps its KV —
//! partial last block included — under the branch's engine id, held here by a [`Kept`] handle
//! shared by every fork of the sequence. The next `extend` of the sequence (or of a fork, a
//! probe) resumes from that kept branch and computes only the tokens after it, so a search
//! computes each position of its tree once; the last handle dropped (branches released)
//! releases the engine's blocks. Without a kept branch (given up under memory pressure) the
//! radix prefix index still serves every full block. Requests of one `extend` call whose
//! sequences hold identical tokens go to the executor as one group (prompt prefilled once,
//! branches forked copy-on-write); all groups of a call are submitted before any is awaited, so
//! they share forward passes. Stop strings are checked inside the scheduler after every token
//! ([`StopStrings`]), so a step ends exactly at its delimiter whatever the timing.
//!
//! Accounting: prefill is *charged* as if this generator's search ran alone — where the
//! engine's own reuse rule (`scheduler::prompt_start`, the rule the scheduler opens prompts
//! by) would start computing if the only cached positions were the ones this search computed
//! before ([`TokenTree`], token granularity) and its kept branches, once per distinct token
//! list (exactly [`Generator::prefill_bound_batch`]).
//! On a quiet engine that is exactly what the engine computes. Blocks another request left in
//! the cache still save the engine the work, but not the search its budget; KV the engine lost
//! (evicted, preempted) is recomputed but not charged, and reported as
//! [`Cost::recomputed`]: otherwise the same request with the same seed could spend, and so
//! answer, differently depending on what else ran. A call dropped midway (cancelled, past its
//! deadline) is charged what the engine computed, through [`Generator::extend_tallied`].
//!
//! Plain decoding uses the same calls: [`Generator::open_text`] on the rendered conversation,
//! forks, and [`Generator::extend_streamed`], which sends each token with the text it completes
//! as the executor samples it.
#![deny(clippy::indexing_slicing)]

mod batch;
mod inflight;
mod token_tree;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use ponder_strategies::{
    ChatTemplateKwargs, Cost, CostTally, ExtendRequest, Extension, Generator, GeneratorError,
    PieceSender, Prompt, PromptLogprobs, Result, SeqHandle, Stops, StrategyError, TokenInfo, Turn,
};

use crate::scheduler::{prompt_start, KeptCover};
use crate::{
    encode_prompt, EngineError, Executor, LoadedModel, ScoreOutput, ScoreRequest, SeqId,
    StopCondition,
};
use token_tree::TokenTree;

/// The engine's [`StopCondition`] for a request's [`Stops`]: stops a branch once its generated
/// text completes one of them (the matching is [`Stops::completed`]'s; this decodes the tokens).
#[derive(Debug)]
pub struct StopStrings {
    model: Arc<LoadedModel>,
    stops: Stops,
}

/// Tokens of generated text decoded to test for a stop string (enough for any delimiter).
const STOP_WINDOW: usize = 16;

impl StopStrings {
    /// Stops a branch of `model` once its generated text completes one of `stops`.
    pub fn new(model: Arc<LoadedModel>, stops: Stops) -> Self {
        Self { model, stops }
    }
}

impl StopCondition for StopStrings {
    fn should_stop(&self, generated: &[u32]) -> bool {
        let Some((_, earlier)) = generated.split_last() else {
            return false;
        };
        let start = generated.len().saturating_sub(STOP_WINDOW);
        let tok = &self.model.tokenizer;
        let (Ok(now), Ok(before)) = (
            tok.decode(generated.get(start..).unwrap_or_default()),
            tok.decode(earlier.get(start..).unwrap_or_default()),
        ) else {
            return false;
        };
        // Stop when the latest token completed a new occurrence of a stop string.
        self.stops.completed(&before, &now)
    }
}

/// The one handle on a sequence the executor retains for this generator (a branch or prompt
/// of a group submitted with [`GroupRequest::keep`]): held from the moment the engine names
/// the sequence, by the call while it runs, then by every sequence (and fork) continuing it,
/// and by an announcement of a prompt in flight ([`inflight`]). Dropping the last handle
/// releases the KV — the generator's one release path, whether the sequence finished, was
/// cancelled, or the call was dropped midway.
#[derive(Debug)]
struct Kept {
    id: SeqId,
    executor: Arc<Executor>,
}

impl Drop for Kept {
    fn drop(&mut self) {
        self.executor.release_kept(self.id);
    }
}

/// The handles of one call's engine branches, taken at submission: a branch that finishes
/// hands its handle to its sequence; those the call never sees finish (dropped, failed) are
/// released with it.
type Claims = HashMap<SeqId, Arc<Kept>>;

#[derive(Debug, Clone)]
struct LocalSeq {
    tokens: Vec<u32>,
    /// Positions whose KV the executor has computed for this sequence.
    computed: usize,
    /// The engine branch holding those positions, while the executor keeps it.
    kept: Option<Arc<Kept>>,
}

/// The `Generator` port over the local executor.
#[derive(Debug)]
pub struct LocalGenerator {
    model: Arc<LoadedModel>,
    executor: Arc<Executor>,
    block_size: usize,
    seqs: Mutex<HashMap<u64, LocalSeq>>,
    tree: Mutex<TokenTree>,
    /// Prompts this generator's calls in flight are computing.
    inflight: Arc<inflight::InFlight>,
    next: AtomicU64,
    priority: i32,
    on_token: Option<InterToken>,
}

/// Told the time between two successive tokens of one sequence, as the engine produces them
/// (what `/metrics` reports as inter-token latency).
#[derive(Clone)]
pub struct InterToken(pub Arc<dyn Fn(std::time::Duration) + Send + Sync>);

impl std::fmt::Debug for InterToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InterToken")
    }
}

fn engine(e: EngineError) -> StrategyError {
    match e {
        EngineError::ExceedsKvPool { .. } => StrategyError::Capacity(Box::new(e)),
        e => GeneratorError::Engine(Box::new(e)).into(),
    }
}

impl LocalGenerator {
    /// A generator over `executor`, which runs `model` with KV blocks of `block_size` tokens.
    pub fn new(model: Arc<LoadedModel>, executor: Arc<Executor>, block_size: usize) -> Self {
        Self {
            model,
            executor,
            block_size: block_size.max(1),
            seqs: Mutex::new(HashMap::new()),
            tree: Mutex::default(),
            inflight: Arc::default(),
            next: AtomicU64::new(1),
            priority: 0,
            on_token: None,
        }
    }

    /// Reports the time between successive tokens of each sequence to `on_token`.
    pub fn with_inter_token(mut self, on_token: InterToken) -> Self {
        self.on_token = Some(on_token);
        self
    }

    /// Runs this generator's sequences at `priority` (higher runs first, preempted last).
    pub fn with_priority(mut self, priority: i32) -> Self {
        self.priority = priority;
        self
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, LocalSeq>> {
        self.seqs.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn tree(&self) -> std::sync::MutexGuard<'_, TokenTree> {
        self.tree.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Leading positions of `tokens` this search has computed (charged nothing again).
    fn paid(&self, tokens: &[u32]) -> usize {
        self.tree().known(tokens)
    }

    /// Leading positions of `tokens` the next extension is not charged for, continuing from a
    /// kept branch that holds `kept` of them (`None`: no kept branch): where the engine's one
    /// reuse rule ([`prompt_start`]) would start computing if this search had run alone — its
    /// own computed positions as the prefix index, its kept branch as the kept sequence (exactly
    /// the prompt when it holds every token: a kept prompt). So charges never fall below what
    /// the engine computes for the search.
    fn charged_from(&self, tokens: &[u32], kept: Option<usize>) -> usize {
        let known = self.paid(tokens);
        let cover = kept.map(|computed| KeptCover {
            shared: known.min(computed),
            exact: computed >= tokens.len(),
        });
        prompt_start(tokens.len(), self.block_size, known, cover)
    }

    /// Tokens per KV block of the executor (charges are per token, whatever its block size).
    pub fn block_size(&self) -> usize {
        self.block_size
    }

    /// Positions of this search's token tree computed so far (each counted once).
    pub fn tree_positions(&self) -> usize {
        self.tree().len()
    }

    fn get(&self, seq: SeqHandle) -> Result<LocalSeq> {
        self.lock()
            .get(&seq.0)
            .cloned()
            .ok_or_else(|| StrategyError::from(GeneratorError::UnknownSequence(seq.0)))
    }

    fn insert(&self, seq: LocalSeq) -> SeqHandle {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.lock().insert(id, seq);
        SeqHandle(id)
    }

    /// The handle on the engine's sequence `id`.
    fn keep(&self, id: SeqId) -> Arc<Kept> {
        Arc::new(Kept {
            id,
            executor: Arc::clone(&self.executor),
        })
    }

    fn token_text(&self, id: u32) -> String {
        self.model.tokenizer.decode(&[id]).unwrap_or_default()
    }
}

#[async_trait]
impl Generator for LocalGenerator {
    async fn open(
        &self,
        prompt: &Prompt,
        template: &ChatTemplateKwargs,
    ) -> Result<(SeqHandle, usize)> {
        if prompt.user.trim().is_empty() {
            return Err(GeneratorError::InvalidPrompt("the user message is empty".into()).into());
        }
        let text = self.render_chat(&prompt.turns(), template)?;
        self.open_text(&text).await
    }

    fn fork(&self, seq: SeqHandle) -> Result<SeqHandle> {
        let copy = self.get(seq)?;
        Ok(self.insert(copy))
    }

    fn append(&self, seq: SeqHandle, text: &str) -> Result<usize> {
        let ids = self.model.tokenizer.encode(text).map_err(engine)?;
        let mut seqs = self.lock();
        let s = seqs
            .get_mut(&seq.0)
            .ok_or_else(|| StrategyError::from(GeneratorError::UnknownSequence(seq.0)))?;
        s.tokens.extend_from_slice(&ids);
        Ok(ids.len())
    }

    fn prefill_bound(&self, seq: SeqHandle) -> Result<usize> {
        let s = self.get(seq)?;
        // What this search computed before is free; the rest is charged.
        let kept = s.kept.as_ref().map(|_| s.computed);
        Ok(s.tokens.len() - self.charged_from(&s.tokens, kept))
    }

    fn prefill_bound_batch(&self, seqs: &[SeqHandle]) -> Result<usize> {
        // `extend` sends sequences with identical tokens as one group: their context is
        // computed once, continuing from the kept branch that covers most of it.
        let mut distinct: Vec<(Vec<u32>, Option<usize>)> = Vec::new();
        for seq in seqs {
            let s = self.get(*seq)?;
            let kept = s.kept.as_ref().map(|_| s.computed);
            match distinct.iter_mut().find(|(t, _)| *t == s.tokens) {
                Some((_, k)) => *k = (*k).max(kept),
                None => distinct.push((s.tokens, kept)),
            }
        }
        Ok(distinct
            .iter()
            .map(|(tokens, kept)| tokens.len() - self.charged_from(tokens, *kept))
            .sum())
    }

    async fn extend(&self, batch: &[ExtendRequest]) -> Result<Vec<Extension>> {
        self.extend_tallied(batch, &CostTally::default()).await
    }

    async fn extend_tallied(
        &self,
        batch: &[ExtendRequest],
        tally: &CostTally,
    ) -> Result<Vec<Extension>> {
        self.run_batch(batch, tally, None).await
    }

    async fn extend_streamed(
        &self,
        batch: &[ExtendRequest],
        tally: &CostTally,
        pieces: &PieceSender,
    ) -> Result<Vec<Extension>> {
        self.run_batch(batch, tally, Some(pieces)).await
    }

    fn render_chat(&self, turns: &[Turn], template: &ChatTemplateKwargs) -> Result<String> {
        self.model.render_chat_with(turns, template).map_err(engine)
    }

    async fn open_text(&self, text: &str) -> Result<(SeqHandle, usize)> {
        let tokens = encode_prompt(&self.model, text).map_err(engine)?;
        let len = tokens.len();
        Ok((
            self.insert(LocalSeq {
                tokens,
                computed: 0,
                kept: None,
            }),
            len,
        ))
    }

    async fn prompt_logprobs(&self, seq: SeqHandle, top: usize) -> Result<PromptLogprobs> {
        let tokens = self
            .lock()
            .get(&seq.0)
            .map(|s| s.tokens.clone())
            .ok_or(GeneratorError::UnknownSequence(seq.0))?;
        let Some((&first, rest)) = tokens.split_first() else {
            return Err(GeneratorError::InvalidPrompt("the prompt has no tokens".into()).into());
        };
        let rest = rest.to_vec();
        if rest.is_empty() {
            return Ok(PromptLogprobs {
                first: self.token_text(first),
                rest: Vec::new(),
                cost: Cost::default(),
            });
        }
        // Every position but the last is read: the distribution of the token after it.
        let req = ScoreRequest {
            positions: (0..rest.len()).collect(),
            output: ScoreOutput::NextTokenLogprobs {
                next: rest.clone(),
                top,
            },
            tokens,
            priority: self.priority,
        };
        let scored = self
            .executor
            .submit_score(req)
            .map_err(engine)?
            .wait()
            .await
            .map_err(engine)?;
        let rest = rest
            .iter()
            .zip(scored.logprobs)
            .map(|(&id, read)| TokenInfo {
                text: self.token_text(id),
                logprob: read.logprob,
                top: read
                    .top
                    .into_iter()
                    .map(|(t, lp)| (self.token_text(t), lp))
                    .collect(),
            })
            .collect();
        Ok(PromptLogprobs {
            first: self.token_text(first),
            rest,
            cost: Cost {
                prefill_computed: scored.computed,
                prefill_reused: scored.reused,
                ..Cost::default()
            },
        })
    }

    async fn open_tokens(&self, tokens: &[u32]) -> Result<(SeqHandle, usize)> {
        let config = self.model.model.config();
        if let Some(t) = tokens.iter().find(|t| **t as usize >= config.vocab_size) {
            return Err(GeneratorError::InvalidRequest {
                field: "prompt",
                reason: format!(
                    "token {t} is not in the model's vocabulary of {} tokens",
                    config.vocab_size
                ),
            }
            .into());
        }
        if tokens.is_empty() {
            return Err(GeneratorError::InvalidPrompt("the prompt has no tokens".into()).into());
        }
        if tokens.len() >= config.context_length {
            return Err(engine(EngineError::PromptTooLong {
                tokens: tokens.len(),
                context: config.context_length,
            }));
        }
        Ok((
            self.insert(LocalSeq {
                tokens: tokens.to_vec(),
                computed: 0,
                kept: None,
            }),
            tokens.len(),
        ))
    }

    fn context_length(&self) -> Option<usize> {
        Some(self.model.model.config().context_length)
    }

    fn vocab_size(&self) -> Option<usize> {
        Some(self.model.model.config().vocab_size)
    }

    fn release(&self, seq: SeqHandle) {
        self.lock().remove(&seq.0);
    }
}
