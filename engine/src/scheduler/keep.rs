//! Kept sequences: a group submitted with [`GroupRequest::keep`] keeps its KV for its caller —
//! every finished branch under its own id (every computed position, the partial last block
//! included; its last sampled token is not computed yet), and its prompt under the id its
//! `Prefill` event reports, together with the logits after the prompt. A later group that
//! continues one ([`GroupRequest::resume`]) forks it copy-on-write and computes only what is
//! new; a group whose prompt is exactly a kept prompt computes nothing at all and samples from
//! the kept logits. Without this a search would recompute each branch's trailing partial block
//! at every step (the prefix index holds full blocks only), and the last token of a node every
//! time the node is expanded again. It is the handle that continues a sequence, in the spirit
//! of SGLang's RadixAttention keeping a request's KV for the next call of the same program.
//!
//! Invariants: a kept sequence holds exactly the positions the model computed for it; it is
//! retained and released as every retained sequence is (`retain.rs`: by its caller through
//! [`Scheduler::release_retained`], past [`SchedulerConfig::max_kept`], or under memory pressure
//! before any running sequence is preempted); resuming computes at least the prompt's last token
//! unless kept logits follow exactly that prompt.

use super::retain::{Reason, Retained};
use super::*;

impl Scheduler {
    /// Keeps the finished branch `id` (its store sequence holds its computed positions).
    pub(super) fn keep_finished(&mut self, id: SeqId, mut tokens: Vec<u32>) {
        tokens.truncate(self.store.seq_len(id));
        self.retain(Retained {
            id,
            reason: Reason::Branch,
            tokens,
            logits: None,
        });
    }

    /// Keeps the computed prompt `id` with the logits after it.
    pub(super) fn keep_prompt(&mut self, id: SeqId, tokens: Vec<u32>, logits: &[f32]) {
        self.retain(Retained {
            id,
            reason: Reason::Prompt,
            tokens,
            logits: Some(Arc::from(logits)),
        });
    }

    /// Positions a newly opened prompt sequence `id` (the prefix index served `reused` tokens)
    /// on the kept sequence it continues, when that covers more: up to the longest prefix they
    /// share, or all of it with the kept logits when the prompt is exactly a kept prompt.
    /// Returns where computing starts.
    pub(super) fn resume_kept(&mut self, id: SeqId, reused: usize) -> Result<usize> {
        let Some(s) = self.seqs.get(&id) else {
            return Ok(reused);
        };
        let Some(from) = s.role.start().and_then(|start| start.resume) else {
            return Ok(reused);
        };
        let Some(k) = self.retained.get(from).filter(|k| k.reason.is_kept()) else {
            return Ok(reused);
        };
        let shared = ponder_kvcache::shared_prefix_len(&k.tokens, &s.tokens);
        let exact = (shared == s.tokens.len() && shared == k.tokens.len())
            .then(|| k.logits.clone())
            .flatten();
        // Without logits for it, the prompt's last token is computed: it is sampled from.
        let start = match exact {
            Some(_) => shared,
            None => shared.min(s.tokens.len().saturating_sub(1)),
        };
        if start <= reused {
            return Ok(reused);
        }
        self.store.release(id);
        self.store.fork(from, id)?;
        if self.store.seq_len(id) > start {
            self.store.truncate(id, start)?;
        }
        if let Some(start) = self.seqs.get_mut(&id).and_then(|s| s.role.start_mut()) {
            start.ready = exact;
        }
        self.retained.touch(from);
        Ok(start)
    }
}
