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

/// How much of a prompt a kept sequence covers: the leading positions it shares with the
/// prompt, and whether it is exactly the prompt with the logits after it (a kept prompt).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KeptCover {
    /// Leading positions of the prompt the kept sequence holds.
    pub(crate) shared: usize,
    /// The kept sequence is the whole prompt with its logits: nothing is computed.
    pub(crate) exact: bool,
}

/// Where computing a prompt of `len` tokens starts — the one reuse rule, applied by the
/// scheduler when it opens a prompt ([`Scheduler::resume_kept`]) and by `LocalGenerator` when
/// it charges a search for the prompt before submitting it. The prefix index serves whole
/// blocks of the `indexed` leading positions, short of the last token (it is sampled from, so
/// computed); a kept sequence serves every position it shares, short of the last token too
/// unless it is exactly the prompt with its logits. The larger wins.
pub(crate) fn prompt_start(
    len: usize,
    block_size: usize,
    indexed: usize,
    kept: Option<KeptCover>,
) -> usize {
    let block_size = block_size.max(1);
    let short_of_last = len.saturating_sub(1);
    let whole = indexed.min(short_of_last) / block_size * block_size;
    let from_kept = kept.map_or(0, |k| match k.exact {
        true => k.shared.min(len),
        false => k.shared.min(short_of_last),
    });
    whole.max(from_kept)
}

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
        // `reused` is the prefix index's whole blocks already.
        let start = prompt_start(
            s.tokens.len(),
            self.store.block_size(),
            reused,
            Some(KeptCover {
                shared,
                exact: exact.is_some(),
            }),
        );
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

#[cfg(test)]
mod tests {
    use super::{prompt_start, KeptCover};
    use proptest::prelude::*;

    #[test]
    fn the_index_serves_whole_blocks_and_a_kept_sequence_every_position() {
        // 40 tokens, blocks of 16: the index serves 32 of 39 known, a kept branch all 39.
        assert_eq!(prompt_start(40, 16, 39, None), 32);
        let branch = KeptCover {
            shared: 39,
            exact: false,
        };
        assert_eq!(prompt_start(40, 16, 39, Some(branch)), 39);
        // The last token is sampled from: computed even when every position is known ...
        assert_eq!(prompt_start(32, 16, 32, None), 16);
        let all = KeptCover {
            shared: 32,
            exact: false,
        };
        assert_eq!(prompt_start(32, 16, 32, Some(all)), 31);
        // ... unless a kept prompt holds it with its logits.
        let prompt = KeptCover {
            shared: 32,
            exact: true,
        };
        assert_eq!(prompt_start(32, 16, 0, Some(prompt)), 32);
    }

    proptest! {
        #[test]
        fn the_start_is_within_the_prompt_and_never_below_either_source(
            len in 1usize..200,
            block in 1usize..40,
            indexed in 0usize..220,
            shared in 0usize..220,
            exact in any::<bool>(),
            with_kept in any::<bool>(),
        ) {
            let kept = with_kept.then_some(KeptCover { shared, exact });
            let start = prompt_start(len, block, indexed, kept);
            let whole = indexed.min(len - 1) / block * block;
            prop_assert!(start >= whole);
            prop_assert!(start.is_multiple_of(block) || kept.is_some());
            if exact && with_kept {
                prop_assert!(start <= len);
            } else {
                // Something is always left to compute: the token sampled from.
                prop_assert!(start < len);
            }
            if let Some(k) = kept {
                prop_assert!(start >= k.shared.min(len - 1));
            }
        }
    }
}
