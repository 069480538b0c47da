//! Continuous batching over the paged KV store: every live sequence advances in one forward
//! pass per step, new sequences join between steps, finished ones leave.
//!
//! Owns the sequences' states and the store; the caller (an actor thread, a benchmark, a test)
//! calls [`Scheduler::step`] in a loop and reads the events. Per step: every decoding sequence
//! contributes one token; the remaining token budget goes to prefill chunks of waiting
//! sequences (chunked prefill, so a long prompt never stalls decoding). A sequence group (one
//! prompt, N samples) prefills its prompt once and forks N branches that share its blocks.
//! When the pool cannot hold a step, the lowest-priority running sequences are preempted (their
//! blocks freed, their tokens recomputed later) instead of failing. Sampling uses each
//! sequence's own seeded RNG and the kernels are batch-invariant, so a sequence's tokens do not
//! depend on what it was batched with, forked from, or whether it was preempted.
//!
//! Scoring requests ([`ScoreRequest`], see `score.rs`) ride the same batches: a text is
//! prefilled (reusing cached blocks) and read at chosen positions, with no sampling. A scored
//! sequence is then parked, its KV kept, so that a later request extending its tokens (the next
//! step of the same solution) computes only the new tokens.
//!
//! Generation groups may ask to *keep* their branches ([`GroupRequest::keep`], see `keep.rs`):
//! a finished branch's KV, partial last block included, stays held under its id until the
//! caller releases it, and a later group that continues it ([`GroupRequest::resume`]) forks it
//! copy-on-write and computes only its new tokens — a search's tree is computed once.
//!
//! Kept branches and prompts and parked scores are one thing, a retained sequence (`retain.rs`):
//! one store, one release path, given up under memory pressure before anything is preempted.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use serde::Serialize;

use super::error::{EngineError, Result};
use super::kv::{KvStore, SeqId};
use super::model::{Model, Readout, SeqChunk};
use super::paged_kv::PagedKvStore;
use super::sampling::{SampledToken, Sampler, SamplingParams};

/// Limits of one step.
#[derive(Debug, Clone, Copy)]
pub struct SchedulerConfig {
    /// Most tokens (decode + prefill) in one forward pass.
    pub max_step_tokens: usize,
    /// Most sequences decoding at once.
    pub max_running: usize,
    /// Scored sequences kept parked (KV held) for requests that extend them; the oldest is
    /// released past this, and every parked one before anything is preempted.
    pub max_parked: usize,
    /// Finished branches kept for their callers (see [`GroupRequest::keep`]); the oldest is
    /// released past this, and every kept one before anything is preempted.
    pub max_kept: usize,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        Self {
            max_step_tokens: 512,
            max_running: 256,
            max_parked: 32,
            max_kept: 512,
        }
    }
}

/// Decides, after each sampled token, whether a branch should stop there (the token is kept).
/// The service uses it for stop strings (a step delimiter), which need the tokenizer.
pub trait StopCondition: Send + Sync + std::fmt::Debug {
    /// Whether the branch stops after its latest token; `generated` holds every token this
    /// branch sampled, the latest last.
    fn should_stop(&self, generated: &[u32]) -> bool;
}

/// A prompt to continue `samples.len()` times.
#[derive(Debug, Clone)]
pub struct GroupRequest {
    /// Prompt token ids (at least one).
    pub prompt: Vec<u32>,
    /// One sampling configuration (seed included) per branch.
    pub samples: Vec<SamplingParams>,
    /// Most new tokens per branch.
    pub max_new_tokens: usize,
    /// Tokens that end a branch.
    pub stop_tokens: Vec<u32>,
    /// A stop rule checked after every sampled token (stop strings); `None` for none.
    pub stop_condition: Option<Arc<dyn StopCondition>>,
    /// Higher runs first and is preempted last.
    pub priority: i32,
    /// Keep each branch's KV when it finishes, under its id, and the prompt's (with the logits
    /// after it) under the id reported by its `Prefill` event, until released
    /// ([`Scheduler::release_retained`]) or given up under memory pressure. A kept group may have
    /// no samples: it only computes and keeps its prompt (its id is then the only one returned,
    /// and it reports `Prefill` and `Finished`).
    pub keep: bool,
    /// A kept branch whose tokens begin `prompt`: the prompt continues it and only the tokens
    /// after it are computed (ignored if it was released or does not match).
    pub resume: Option<SeqId>,
}

/// What a step produced.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum Event {
    /// A branch generated a token.
    Token {
        /// The branch.
        seq: SeqId,
        /// The token and its logprobs.
        token: SampledToken,
    },
    /// Context tokens were run through the model (or served from cache) before a branch could
    /// sample: a group's prompt (reported on its first branch) or a preempted branch's recompute.
    Prefill {
        /// The branch it is reported on.
        seq: SeqId,
        /// Tokens computed.
        computed: u64,
        /// Tokens served from cached blocks.
        reused: u64,
        /// For a [`GroupRequest::keep`] group: its prompt, kept under this id with the logits
        /// after it, so that a later group with exactly these tokens computes nothing.
        kept_prompt: Option<SeqId>,
    },
    /// A branch finished.
    Finished {
        /// The branch.
        seq: SeqId,
        /// Why.
        reason: SeqFinish,
    },
}

/// Why one sequence ended in the engine (a scheduler branch, or the reference loop's one
/// sequence). The engine's view only: a stop token and a [`StopCondition`] (stop strings) are
/// both [`Self::Stop`]. One layer up, the generator port's `StopKind` tells a stop string from
/// an end-of-sequence token for one continuation; a search's `SearchFinish` says why a whole
/// search ended (completed, budget, deadline, cancelled); the API's `ChoiceFinish` is OpenAI's
/// `finish_reason` of one choice (`stop`/`length`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SeqFinish {
    /// A stop token was sampled or the stop condition held.
    Stop,
    /// `max_tokens` or the context length was reached.
    Length,
    /// Cancelled by the caller.
    Cancelled,
}

/// Counters for tests, metrics and benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SchedulerCounters {
    /// Prompt (and recomputed) tokens run through the model.
    pub prefill_tokens_computed: u64,
    /// Prompt tokens served from cached blocks.
    pub prefill_tokens_reused: u64,
    /// Tokens sampled.
    pub tokens_generated: u64,
    /// Forward passes.
    pub forward_passes: u64,
    /// Sequences preempted for lack of blocks.
    pub preemptions: u64,
    /// Most blocks referenced at once.
    pub peak_blocks_used: u64,
    /// Scoring requests completed.
    pub score_requests: u64,
    /// Tokens computed for scoring requests (also counted in `prefill_tokens_computed`).
    pub score_tokens_computed: u64,
    /// Tokens of scoring requests served from cache or a parked sequence (also counted in
    /// `prefill_tokens_reused`).
    pub score_tokens_reused: u64,
    /// Finished branches whose KV is kept now (a gauge, not a total).
    pub kept_branches: u64,
}

#[derive(Debug)]
enum Phase {
    /// Tokens `computed..` still need a forward pass before sampling can continue.
    Prefill,
    /// One token per step.
    Decode,
}

#[derive(Debug)]
struct Sequence {
    /// Prompt plus generated tokens.
    tokens: Vec<u32>,
    /// Positions present in the KV store.
    computed: usize,
    generated: usize,
    phase: Phase,
    /// What it is for: sample, fork a group's branches, prefill only, or be read.
    role: Role,
    max_new_tokens: usize,
    stop_tokens: Arc<Vec<u32>>,
    stop_condition: Option<Arc<dyn StopCondition>>,
    /// Length of the prompt (generated tokens start here).
    prompt_len: usize,
    /// Prefill since the last `Prefill` event: (computed, reused).
    prefill: (u64, u64),
    priority: i32,
    /// Admission order, for tie-breaking priorities (older first).
    arrival: u64,
    running: bool,
    cancelled: bool,
    /// Keep its KV when it finishes (a kept group's prompt and branches).
    keep: bool,
}

/// What a sequence is for, which decides how every step treats it: one value where flags
/// (no sampler, a score state, prompt-only, resume, ready logits) could disagree.
// The sampler is held inline, as before the roles were one enum: a branch's sequence is what
// the hot loop samples from, and every sequence lives in one map anyway.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
enum Role {
    /// A branch: samples one token per step with its own seeded sampler.
    Sample(Sampler),
    /// A group's prompt: computed once, then it forks its branches from the logits after it
    /// (and leaves; a kept group's prompt stays kept). Retired if every branch is cancelled first.
    Fork {
        /// The branches to fork: (id, sampler).
        branches: Vec<(SeqId, Sampler)>,
        /// Where its computing starts.
        start: PromptStart,
    },
    /// A kept group without samples: computes its prompt and keeps it, samples nothing.
    PrefillOnly {
        /// Where its computing starts.
        start: PromptStart,
    },
    /// A scoring request: read at chosen positions, nothing sampled; parked when done.
    Score(ScoreState),
}

/// Where a group's prompt starts computing (see `keep.rs`).
#[derive(Debug, Default)]
struct PromptStart {
    /// A kept sequence whose tokens begin this prompt: it is continued, not recomputed.
    resume: Option<SeqId>,
    /// Set at admission when a kept prompt with its logits covered every token: the branches
    /// are forked from these logits with nothing computed.
    ready: Option<Arc<[f32]>>,
}

impl Role {
    /// A prompt's start (`None` for a branch or a scoring request).
    fn start(&self) -> Option<&PromptStart> {
        match self {
            Self::Fork { start, .. } | Self::PrefillOnly { start } => Some(start),
            Self::Sample(_) | Self::Score(_) => None,
        }
    }

    fn start_mut(&mut self) -> Option<&mut PromptStart> {
        match self {
            Self::Fork { start, .. } | Self::PrefillOnly { start } => Some(start),
            Self::Sample(_) | Self::Score(_) => None,
        }
    }
}

/// The continuous-batching loop's state.
#[derive(Debug)]
pub struct Scheduler {
    model: Arc<Model>,
    store: PagedKvStore,
    config: SchedulerConfig,
    seqs: BTreeMap<SeqId, Sequence>,
    waiting: VecDeque<SeqId>,
    next_id: SeqId,
    arrivals: u64,
    counters: SchedulerCounters,
    /// Events raised between steps (cancelled branches that never started).
    pending: Vec<Event>,
    /// Finished scoring requests not yet taken.
    scored: Vec<(SeqId, Scored)>,
    /// Kept branches and prompts, parked scores: KV held after its sequence left the batch.
    retained: retain::RetainedStore,
}

impl Scheduler {
    /// A scheduler over `model` with `store` as its KV memory.
    pub fn new(model: Arc<Model>, store: PagedKvStore, config: SchedulerConfig) -> Self {
        Self {
            model,
            store,
            config,
            seqs: BTreeMap::new(),
            waiting: VecDeque::new(),
            next_id: 1,
            arrivals: 0,
            counters: SchedulerCounters::default(),
            pending: Vec::new(),
            scored: Vec::new(),
            retained: retain::RetainedStore::default(),
        }
    }

    /// Counters so far.
    pub fn counters(&self) -> SchedulerCounters {
        SchedulerCounters {
            kept_branches: self.kept() as u64,
            ..self.counters
        }
    }

    /// The KV store (for its block statistics).
    pub fn store(&self) -> &PagedKvStore {
        &self.store
    }

    /// Whether nothing is queued or running.
    pub fn is_idle(&self) -> bool {
        self.seqs.is_empty()
    }

    /// Queues a prompt and its branches; returns the branches' ids in `samples` order.
    ///
    /// Rejected at admission, with nothing queued: an empty prompt, no samples, a request that
    /// cannot fit the context, or one that needs more blocks than the whole pool.
    pub fn submit(&mut self, req: GroupRequest) -> Result<Vec<SeqId>> {
        if req.prompt.is_empty() {
            return Err(EngineError::InvalidInput {
                field: "prompt",
                reason: "is empty".into(),
            });
        }
        if (req.samples.is_empty() && !req.keep) || req.max_new_tokens == 0 {
            return Err(EngineError::InvalidInput {
                field: "samples",
                reason: "need at least one sample of at least one token".into(),
            });
        }
        let context = self.model.config().context_length;
        if req.prompt.len() + req.max_new_tokens > context {
            return Err(EngineError::PromptTooLong {
                tokens: req.prompt.len() + req.max_new_tokens,
                context,
            });
        }
        let block_size = self.store.block_size();
        let total_blocks = self.store.stats().total_blocks;
        // The prompt's blocks are shared; each branch needs its own tail.
        let prompt_blocks = req.prompt.len().div_ceil(block_size);
        let branch_blocks =
            (req.prompt.len() % block_size + req.max_new_tokens).div_ceil(block_size);
        let needed = prompt_blocks + req.samples.len() * branch_blocks;
        if needed > total_blocks {
            return Err(EngineError::ExceedsKvPool {
                what: "request",
                needed,
                total: total_blocks,
            });
        }
        let prompt_len = req.prompt.len();
        let samplers = req
            .samples
            .into_iter()
            .map(|p| Sampler::new(p).map(|s| s.generated_from(prompt_len)))
            .collect::<Result<Vec<_>>>()?;
        let stop_tokens = Arc::new(req.stop_tokens);
        let parent = self.alloc_id();
        let branches: Vec<(SeqId, Sampler)> =
            samplers.into_iter().map(|s| (self.alloc_id(), s)).collect();
        let ids = if branches.is_empty() {
            vec![parent]
        } else {
            branches.iter().map(|b| b.0).collect()
        };
        let start = PromptStart {
            resume: req.resume,
            ready: None,
        };
        let role = if branches.is_empty() {
            Role::PrefillOnly { start }
        } else {
            Role::Fork { branches, start }
        };
        let arrival = self.arrivals;
        self.arrivals += 1;
        self.seqs.insert(
            parent,
            Sequence {
                prompt_len,
                prefill: (0, 0),
                stop_condition: req.stop_condition,
                tokens: req.prompt,
                computed: 0,
                generated: 0,
                phase: Phase::Prefill,
                role,
                max_new_tokens: req.max_new_tokens,
                stop_tokens,
                priority: req.priority,
                arrival,
                running: false,
                cancelled: false,
                keep: req.keep,
            },
        );
        self.waiting.push_back(parent);
        Ok(ids)
    }

    /// Cancels a branch; its blocks are freed at the next step.
    pub fn cancel(&mut self, seq: SeqId) {
        if let Some(s) = self.seqs.get_mut(&seq) {
            s.cancelled = true;
        }
        // A branch not yet forked lives in its parent's list.
        for s in self.seqs.values_mut() {
            let Role::Fork { branches, .. } = &mut s.role else {
                continue;
            };
            let before = branches.len();
            branches.retain(|(id, _)| *id != seq);
            if branches.len() != before {
                // The last branch gone, the prompt is retired unforked: what it computed is
                // reported on this branch, as its `Prefill` would have been.
                if branches.is_empty() && s.prefill != (0, 0) {
                    let (computed, reused) = std::mem::take(&mut s.prefill);
                    self.pending.push(Event::Prefill {
                        seq,
                        computed,
                        reused,
                        kept_prompt: None,
                    });
                }
                self.pending.push(Event::Finished {
                    seq,
                    reason: SeqFinish::Cancelled,
                });
            }
        }
    }

    fn alloc_id(&mut self) -> SeqId {
        let id = self.next_id;
        self.next_id += 1;
        id
    }
}

mod keep;
pub(crate) use keep::{prompt_start, KeptCover};
mod retain;
mod score;
mod step;

use score::ScoreState;
pub use score::{NextTokenLogprob, ScoreOutput, ScoreRequest, Scored};
