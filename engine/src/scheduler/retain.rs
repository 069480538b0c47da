//! Retained sequences: KV the scheduler still holds after a sequence left the batch, so that a
//! later request continuing it computes only what is new. One store, one owner, one release
//! path for every reason to retain:
//! - a kept branch ([`GroupRequest::keep`]): a finished branch, held under its id for its caller;
//! - a kept prompt: a kept group's computed prompt with the logits after it;
//! - a parked score: a scored text, for the next scoring request that extends it (the next step
//!   of the same solution); nobody holds it.
//!
//! Every retained sequence leaves through [`Scheduler::release_retained`]: its caller's release
//! (kept ones), its kind's cap ([`SchedulerConfig::max_kept`], [`SchedulerConfig::max_parked`],
//! oldest first), or memory pressure (parked scores first, then kept sequences, oldest first,
//! always before a running sequence is preempted). This module owns that bookkeeping; where a
//! retained sequence is reused is `keep.rs` (resuming a kept one) and `score.rs` (extending a
//! parked one).

use super::*;

/// Why a sequence is retained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reason {
    /// A kept group's finished branch, held for its caller.
    Branch,
    /// A kept group's prompt, with the logits after it.
    Prompt,
    /// A scored text, parked for a request that extends it.
    Score,
}

impl Reason {
    /// Kept for a caller (released by it), as opposed to parked for whoever comes.
    pub(super) fn is_kept(self) -> bool {
        matches!(self, Self::Branch | Self::Prompt)
    }
}

/// One retained sequence.
#[derive(Debug)]
pub(super) struct Retained {
    pub(super) id: SeqId,
    pub(super) reason: Reason,
    /// The tokens at its computed positions.
    pub(super) tokens: Vec<u32>,
    /// The logits after `tokens` (a kept prompt's).
    pub(super) logits: Option<Arc<[f32]>>,
}

/// The retained sequences, least recently used first.
#[derive(Debug, Default)]
pub(super) struct RetainedStore {
    seqs: VecDeque<Retained>,
}

impl RetainedStore {
    /// How many are retained for `kept` (true: branches and prompts; false: parked scores).
    pub(super) fn count(&self, kept: bool) -> usize {
        self.seqs
            .iter()
            .filter(|r| r.reason.is_kept() == kept)
            .count()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.seqs.is_empty()
    }

    /// The retained sequence `id`.
    pub(super) fn get(&self, id: SeqId) -> Option<&Retained> {
        self.seqs.iter().find(|r| r.id == id)
    }

    /// Marks `id` most recently used (it was just reused).
    pub(super) fn touch(&mut self, id: SeqId) {
        if let Some(entry) = self.remove(id) {
            self.seqs.push_back(entry);
        }
    }

    /// The longest parked score whose tokens begin `tokens` (not empty), if any.
    pub(super) fn longest_score_prefix_of(&self, tokens: &[u32]) -> Option<&Retained> {
        self.seqs
            .iter()
            .filter(|r| r.reason == Reason::Score && !r.tokens.is_empty())
            .filter(|r| tokens.starts_with(&r.tokens))
            .max_by_key(|r| r.tokens.len())
    }

    /// The id of a retained sequence of `reason` with exactly `tokens`.
    fn same(&self, reason: Reason, tokens: &[u32]) -> Option<SeqId> {
        self.seqs
            .iter()
            .find(|r| r.reason == reason && r.tokens == tokens)
            .map(|r| r.id)
    }

    /// The oldest retained for `kept` (see [`Self::count`]), or of any kind.
    fn oldest(&self, kept: Option<bool>) -> Option<SeqId> {
        self.seqs
            .iter()
            .find(|r| kept.is_none_or(|k| r.reason.is_kept() == k))
            .map(|r| r.id)
    }

    fn remove(&mut self, id: SeqId) -> Option<Retained> {
        let i = self.seqs.iter().position(|r| r.id == id)?;
        self.seqs.remove(i)
    }
}

impl Scheduler {
    /// Retains `r` (its store sequence holds its computed positions), within its kind's cap.
    pub(super) fn retain(&mut self, r: Retained) {
        let kept = r.reason.is_kept();
        let cap = if kept {
            self.config.max_kept
        } else {
            self.config.max_parked
        };
        if cap == 0 {
            self.store.release(r.id);
            return;
        }
        // A parked score with the same tokens says nothing more: the newer replaces it.
        if r.reason == Reason::Score {
            if let Some(old) = self.retained.same(Reason::Score, &r.tokens) {
                self.release_retained(old);
            }
        }
        self.retained.seqs.push_back(r);
        while self.retained.count(kept) > cap {
            let Some(old) = self.retained.oldest(Some(kept)) else {
                break;
            };
            self.release_retained(old);
        }
    }

    /// Releases the retained sequence `id` and its KV blocks (a no-op if it is not retained:
    /// already released, given up under pressure, or never retained). The one way out.
    pub fn release_retained(&mut self, id: SeqId) {
        if self.retained.remove(id).is_some() {
            self.store.release(id);
        }
    }

    /// Releases every retained sequence, kept and parked (before a shutdown, or to see the pool
    /// empty).
    pub fn release_all_retained(&mut self) {
        while let Some(id) = self.retained.oldest(None) {
            self.release_retained(id);
        }
    }

    /// Releases retained sequences — parked scores first, then kept ones, oldest first — until
    /// `blocks` are available or none is left.
    pub(super) fn free_retained_until(&mut self, blocks: usize) {
        while self.store.available_blocks() < blocks {
            let next = self
                .retained
                .oldest(Some(false))
                .or_else(|| self.retained.oldest(None));
            let Some(id) = next else {
                break;
            };
            self.release_retained(id);
        }
    }

    /// Kept branches and prompts held now.
    pub fn kept(&self) -> usize {
        self.retained.count(true)
    }

    /// Scored sequences parked now.
    pub fn parked(&self) -> usize {
        self.retained.count(false)
    }
}
