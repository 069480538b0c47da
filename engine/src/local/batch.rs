//! One `extend` call of the [`LocalGenerator`]: its requests grouped by identical tokens
//! (each group resumes from the kept branch covering most of its tokens), the groups submitted
//! to the executor together, and their events folded into results: tokens and their
//! probabilities, the kept branch of every finished sequence, the token tree of computed
//! positions, the cost tallied as it happens and, when streaming, each token sent as a
//! [`Piece`]. What is charged is described in the parent module.

use std::collections::HashMap;
use std::sync::Arc;

use ponder_kvcache::shared_prefix_len;
use ponder_strategies::{
    Cost, CostTally, ExtendRequest, Extension, GeneratorError, LogitAdjust, Piece, PieceSender,
    Result, Sampling, StopKind, Stops, StrategyError, TokenInfo,
};

use super::inflight::{Announced, InFlight};
use super::{engine, Claims, Kept, LocalGenerator, StopStrings};
use crate::scheduler::prompt_start;
use crate::{Event, GroupHandle, GroupRequest, SamplingParams, SeqFinish, SeqId, StopCondition};

impl LocalGenerator {
    /// One `extend` call: every request of `batch` continued, the engine's work tallied as it
    /// happens, each token sent to `pieces` when given.
    pub(super) async fn run_batch(
        &self,
        batch: &[ExtendRequest],
        tally: &CostTally,
        pieces: Option<&PieceSender>,
    ) -> Result<Vec<Extension>> {
        self.check_logits(batch)?;
        let mut groups = self.groups(batch)?;
        let mut results: Vec<Option<Extension>> = vec![None; batch.len()];
        let mut claims = Claims::new();
        self.complete_prefixes(&mut groups, tally, &mut claims)
            .await?;
        // A group that computes part of its prompt announces it: a concurrent call needing
        // exactly that prompt waits for it (see `complete_prefixes`).
        for g in groups.iter_mut() {
            if g.max_tokens > 0 && g.resume.as_ref().is_none_or(|(_, c)| *c < g.tokens.len()) {
                g.announced = Some(self.inflight.announce(&g.tokens));
            }
        }
        // Every group is sent before any reply is awaited, so they all join the same step.
        let mut submitted = Vec::new();
        for g in &groups {
            if g.max_tokens == 0 {
                for &i in &g.members {
                    if let Some(pieces) = pieces {
                        let _ = pieces.send(Piece {
                            index: i,
                            text: String::new(),
                            tokens: Vec::new(),
                            finish: Some(StopKind::Length),
                        });
                    }
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
            submitted.push((g, self.executor.submit(self.group_request(g, batch))));
        }
        let mut handles = Vec::with_capacity(submitted.len());
        for (g, reply) in submitted {
            let handle = reply.await.map_err(engine)?;
            claims.extend(handle.seqs.iter().map(|&id| (id, self.keep(id))));
            handles.push((g, handle));
        }
        for (g, handle) in handles {
            self.collect(
                g,
                handle,
                batch,
                Report { tally, pieces },
                &mut claims,
                &mut results,
            )
            .await?;
        }
        results
            .into_iter()
            .map(|r| {
                r.ok_or_else(|| {
                    StrategyError::from(GeneratorError::Missing {
                        what: "result of a sequence",
                    })
                })
            })
            .collect()
    }

    /// The engine's sampler parameters for a request. Both port types are destructured whole,
    /// so a field added to either does not compile until it is passed on here.
    fn sampling(req: &ExtendRequest) -> SamplingParams {
        let Sampling {
            temperature,
            top_p,
            top_k,
            min_p,
            seed,
            top_logprobs,
        } = req.sampling;
        let LogitAdjust {
            repetition_penalty,
            presence_penalty,
            frequency_penalty,
            logit_bias,
        } = &req.logits;
        SamplingParams {
            temperature,
            top_k,
            top_p,
            min_p,
            repetition_penalty: *repetition_penalty,
            presence_penalty: *presence_penalty,
            frequency_penalty: *frequency_penalty,
            logit_bias: logit_bias.clone(),
            seed,
            top_logprobs,
        }
    }

    /// Refuses a `logit_bias` token outside the model's vocabulary.
    fn check_logits(&self, batch: &[ExtendRequest]) -> Result<()> {
        let vocab = self.model.model.config().vocab_size;
        for r in batch {
            r.logits.check_vocab(vocab)?;
        }
        Ok(())
    }

    /// Sends token `info` of request `i` to `pieces`, with the text it completes: the decoded
    /// `ids` past the `sent` bytes already sent, held back while a character is incomplete.
    fn send_piece(
        &self,
        pieces: &PieceSender,
        i: usize,
        ids: &[u32],
        info: TokenInfo,
        sent: &mut HashMap<usize, usize>,
    ) {
        let text = self.model.tokenizer.decode(ids).unwrap_or_default();
        let from = sent.get(&i).copied().unwrap_or(0);
        let new = if text.ends_with('\u{FFFD}') {
            ""
        } else {
            text.get(from..).unwrap_or_default()
        };
        sent.insert(i, from + new.len());
        // A receiver that went away wants no more pieces.
        let _ = pieces.send(Piece {
            index: i,
            text: new.to_string(),
            tokens: vec![info],
            finish: None,
        });
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
                        announced: None,
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
        // Whole blocks an earlier group of this call shares are computed once: the engine
        // admits a prompt only after the blocks it shares with one being computed are indexed.
        for i in 1..groups.len() {
            let (earlier, rest) = groups.split_at_mut(i);
            let Some(g) = rest.first_mut() else { continue };
            for e in earlier.iter() {
                let shared = shared_prefix_len(&e.tokens, &g.tokens);
                let indexed = prompt_start(g.tokens.len(), self.block_size, shared, None);
                g.cached = g.cached.max(indexed);
            }
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
                let shared = shared_prefix_len(computed, tokens);
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
    /// the sequence and the group both continue from there. First, a group that shares more
    /// of its prompt with a concurrent call's than it holds (the step a probe was submitted
    /// with, forks of one prompt extended in separate calls) waits for that call's kept prompt
    /// and continues from it ([`super::inflight`]).
    async fn complete_prefixes(
        &self,
        groups: &mut [Group],
        tally: &CostTally,
        claims: &mut Claims,
    ) -> Result<()> {
        // A group sharing more of its prompt with one a concurrent call is computing than it
        // holds already resumes from that call's kept prompt once it is computed (a call waits
        // only for calls already submitted, which never wait in turn).
        let mut waits = Vec::new();
        for (gi, g) in groups.iter().enumerate() {
            let holds = g.resume.as_ref().map_or(0, |(_, c)| *c).max(g.cached);
            if let Some((shared, slot)) = self.inflight.longest_shared(&g.tokens) {
                if shared > holds {
                    waits.push((gi, shared, slot));
                }
            }
        }
        for (gi, shared, slot) in waits {
            let Some(kept) = InFlight::wait(slot).await else {
                continue; // that call ended without it: compute it here
            };
            if let Some(g) = groups.get_mut(gi) {
                // Computed, and charged, by the call that announced it.
                g.cached = g.cached.max(shared);
                g.resume = Some((kept, shared));
            }
        }
        let mut prefixes: Vec<(Vec<u32>, Vec<usize>, u64)> = Vec::new();
        for (gi, g) in groups.iter().enumerate() {
            let Some((resume, _)) = &g.resume else {
                continue;
            };
            if let Some(p) = prefixes.iter_mut().find(|p| g.tokens.starts_with(&p.0)) {
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
            if let Some(prefix) = prefix {
                prefixes.push((prefix, vec![gi], resume.id));
            }
        }
        // Each prefix group is sent at once; replies are awaited after all are sent.
        let mut replies = Vec::new();
        for (prefix, members, resume) in prefixes {
            let reply = self.executor.submit(self.prefix_request(&prefix, resume));
            replies.push((prefix, members, reply));
        }
        let mut handles = Vec::with_capacity(replies.len());
        for (prefix, members, reply) in replies {
            let handle = reply.await.map_err(engine)?;
            claims.extend(handle.seqs.iter().map(|&id| (id, self.keep(id))));
            handles.push((prefix, members, handle));
        }
        for (prefix, members, handle) in handles {
            self.read_prefix(&prefix, &members, handle, groups, tally, claims)
                .await?;
        }
        Ok(())
    }

    /// A prompt-only group computing and keeping `prefix`, continuing the kept `resume`.
    fn prefix_request(&self, prefix: &[u32], resume: SeqId) -> GroupRequest {
        GroupRequest {
            prompt: prefix.to_vec(),
            samples: Vec::new(),
            max_new_tokens: 1,
            stop_tokens: Vec::new(),
            stop_condition: None,
            priority: self.priority,
            keep: true,
            resume: Some(resume),
        }
    }

    /// Reads a prefix group to its end: the prefix is kept, adopted by the sequences holding
    /// exactly it, and `members` continue from it.
    async fn read_prefix(
        &self,
        prefix: &[u32],
        members: &[usize],
        mut handle: GroupHandle,
        groups: &mut [Group],
        tally: &CostTally,
        claims: &mut Claims,
    ) -> Result<()> {
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
                    recomputed += self.tree().record(prefix, from);
                    read += computed + reused;
                }
                Event::Finished { seq, reason } => {
                    let claim = claims.remove(&seq);
                    if reason == SeqFinish::Cancelled {
                        return Err(GeneratorError::SequenceCancelled.into());
                    }
                    kept = Some(claim.unwrap_or_else(|| self.keep(seq)));
                    break;
                }
                Event::Token { .. } => {}
            }
        }
        let Some(kept) = kept else {
            return Err(GeneratorError::Stopped.into());
        };
        self.adopt(prefix, &kept);
        for (j, &gi) in members.iter().enumerate() {
            if let Some(g) = groups.get_mut(gi) {
                // The prefix's own reads are reported once, with the first group.
                g.prefix = if j == 0 { (read, recomputed) } else { (0, 0) };
                g.resume = Some((Arc::clone(&kept), prefix.len()));
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
        report: Report<'_>,
        claims: &mut Claims,
        results: &mut [Option<Extension>],
    ) -> Result<()> {
        let Report { tally, pieces } = report;
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
        let mut last_token: HashMap<SeqId, std::time::Instant> = HashMap::new();
        // Text bytes already sent to `pieces`, per request.
        let mut sent: HashMap<usize, usize> = HashMap::new();
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
                    let info = TokenInfo {
                        text: self.token_text(token.token),
                        logprob: token.logprob,
                        top,
                    };
                    if let Some(pieces) = pieces {
                        self.send_piece(pieces, i, &entry.0, info.clone(), &mut sent);
                    }
                    entry.1.push(info);
                }
                Event::Prefill {
                    seq,
                    computed,
                    reused,
                    kept_prompt,
                } => {
                    if let Some(id) = kept_prompt {
                        let kept = self.keep(id);
                        if let Some(announced) = &g.announced {
                            announced.computed(&kept);
                        }
                        prompt_kept = Some(kept);
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
                    let claim = claims.remove(&seq);
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
                    if let Some(pieces) = pieces {
                        let from = sent.get(&i).copied().unwrap_or(0);
                        let _ = pieces.send(Piece {
                            index: i,
                            text: text.get(from..).unwrap_or_default().to_string(),
                            tokens: Vec::new(),
                            finish: Some(stop),
                        });
                    }
                    // An end-of-sequence token was sampled (a decode step) but is not text.
                    let eos = u64::from(stop == StopKind::Eos);
                    tally.add(Cost {
                        generated: eos,
                        ..Cost::default()
                    });
                    let kept = claim.unwrap_or_else(|| self.keep(seq));
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

/// Where one call reports the engine's work as it happens: the cost tally, and each token when
/// streaming.
#[derive(Clone, Copy)]
struct Report<'a> {
    tally: &'a CostTally,
    pieces: Option<&'a PieceSender>,
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
    /// While the group runs: its prompt, announced to concurrent calls (see [`super::inflight`]).
    announced: Option<Announced>,
}
