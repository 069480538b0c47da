//! [`LocalGenerator`]: the strategies' `Generator` port over the local executor.
//!
//! Sequences are token lists kept here; the KV lives in the executor's paged store. Forking
//! copies the token list only: when a fork is extended, the executor's radix prefix index
//! finds every full block its parent (or sibling) already computed, so only the tokens after
//! the last shared full block are prefilled — prefill is computed once per distinct prefix
//! (SGLang's RadixAttention shape, on our executor). Requests of one `extend` call whose
//! sequences hold identical tokens go to the executor as one group (prompt prefilled once,
//! branches forked copy-on-write); all groups of a call are submitted before any is awaited,
//! so they share forward passes. Stop strings are checked inside the scheduler after every
//! token ([`StopStrings`]), so a step ends exactly at its delimiter whatever the timing.
//!
//! Accounting: prefill is *charged* as if this generator's search ran alone — the tokens after
//! the longest run of full blocks that any sequence of this generator computed before
//! ([`PaidPrefixes`]), once per distinct token list (exactly [`Generator::prefill_bound_batch`]). Blocks another request happened to leave in the cache
//! still save the engine the work (its counters and `/metrics` show it), but not the search its
//! budget: otherwise the same request with the same seed could spend, and so answer,
//! differently depending on what else ran before it or whether it was preempted.
#![deny(clippy::indexing_slicing)]

use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use ponder_strategies::{
    Cost, ExtendRequest, Extension, Generator, Prompt, Result, SeqHandle, StopKind, StrategyError,
    TokenInfo,
};

use crate::engine::{
    encode_prompt, ChatMessage, EngineError, Event, Executor, FinishReason, GroupRequest,
    LoadedModel, SamplingParams, SeqFinish, StopCondition,
};

/// Stops a branch once its generated text contains one of the stop strings.
#[derive(Debug)]
pub struct StopStrings {
    model: Arc<LoadedModel>,
    stops: Vec<String>,
}

/// Tokens of generated text decoded to test for a stop string (enough for any delimiter).
const STOP_WINDOW: usize = 16;

impl StopStrings {
    /// Stops a branch of `model` once its generated text completes one of `stops`.
    pub fn new(model: Arc<LoadedModel>, stops: Vec<String>) -> Self {
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
        self.stops
            .iter()
            .any(|s| now.matches(s.as_str()).count() > before.matches(s.as_str()).count())
    }
}

/// The full-block prefixes this generator has computed, as a chain of hashes (hash of block
/// k = hash(hash of block k-1, its tokens)): a token list's leading blocks found here were
/// paid for by this search, whichever of its sequences computed them.
#[derive(Debug, Default)]
struct PaidPrefixes {
    blocks: HashSet<u64>,
}

impl PaidPrefixes {
    fn chain(tokens: &[u32], block_size: usize) -> impl Iterator<Item = u64> + '_ {
        tokens.chunks_exact(block_size).scan(0u64, |prev, block| {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            (*prev, block).hash(&mut h);
            *prev = h.finish();
            Some(*prev)
        })
    }

    /// Leading positions of `tokens` (whole blocks) already paid for.
    fn paid(&self, tokens: &[u32], block_size: usize) -> usize {
        Self::chain(tokens, block_size)
            .take_while(|h| self.blocks.contains(h))
            .count()
            * block_size
    }

    /// Records that the first `computed` positions of `tokens` have been computed.
    fn pay(&mut self, tokens: &[u32], computed: usize, block_size: usize) {
        // `computed` may run past the end: then all of `tokens`.
        let prefix = tokens.get(..computed).unwrap_or(tokens);
        self.blocks.extend(Self::chain(prefix, block_size));
    }
}

#[derive(Debug, Clone)]
struct LocalSeq {
    tokens: Vec<u32>,
    /// Positions whose KV the executor has computed (its radix index holds their full blocks).
    computed: usize,
}

/// The `Generator` port over the local executor.
#[derive(Debug)]
pub struct LocalGenerator {
    model: Arc<LoadedModel>,
    executor: Arc<Executor>,
    block_size: usize,
    seqs: Mutex<HashMap<u64, LocalSeq>>,
    paid: Mutex<PaidPrefixes>,
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
        EngineError::ExceedsKvPool { .. } => StrategyError::Capacity(e.to_string()),
        e => StrategyError::Generator(e.to_string()),
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
            paid: Mutex::default(),
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

    /// Leading positions of `tokens` this search has paid for (whole blocks).
    fn paid(&self, tokens: &[u32]) -> usize {
        self.paid
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .paid(tokens, self.block_size)
    }

    fn get(&self, seq: SeqHandle) -> Result<LocalSeq> {
        self.lock()
            .get(&seq.0)
            .cloned()
            .ok_or_else(|| StrategyError::Generator(format!("unknown sequence {}", seq.0)))
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
}

/// One executor group: requests (by index) that continue the same tokens.
struct Group {
    tokens: Vec<u32>,
    /// Leading positions this search has already paid for (full blocks), charged nothing.
    cached: usize,
    members: Vec<usize>,
    max_tokens: usize,
    stop: Vec<String>,
}

#[async_trait]
impl Generator for LocalGenerator {
    async fn open(&self, prompt: &Prompt) -> Result<(SeqHandle, usize)> {
        if prompt.user.trim().is_empty() {
            return Err(StrategyError::Generator(
                "invalid prompt: the user message is empty".into(),
            ));
        }
        let mut messages = Vec::new();
        if let Some(system) = &prompt.system {
            messages.push(ChatMessage::new("system", system));
        }
        messages.push(ChatMessage::new("user", &prompt.user));
        let text = self.model.render_chat(&messages).map_err(engine)?;
        let tokens = encode_prompt(&self.model, &text).map_err(engine)?;
        let len = tokens.len();
        Ok((
            self.insert(LocalSeq {
                tokens,
                computed: 0,
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
            .ok_or_else(|| StrategyError::Generator(format!("unknown sequence {}", seq.0)))?;
        s.tokens.extend_from_slice(&ids);
        Ok(ids.len())
    }

    fn prefill_bound(&self, seq: SeqHandle) -> Result<usize> {
        let s = self.get(seq)?;
        // What this search computed before is free; the rest is charged.
        Ok(s.tokens.len() - self.paid(&s.tokens))
    }

    fn prefill_bound_batch(&self, seqs: &[SeqHandle]) -> Result<usize> {
        // `extend` sends sequences with identical tokens as one group: their context is
        // computed once.
        let mut distinct: Vec<LocalSeq> = Vec::new();
        for seq in seqs {
            let s = self.get(*seq)?;
            if !distinct.iter().any(|d| d.tokens == s.tokens) {
                distinct.push(s);
            }
        }
        Ok(distinct
            .iter()
            .map(|s| s.tokens.len() - self.paid(&s.tokens))
            .sum())
    }

    async fn extend(&self, batch: &[ExtendRequest]) -> Result<Vec<Extension>> {
        let context = self.model.model.config().context_length;
        // Group requests continuing identical tokens with identical limits.
        let mut groups: Vec<Group> = Vec::new();
        for (i, req) in batch.iter().enumerate() {
            let seq = self.get(req.seq)?;
            let room = context.saturating_sub(seq.tokens.len() + 1);
            let max_tokens = req.max_tokens.min(room);
            match groups.iter_mut().find(|g| {
                g.tokens == seq.tokens && g.max_tokens == max_tokens && g.stop == req.stop
            }) {
                Some(g) => g.members.push(i),
                None => {
                    let cached = self.paid(&seq.tokens);
                    groups.push(Group {
                        tokens: seq.tokens,
                        cached,
                        members: vec![i],
                        max_tokens,
                        stop: req.stop.clone(),
                    });
                }
            }
        }
        let mut results: Vec<Option<Extension>> = vec![None; batch.len()];
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
            let stops: Vec<String> = g.stop.iter().filter(|s| !s.is_empty()).cloned().collect();
            let stop_condition: Option<Arc<dyn StopCondition>> = (!stops.is_empty()).then(|| {
                Arc::new(StopStrings {
                    model: Arc::clone(&self.model),
                    stops,
                }) as Arc<dyn StopCondition>
            });
            let req = GroupRequest {
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
            };
            handles.push((g, self.executor.submit(req).await.map_err(engine)?));
        }
        for (g, mut handle) in handles {
            let index: HashMap<_, _> = handle
                .seqs
                .iter()
                .copied()
                .zip(g.members.iter().copied())
                .collect();
            let mut tokens: HashMap<usize, (Vec<u32>, Vec<TokenInfo>)> = HashMap::new();
            // What the engine really computed and reused (it may beat the charge below).
            let mut engine_cost = Cost::default();
            let mut open = handle.seqs.len();
            let mut last_token: HashMap<crate::engine::SeqId, std::time::Instant> = HashMap::new();
            while open > 0 {
                let Some(event) = handle.events.recv().await else {
                    return Err(StrategyError::Generator("the executor stopped".into()));
                };
                match event {
                    Event::Token { seq, token } => {
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
                        computed, reused, ..
                    } => {
                        engine_cost.prefill_computed += computed;
                        engine_cost.prefill_reused += reused;
                    }
                    Event::Finished { seq, reason } => {
                        open -= 1;
                        let Some(&i) = index.get(&seq) else { continue };
                        let (ids, infos) = tokens.remove(&i).unwrap_or_default();
                        let text = self.model.tokenizer.decode(&ids).map_err(engine)?;
                        let stop = match reason {
                            SeqFinish::Done(FinishReason::Length) => StopKind::Length,
                            SeqFinish::Done(_)
                                if g.stop
                                    .iter()
                                    .any(|s| !s.is_empty() && text.contains(s.as_str())) =>
                            {
                                StopKind::Stop
                            }
                            SeqFinish::Done(_) => StopKind::Eos,
                            SeqFinish::Cancelled => {
                                return Err(StrategyError::Generator(
                                    "the executor cancelled a sequence".into(),
                                ))
                            }
                        };
                        // An end-of-sequence token was sampled (a decode step) but is not text.
                        let generated = ids.len() as u64 + u64::from(stop == StopKind::Eos);
                        {
                            let mut seqs = self.lock();
                            if let Some(s) = batch.get(i).and_then(|req| seqs.get_mut(&req.seq.0)) {
                                // The last sampled token's KV is computed by the next call.
                                s.computed = s.tokens.len() + ids.len().saturating_sub(1);
                                s.tokens.extend_from_slice(&ids);
                                self.paid.lock().unwrap_or_else(|p| p.into_inner()).pay(
                                    &s.tokens,
                                    s.computed,
                                    self.block_size,
                                );
                            }
                        }
                        if let Some(result) = results.get_mut(i) {
                            *result = Some(Extension {
                                text,
                                tokens: infos,
                                stop,
                                cost: Cost {
                                    generated,
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
            tracing::trace!(
                charged,
                computed = engine_cost.prefill_computed,
                reused = engine_cost.prefill_reused,
                "group prefill"
            );
            if let Some(first) = g
                .members
                .first()
                .and_then(|&i| results.get_mut(i)?.as_mut())
            {
                first.cost.prefill_computed += charged;
                first.cost.prefill_reused += g.cached as u64;
            }
        }
        results
            .into_iter()
            .map(|r| {
                r.ok_or_else(|| {
                    StrategyError::Generator("a sequence ended without a result".into())
                })
            })
            .collect()
    }

    fn release(&self, seq: SeqHandle) {
        self.lock().remove(&seq.0);
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::PaidPrefixes;

    #[test]
    fn only_whole_blocks_of_paid_prefixes_are_free() {
        let mut paid = PaidPrefixes::default();
        let a: Vec<u32> = (0..40).collect();
        assert_eq!(paid.paid(&a, 16), 0);
        paid.pay(&a, 39, 16);
        assert_eq!(
            paid.paid(&a, 16),
            32,
            "two whole blocks; the partial third is recomputed"
        );
        // A sibling sharing the first 20 tokens gets the first block free, not the second.
        let mut b = a[..20].to_vec();
        b.extend(100..130);
        assert_eq!(paid.paid(&b, 16), 16);
        // The same block contents after a different first block are a different prefix.
        let mut c: Vec<u32> = (1000..1016).collect();
        c.extend(16..32);
        assert_eq!(paid.paid(&c, 16), 0);
    }
}
