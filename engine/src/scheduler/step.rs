//! One scheduler step: retire, admit, plan a batch that fits the pool (releasing parked scored
//! sequences, then preempting, if it must), run one forward pass, sample, fork groups' branches,
//! read scoring requests' positions.

use std::collections::HashMap;

use candle_core::Tensor;

use super::*;
use crate::device::ComputeDevice;

/// A planned piece of work: `len` tokens of `seq` starting at its `computed` position.
#[derive(Debug, Clone, Copy)]
struct Planned {
    seq: SeqId,
    len: usize,
    prefill: bool,
}

impl Scheduler {
    /// Runs one forward pass over every live sequence and returns what happened.
    pub fn step(&mut self) -> Result<Vec<Event>> {
        let mut events = std::mem::take(&mut self.pending);
        // On the CPU one helper stays hot through the forward pass and the sampling after it.
        let _hot_helper = matches!(self.model.compute_device(), ComputeDevice::Cpu)
            .then(ponder_kernels::HotHelper::start);
        self.retire_cancelled(&mut events);
        self.admit();
        // Groups whose whole prompt a kept prompt covered: fork their branches from its logits.
        let ready: Vec<(SeqId, Arc<[f32]>)> = self
            .seqs
            .iter_mut()
            .filter_map(|(id, s)| {
                let logits = s.role.start_mut()?.ready.take()?;
                Some((*id, logits))
            })
            .collect();
        for (id, logits) in ready {
            self.fork_branches(id, &logits, &mut events)?;
        }
        let plan = self.plan()?;
        if plan.is_empty() {
            return Ok(events);
        }
        let chunks: Vec<SeqChunk<'_>> = plan
            .iter()
            .map(|p| {
                let s = &self.seqs[&p.seq];
                SeqChunk {
                    seq: p.seq,
                    tokens: &s.tokens[s.computed..s.computed + p.len],
                    start_pos: s.computed,
                }
            })
            .collect();
        let readouts: Vec<Readout> = plan
            .iter()
            .map(|p| {
                let s = &self.seqs[&p.seq];
                match &s.role {
                    Role::Score(score) => score.readout(s.computed, p.len),
                    Role::Sample(_) | Role::Fork { .. } | Role::PrefillOnly { .. } => {
                        Readout::LastLogits
                    }
                }
            })
            .collect();
        let outputs = self
            .model
            .forward_readouts(&chunks, &mut self.store, &readouts)?;
        self.counters.forward_passes += 1;
        let mut drawn = self.draw_all(&plan, &outputs);
        let used = self.store.stats().used_blocks as u64;
        self.counters.peak_blocks_used = self.counters.peak_blocks_used.max(used);
        for (p, output) in plan.iter().zip(outputs) {
            if p.prefill {
                self.counters.prefill_tokens_computed += p.len as u64;
            }
            let Some(s) = self.seqs.get_mut(&p.seq) else {
                continue;
            };
            s.computed += p.len;
            if p.prefill {
                s.prefill.0 += p.len as u64;
            }
            if let Role::Score(score) = &mut s.role {
                score.record(output)?;
                self.counters.score_tokens_computed += p.len as u64;
                if s.computed == s.tokens.len() {
                    self.finish_score(p.seq);
                }
                continue;
            }
            if s.computed < s.tokens.len() {
                continue; // more prefill chunks to come
            }
            if matches!(s.role, Role::Sample(_)) {
                if p.prefill {
                    let (computed, reused) = std::mem::take(&mut s.prefill);
                    events.push(Event::Prefill {
                        seq: p.seq,
                        computed,
                        reused,
                        kept_prompt: None,
                    });
                }
                s.phase = Phase::Decode;
                let token = drawn.remove(&p.seq).ok_or(EngineError::MissingOutput {
                    what: "logits",
                    seq: Some(p.seq),
                })??;
                self.accept(p.seq, token, &mut events);
            } else {
                let logits: Vec<f32> = output
                    .ok_or(EngineError::MissingOutput {
                        what: "logits",
                        seq: Some(p.seq),
                    })?
                    .to_vec1()?;
                self.fork_branches(p.seq, &logits, &mut events)?;
            }
        }
        Ok(events)
    }

    /// Samples the next token of every planned sequence that finishes its chunk with a sampler
    /// of its own, from `outputs` (the forward pass's readouts, in plan order). The random
    /// numbers are taken here in plan order; the passes over the vocabulary, most of a
    /// batch's sampling time, run on this thread and a helper (`map_tasks`).
    fn draw_all(
        &mut self,
        plan: &[Planned],
        outputs: &[Option<Tensor>],
    ) -> HashMap<SeqId, Result<SampledToken>> {
        let mut jobs = Vec::new();
        for (p, output) in plan.iter().zip(outputs) {
            let Some(s) = self.seqs.get_mut(&p.seq) else {
                continue;
            };
            let (Some(logits), Role::Sample(sampler)) = (output, &mut s.role) else {
                continue;
            };
            if s.computed + p.len >= s.tokens.len() {
                jobs.push((p.seq, logits, sampler.prepare()));
            }
        }
        let seqs = &self.seqs;
        let tokens = ponder_kernels::map_tasks(jobs.len(), &|i| {
            let (seq, logits, draw) = &jobs[i];
            let context = seqs.get(seq).map_or(&[][..], |s| &s.tokens[..]);
            draw.sample(&logits.to_vec1::<f32>()?, context)
        });
        jobs.iter().map(|(seq, _, _)| *seq).zip(tokens).collect()
    }

    /// Steps until every sequence has finished, collecting the events.
    pub fn run_to_completion(&mut self) -> Result<Vec<Event>> {
        let mut all = Vec::new();
        while !self.is_idle() {
            all.extend(self.step()?);
        }
        all.append(&mut self.pending);
        Ok(all)
    }

    fn retire_cancelled(&mut self, events: &mut Vec<Event>) {
        let done: Vec<SeqId> = self
            .seqs
            .iter()
            .filter(|(_, s)| {
                // A group's prompt whose branches were all cancelled before it forked them.
                s.cancelled || matches!(&s.role, Role::Fork { branches, .. } if branches.is_empty())
            })
            .map(|(id, _)| *id)
            .collect();
        for id in done {
            if let Some(s) = self.seqs.remove(&id) {
                // Prefill computed but not yet reported (a prompt or a recompute cut short) is
                // reported before the end, so the events bill every position computed. A
                // scoring request's is in no result: it was cancelled before it had one.
                let unreported = !matches!(s.role, Role::Score(_)) && s.prefill != (0, 0);
                if s.cancelled && unreported {
                    events.push(Event::Prefill {
                        seq: id,
                        computed: s.prefill.0,
                        reused: s.prefill.1,
                        kept_prompt: None,
                    });
                }
                if s.cancelled {
                    events.push(Event::Finished {
                        seq: id,
                        reason: SeqFinish::Cancelled,
                    });
                }
            }
            self.store.release(id);
            self.waiting.retain(|w| *w != id);
        }
    }

    fn admit(&mut self) {
        let running = self.seqs.values().filter(|s| s.running).count();
        let mut slots = self.config.max_running.saturating_sub(running);
        let mut deferred = Vec::new();
        while slots > 0 {
            let Some(id) = self.waiting.pop_front() else {
                break;
            };
            let Some(s) = self.seqs.get(&id) else {
                continue;
            };
            if self.prefilling_shared_blocks(s) {
                deferred.push(id);
                continue;
            }
            // Admit only what can take its first prefill chunk now; otherwise a preempted
            // sequence would be re-admitted and preempted again every step.
            let first_chunk = s.tokens.len().min(self.config.max_step_tokens);
            let blocks = first_chunk.div_ceil(self.store.block_size()) + 1;
            if self.store.available_blocks() < blocks {
                // Parked scored sequences give way before anything waits.
                self.free_retained_until(blocks);
            }
            let Some(s) = self.seqs.get(&id) else {
                continue;
            };
            if self.store.available_blocks() < blocks {
                self.waiting.push_front(id);
                break;
            }
            // Reuse cached prompt blocks (or a parked scored sequence); an error here just
            // means "not now".
            let opened = self
                .store
                .open(id, &s.tokens)
                .and_then(|reused| self.resume_score(id, reused))
                .and_then(|reused| self.resume_kept(id, reused));
            match opened {
                Ok(reused) => {
                    let Some(s) = self.seqs.get_mut(&id) else {
                        continue;
                    };
                    s.computed = reused;
                    s.prefill.1 += reused as u64;
                    s.running = true;
                    self.counters.prefill_tokens_reused += reused as u64;
                    if matches!(s.role, Role::Score(_)) {
                        self.counters.score_tokens_reused += reused as u64;
                    }
                    slots -= 1;
                }
                Err(_) => {
                    self.store.release(id);
                    self.waiting.push_front(id);
                    break;
                }
            }
        }
        for id in deferred.into_iter().rev() {
            self.waiting.push_front(id);
        }
    }

    /// Whether a running sequence is about to compute a whole block of `s`'s prompt that it
    /// shares (same tokens from position 0) and that no cache holds yet. Admitting `s` now would
    /// compute those positions twice in the same step; one step later the prefix index serves
    /// them (a block enters the index when its positions are planned). Many prompts sharing a
    /// long opening — the questions an LLM judge asks after the same instructions and problem,
    /// requests with one system prompt — so compute it once.
    fn prefilling_shared_blocks(&self, s: &Sequence) -> bool {
        let bs = self.store.block_size().max(1);
        let limit = s.tokens.len().saturating_sub(1);
        self.seqs.values().any(|a| {
            if !a.running || !matches!(a.phase, Phase::Prefill) {
                return false;
            }
            let shared = ponder_kvcache::shared_prefix_len(&a.tokens, &s.tokens).min(limit);
            a.computed / bs * bs + bs <= shared / bs * bs
        })
    }

    /// Decode tokens first, then prefill chunks within the step's token budget; preempts until
    /// the plan fits the pool.
    fn plan(&mut self) -> Result<Vec<Planned>> {
        loop {
            let mut order: Vec<(&SeqId, &Sequence)> =
                self.seqs.iter().filter(|(_, s)| s.running).collect();
            order.sort_by_key(|(_, s)| {
                (
                    std::cmp::Reverse(s.priority),
                    s.arrival,
                    matches!(s.phase, Phase::Prefill),
                )
            });
            let mut budget = self.config.max_step_tokens;
            let mut plan = Vec::new();
            for (id, s) in order
                .iter()
                .filter(|(_, s)| matches!(s.phase, Phase::Decode))
            {
                if budget == 0 {
                    break;
                }
                plan.push(Planned {
                    seq: **id,
                    len: s.tokens.len() - s.computed,
                    prefill: false,
                });
                budget -= 1;
            }
            for (id, s) in order
                .iter()
                .filter(|(_, s)| matches!(s.phase, Phase::Prefill))
            {
                if budget == 0 {
                    break;
                }
                let len = (s.tokens.len() - s.computed).min(budget);
                plan.push(Planned {
                    seq: **id,
                    len,
                    prefill: true,
                });
                budget -= len;
            }
            let needed: usize = plan
                .iter()
                .map(|p| self.store.blocks_needed(p.seq, p.len))
                .sum();
            if needed <= self.store.available_blocks() {
                return Ok(plan);
            }
            if !self.retained.is_empty() {
                self.free_retained_until(needed);
                continue;
            }
            if !self.preempt_one() {
                return Err(EngineError::OutOfBlocks {
                    needed,
                    available: self.store.available_blocks(),
                });
            }
        }
    }

    /// Frees the lowest-priority, latest-arrived running sequence; its tokens are recomputed
    /// when it is admitted again.
    fn preempt_one(&mut self) -> bool {
        let running = self.seqs.iter().filter(|(_, s)| s.running).count();
        if running <= 1 {
            return false;
        }
        let victim = self
            .seqs
            .iter()
            .filter(|(_, s)| s.running)
            .min_by_key(|(_, s)| (s.priority, std::cmp::Reverse(s.arrival)))
            .map(|(id, _)| *id);
        let Some(id) = victim else { return false };
        self.store.release(id);
        if let Some(s) = self.seqs.get_mut(&id) {
            s.running = false;
            s.computed = 0;
            s.phase = Phase::Prefill;
        }
        self.waiting.push_front(id);
        self.counters.preemptions += 1;
        true
    }

    /// Samples the next token of `seq` from `logits`, and finishes it if that was its last.
    fn sample_into(&mut self, seq: SeqId, logits: &[f32], events: &mut Vec<Event>) -> Result<()> {
        let Some(s) = self.seqs.get_mut(&seq) else {
            return Ok(());
        };
        let Role::Sample(sampler) = &mut s.role else {
            return Ok(());
        };
        let token = sampler.sample(logits, &s.tokens)?;
        self.accept(seq, token, events);
        Ok(())
    }

    /// Appends `token` to `seq`, and finishes the sequence if that was its last.
    fn accept(&mut self, seq: SeqId, token: SampledToken, events: &mut Vec<Event>) {
        let context = self.model.config().context_length;
        let Some(s) = self.seqs.get_mut(&seq) else {
            return;
        };
        self.counters.tokens_generated += 1;
        s.generated += 1;
        let finish = if s.stop_tokens.contains(&token.token) {
            Some(SeqFinish::Stop)
        } else {
            s.tokens.push(token.token);
            events.push(Event::Token { seq, token });
            if s.stop_condition
                .as_ref()
                .is_some_and(|c| c.should_stop(&s.tokens[s.prompt_len..]))
            {
                Some(SeqFinish::Stop)
            } else {
                (s.generated >= s.max_new_tokens || s.tokens.len() >= context)
                    .then_some(SeqFinish::Length)
            }
        };
        if let Some(reason) = finish {
            match self.seqs.remove(&seq) {
                Some(s) if s.keep => self.keep_finished(seq, s.tokens),
                _ => self.store.release(seq),
            }
            events.push(Event::Finished { seq, reason });
        }
    }

    /// The prompt of a group is computed: fork every branch from it and sample their first tokens.
    fn fork_branches(
        &mut self,
        parent: SeqId,
        logits: &[f32],
        events: &mut Vec<Event>,
    ) -> Result<()> {
        let Some(mut p) = self.seqs.remove(&parent) else {
            return Ok(());
        };
        let placeholder = Role::PrefillOnly {
            start: PromptStart::default(),
        };
        let (branches, prefill_only) = match std::mem::replace(&mut p.role, placeholder) {
            Role::Fork { branches, .. } => (branches, false),
            Role::PrefillOnly { .. } => (Vec::new(), true),
            // Only a prompt forks; anything else goes back as it was.
            role @ (Role::Sample(_) | Role::Score(_)) => {
                p.role = role;
                self.seqs.insert(parent, p);
                return Ok(());
            }
        };
        let report_on = match branches.first() {
            Some((first, _)) => Some(*first),
            None => prefill_only.then_some(parent),
        };
        // A kept prompt is reported to its caller, who releases it; unreported, it is not kept.
        let keep_prompt = p.keep && report_on.is_some();
        if let Some(seq) = report_on {
            let (computed, reused) = std::mem::take(&mut p.prefill);
            events.push(Event::Prefill {
                seq,
                computed,
                reused,
                kept_prompt: keep_prompt.then_some(parent),
            });
        }
        for (child, sampler) in branches {
            self.store.fork(parent, child)?;
            self.seqs.insert(
                child,
                Sequence {
                    tokens: p.tokens.clone(),
                    computed: p.computed,
                    generated: 0,
                    phase: Phase::Decode,
                    role: Role::Sample(sampler),
                    max_new_tokens: p.max_new_tokens,
                    stop_tokens: Arc::clone(&p.stop_tokens),
                    stop_condition: p.stop_condition.clone(),
                    prompt_len: p.prompt_len,
                    prefill: (0, 0),
                    priority: p.priority,
                    arrival: p.arrival,
                    running: true,
                    cancelled: false,
                    keep: p.keep,
                },
            );
            self.sample_into(child, logits, events)?;
        }
        if keep_prompt {
            self.keep_prompt(parent, p.tokens, logits);
        } else {
            self.store.release(parent);
        }
        if prefill_only {
            events.push(Event::Finished {
                seq: parent,
                reason: SeqFinish::Length,
            });
        }
        Ok(())
    }
}
