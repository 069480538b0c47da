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
//! Accounting: prefill is *charged* as if this generator's search ran alone — the tokens after
//! the longest prefix any sequence of this generator computed before ([`TokenTree`], token
//! granularity), once per distinct token list (exactly [`Generator::prefill_bound_batch`]).
//! On a quiet engine that is exactly what the engine computes. Blocks another request left in
//! the cache still save the engine the work, but not the search its budget; KV the engine lost
//! (evicted, preempted) is recomputed but not charged, and reported as
//! [`Cost::recomputed`]: otherwise the same request with the same seed could spend, and so
//! answer, differently depending on what else ran. A call dropped midway (cancelled, past its
//! deadline) is charged what the engine computed, through [`Generator::extend_tallied`].
#![deny(clippy::indexing_slicing)]

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use ponder_strategies::{
    Cost, CostTally, ExtendRequest, Extension, Generator, GeneratorError, Prompt, Result,
    SeqHandle, StopKind, Stops, StrategyError, TokenInfo,
};

use super::token_tree::TokenTree;
use crate::engine::{
    encode_prompt, ChatMessage, EngineError, Event, Executor, GroupHandle, GroupRequest,
    LoadedModel, SamplingParams, SeqFinish, SeqId, StopCondition,
};

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

/// A branch the executor keeps (see [`GroupRequest::keep`]); dropping the last handle on it
/// releases its KV blocks.
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

/// Engine branches of a call not yet handed to a [`Kept`]: released if the call is dropped
/// (cancelled, past its deadline) or fails before it sees them finish.
struct Unclaimed {
    executor: Arc<Executor>,
    ids: HashSet<SeqId>,
}

impl Drop for Unclaimed {
    fn drop(&mut self) {
        for &id in &self.ids {
            self.executor.release_kept(id);
        }
    }
}

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
    /// kept branch that holds `kept` of them (`None`: no kept branch). Without one, the engine
    /// finds only whole blocks in its prefix index and computes the trailing partial block
    /// again, so the charge starts at the last whole block this search computed: charges
    /// never fall below what the engine computes for the search.
    fn charged_from(&self, tokens: &[u32], kept: Option<usize>) -> usize {
        let known = self.paid(tokens);
        let whole = known / self.block_size.max(1) * self.block_size.max(1);
        kept.map_or(whole, |computed| whole.max(known.min(computed)))
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

    fn sampling(req: &ExtendRequest) -> SamplingParams {
        SamplingParams {
            temperature: req.sampling.temperature,
            top_k: req.sampling.top_k,
            top_p: req.sampling.top_p,
            min_p: req.sampling.min_p,
            repetition_penalty: 1.0,
            seed: req.sampling.seed,
            top_logprobs: req.sampling.top_logprobs,
            ..SamplingParams::default()
        }
    }

    fn token_text(&self, id: u32) -> String {
        self.model.tokenizer.decode(&[id]).unwrap_or_default()
    }

    /// Groups `batch`'s requests that continue identical tokens with identical limits; each
    /// group resumes from the kept branch covering most of its tokens.
    fn groups(&self, batch: &[ExtendRequest]) -> Result<Vec<Group>> {
        let context = self.model.model.config().context_length;
        let mut groups: Vec<Group> = Vec::new();
        for (i, req) in batch.iter().enumerate() {
            let seq = self.get(req.seq)?;
            let room = context.saturating_sub(seq.tokens.len() + 1);
            let max_tokens = req.max_tokens.min(room);
            let found = groups.iter().position(|g| {
                g.tokens == seq.tokens && g.max_tokens == max_tokens && g.stop == req.stop
            });
            let at = match found {
                Some(at) => at,
                None => {
                    groups.push(Group {
                        cached: 0, // set below, once the group's kept branch is known
                        tokens: seq.tokens.clone(),
                        members: Vec::new(),
                        max_tokens,
                        stop: req.stop.clone(),
                        resume: None,
                        prefix: (0, 0),
                    });
                    groups.len() - 1
                }
            };
            let Some(g) = groups.get_mut(at) else {
                continue;
            };
            g.members.push(i);
            // Members hold identical tokens; resume from the one whose kept sequence covers
            // most (a kept prompt covers all).
            if let Some(kept) = seq.kept {
                if g.resume.as_ref().is_none_or(|(_, c)| seq.computed > *c) {
                    g.resume = Some((kept, seq.computed));
                }
            }
        }
        for g in &mut groups {
            if g.resume.is_none() {
                g.resume = self.kept_prefix(&g.tokens);
            }
            g.cached = self.charged_from(&g.tokens, g.resume.as_ref().map(|(_, c)| *c));
        }
        Ok(groups)
    }

    /// For a new prompt (no kept branch of its own): this search's kept sequence sharing the
    /// longest prefix with `tokens`, and the positions shared. A prompt that restates an earlier
    /// one and adds to it (AB-MCTS's refinement shows the question again, then an answer) then
    /// forks that sequence's KV, its partial last block included, where the prefix index alone
    /// would serve whole blocks and recompute the rest.
    fn kept_prefix(&self, tokens: &[u32]) -> Option<(Arc<Kept>, usize)> {
        self.lock()
            .values()
            .filter_map(|s| {
                let kept = s.kept.as_ref()?;
                let computed = s.tokens.get(..s.computed)?;
                let shared = computed
                    .iter()
                    .zip(tokens)
                    .take_while(|(a, b)| a == b)
                    .count();
                (shared > 0).then(|| (Arc::clone(kept), shared))
            })
            .max_by_key(|(_, shared)| *shared)
    }

    /// Every live sequence whose tokens are exactly `tokens` now continues from `kept`, which
    /// holds all of them.
    fn adopt(&self, tokens: &[u32], kept: &Arc<Kept>) {
        for s in self.lock().values_mut() {
            if s.tokens == tokens {
                s.kept = Some(Arc::clone(kept));
                s.computed = tokens.len();
            }
        }
    }

    /// A group whose tokens extend a live sequence ending in a token not yet computed (a probe
    /// or other forced text appended to a fork of it) would compute that token in its own
    /// context, and the sequence would compute it again when it continues. So that sequence's
    /// tokens are computed and kept first (one prompt-only group each, all submitted together);
    /// the sequence and the group both continue from there.
    async fn complete_prefixes(
        &self,
        groups: &mut [Group],
        tally: &CostTally,
        unclaimed: &mut Unclaimed,
    ) -> Result<()> {
        let mut pending: Vec<(Vec<u32>, Vec<usize>, GroupHandle)> = Vec::new();
        for (gi, g) in groups.iter().enumerate() {
            let Some((resume, _)) = &g.resume else {
                continue;
            };
            if let Some(p) = pending.iter_mut().find(|p| g.tokens.starts_with(&p.0)) {
                p.1.push(gi);
                continue;
            }
            let prefix = self.lock().values().find_map(|s| {
                let on = s.kept.as_ref().is_some_and(|k| Arc::ptr_eq(k, resume));
                (on && s.computed + 1 == s.tokens.len()
                    && s.tokens.len() < g.tokens.len()
                    && g.tokens.starts_with(&s.tokens))
                .then(|| s.tokens.clone())
            });
            let Some(prefix) = prefix else { continue };
            let req = GroupRequest {
                prompt: prefix.clone(),
                samples: Vec::new(),
                max_new_tokens: 1,
                stop_tokens: Vec::new(),
                stop_condition: None,
                priority: self.priority,
                keep: true,
                resume: Some(resume.id),
            };
            let handle = self.executor.submit(req).await.map_err(engine)?;
            unclaimed.ids.extend(handle.seqs.iter().copied());
            pending.push((prefix, vec![gi], handle));
        }
        for (prefix, members, mut handle) in pending {
            let (mut read, mut recomputed, mut kept) = (0, 0, None);
            while let Some(event) = handle.events.recv().await {
                match event {
                    Event::Prefill {
                        computed, reused, ..
                    } => {
                        tally.add(Cost {
                            prefill_computed: computed,
                            prefill_reused: reused,
                            ..Cost::default()
                        });
                        let from = prefix.len().saturating_sub(computed as usize);
                        recomputed += self.tree().record(&prefix, from);
                        read += computed + reused;
                    }
                    Event::Finished { seq, reason } => {
                        unclaimed.ids.remove(&seq);
                        if reason == SeqFinish::Cancelled {
                            return Err(GeneratorError::SequenceCancelled.into());
                        }
                        kept = Some(Arc::new(Kept {
                            id: seq,
                            executor: Arc::clone(&self.executor),
                        }));
                        break;
                    }
                    Event::Token { .. } => {}
                }
            }
            let Some(kept) = kept else {
                return Err(GeneratorError::Stopped.into());
            };
            self.adopt(&prefix, &kept);
            for (j, gi) in members.into_iter().enumerate() {
                if let Some(g) = groups.get_mut(gi) {
                    // The prefix's own reads are reported once, with the first group.
                    g.prefix = if j == 0 { (read, recomputed) } else { (0, 0) };
                    g.resume = Some((Arc::clone(&kept), prefix.len()));
                }
            }
        }
        Ok(())
    }

    fn group_request(&self, g: &Group, batch: &[ExtendRequest]) -> GroupRequest {
        let stops = Stops::new(&g.stop);
        let stop_condition: Option<Arc<dyn StopCondition>> = (!stops.is_empty()).then(|| {
            Arc::new(StopStrings {
                model: Arc::clone(&self.model),
                stops,
            }) as Arc<dyn StopCondition>
        });
        GroupRequest {
            prompt: g.tokens.clone(),
            samples: g
                .members
                .iter()
                .filter_map(|&i| batch.get(i))
                .map(Self::sampling)
                .collect(),
            max_new_tokens: g.max_tokens,
            stop_tokens: self.model.tokenizer.eos().to_vec(),
            stop_condition,
            priority: self.priority,
            keep: true,
            resume: g.resume.as_ref().map(|(k, _)| k.id),
        }
    }

    /// Reads group `g`'s events to the end: fills its members' results, hands each finished
    /// branch to a [`Kept`] on its sequence, records computed positions in the token tree and
    /// tallies the engine's work as it happens.
    async fn collect(
        &self,
        g: &Group,
        mut handle: GroupHandle,
        batch: &[ExtendRequest],
        tally: &CostTally,
        unclaimed: &mut Unclaimed,
        results: &mut [Option<Extension>],
    ) -> Result<()> {
        let index: HashMap<_, _> = handle
            .seqs
            .iter()
            .copied()
            .zip(g.members.iter().copied())
            .collect();
        let mut tokens: HashMap<usize, (Vec<u32>, Vec<TokenInfo>)> = HashMap::new();
        // Context positions the engine computed again for this search.
        let mut recomputed = g.prefix.1;
        let mut prompt_kept: Option<Arc<Kept>> = None;
        let mut open = handle.seqs.len();
        let mut last_token: HashMap<crate::engine::SeqId, std::time::Instant> = HashMap::new();
        while open > 0 {
            let Some(event) = handle.events.recv().await else {
                return Err(GeneratorError::Stopped.into());
            };
            match event {
                Event::Token { seq, token } => {
                    tally.add(Cost {
                        generated: 1,
                        ..Cost::default()
                    });
                    let Some(&i) = index.get(&seq) else { continue };
                    if let Some(on_token) = &self.on_token {
                        let now = std::time::Instant::now();
                        if let Some(before) = last_token.insert(seq, now) {
                            (on_token.0)(now - before);
                        }
                    }
                    let entry = tokens.entry(i).or_default();
                    entry.0.push(token.token);
                    let top = token
                        .top_logprobs
                        .iter()
                        .map(|(id, lp)| (self.token_text(*id), *lp))
                        .collect();
                    entry.1.push(TokenInfo {
                        logprob: token.logprob,
                        top,
                    });
                }
                Event::Prefill {
                    seq,
                    computed,
                    reused,
                    kept_prompt,
                } => {
                    if let Some(id) = kept_prompt {
                        prompt_kept = Some(Arc::new(Kept {
                            id,
                            executor: Arc::clone(&self.executor),
                        }));
                    }
                    tally.add(Cost {
                        prefill_computed: computed,
                        prefill_reused: reused,
                        ..Cost::default()
                    });
                    // The branch's context so far: the group's tokens, then what it sampled
                    // (a preempted branch recomputes those too).
                    let mut context = g.tokens.clone();
                    if let Some((ids, _)) = index.get(&seq).and_then(|i| tokens.get(i)) {
                        context.extend_from_slice(ids);
                    }
                    let from = context.len().saturating_sub(computed as usize);
                    recomputed += self.tree().record(&context, from);
                }
                Event::Finished { seq, reason } => {
                    open -= 1;
                    unclaimed.ids.remove(&seq);
                    let Some(&i) = index.get(&seq) else { continue };
                    let (ids, infos) = tokens.remove(&i).unwrap_or_default();
                    let text = self.model.tokenizer.decode(&ids).map_err(engine)?;
                    let stop = match reason {
                        SeqFinish::Length => StopKind::Length,
                        SeqFinish::Stop if Stops::new(&g.stop).any_in(&text) => StopKind::Stop,
                        SeqFinish::Stop => StopKind::Eos,
                        SeqFinish::Cancelled => {
                            return Err(GeneratorError::SequenceCancelled.into())
                        }
                    };
                    // An end-of-sequence token was sampled (a decode step) but is not text.
                    let eos = u64::from(stop == StopKind::Eos);
                    tally.add(Cost {
                        generated: eos,
                        ..Cost::default()
                    });
                    let kept = Arc::new(Kept {
                        id: seq,
                        executor: Arc::clone(&self.executor),
                    });
                    // Every sampled token but the last was fed back to the model; after an
                    // end-of-sequence token, the last one was too.
                    let fed = if eos == 1 {
                        ids.len()
                    } else {
                        ids.len().saturating_sub(1)
                    };
                    let mut path = g.tokens.clone();
                    path.extend_from_slice(ids.get(..fed).unwrap_or_default());
                    self.tree().record(&path, g.tokens.len());
                    if let Some(req) = batch.get(i) {
                        // A sequence released meanwhile drops `kept`, which frees the branch.
                        if let Some(s) = self.lock().get_mut(&req.seq.0) {
                            s.tokens = g.tokens.clone();
                            s.tokens.extend_from_slice(&ids);
                            s.computed = path.len();
                            s.kept = Some(kept);
                        }
                    }
                    if let Some(result) = results.get_mut(i) {
                        *result = Some(Extension {
                            text,
                            tokens: infos,
                            stop,
                            cost: Cost {
                                generated: ids.len() as u64 + eos,
                                tree: fed as u64,
                                ..Cost::default()
                            },
                        });
                    }
                }
            }
        }
        // The group's prefill is charged once, on its first member, as this search alone
        // would have computed it (see the module doc).
        let charged = (g.tokens.len() - g.cached) as u64;
        tracing::trace!(charged, recomputed, "group prefill");
        if let Some(first) = g
            .members
            .first()
            .and_then(|&i| results.get_mut(i)?.as_mut())
        {
            first.cost.prefill_computed += charged;
            // The prefix completed first was read once more by the group.
            first.cost.prefill_reused += g.cached as u64 + g.prefix.0;
            first.cost.tree += charged;
            first.cost.recomputed += recomputed;
        }
        // Sequences holding exactly the prompt (the node the members were forked from) continue
        // from the kept prompt: their next extension computes nothing.
        if let Some(kept) = prompt_kept {
            self.adopt(&g.tokens, &kept);
        }
        Ok(())
    }
}

/// One executor group: requests (by index) that continue the same tokens.
struct Group {
    tokens: Vec<u32>,
    /// Leading positions this search has already computed, charged nothing.
    cached: usize,
    members: Vec<usize>,
    max_tokens: usize,
    stop: Vec<String>,
    /// The kept engine sequence the group's prompt continues (held for the call), and how
    /// many leading positions of the tokens it covers.
    resume: Option<(Arc<Kept>, usize)>,
    /// Positions read (computed, reused) and recomputed by a prefix completed for this group
    /// first (see [`LocalGenerator::complete_prefixes`]).
    prefix: (u64, u64),
}

#[async_trait]
impl Generator for LocalGenerator {
    async fn open(&self, prompt: &Prompt) -> Result<(SeqHandle, usize)> {
        if prompt.user.trim().is_empty() {
            return Err(GeneratorError::InvalidPrompt("the user message is empty".into()).into());
        }
        let messages: Vec<ChatMessage> = prompt
            .messages()
            .map(|(role, content)| ChatMessage::new(role, content))
            .collect();
        let text = self.model.render_chat(&messages).map_err(engine)?;
        let tokens = encode_prompt(&self.model, &text).map_err(engine)?;
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
        let mut groups = self.groups(batch)?;
        let mut results: Vec<Option<Extension>> = vec![None; batch.len()];
        let mut unclaimed = Unclaimed {
            executor: Arc::clone(&self.executor),
            ids: HashSet::new(),
        };
        self.complete_prefixes(&mut groups, tally, &mut unclaimed)
            .await?;
        let mut handles = Vec::new();
        for g in &groups {
            if g.max_tokens == 0 {
                for &i in &g.members {
                    if let Some(result) = results.get_mut(i) {
                        *result = Some(Extension {
                            text: String::new(),
                            tokens: Vec::new(),
                            stop: StopKind::Length,
                            cost: Cost::default(),
                        });
                    }
                }
                continue;
            }
            let handle = self
                .executor
                .submit(self.group_request(g, batch))
                .await
                .map_err(engine)?;
            unclaimed.ids.extend(handle.seqs.iter().copied());
            handles.push((g, handle));
        }
        for (g, handle) in handles {
            self.collect(g, handle, batch, tally, &mut unclaimed, &mut results)
                .await?;
        }
        results
            .into_iter()
            .map(|r| {
                r.ok_or_else(|| {
                    StrategyError::from(GeneratorError::Failed(
                        "a sequence ended without a result".into(),
                    ))
                })
            })
            .collect()
    }

    fn release(&self, seq: SeqHandle) {
        self.lock().remove(&seq.0);
    }
}
