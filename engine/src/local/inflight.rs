//! Prompts a call in flight is computing, announced so that a concurrent call of the same
//! search needing some of those positions waits for them instead of computing them again.
//!
//! The cases it exists for: an answer probe submitted together with the step that continues its
//! branch (`answer_convergence`: both continue a branch whose last sampled token is not yet
//! computed); forks of one prompt extended in separate calls (AB-MCTS's answers in flight);
//! two new prompts sharing an opening past any kept sequence (two refinement prompts). The
//! first call's group computes the shared positions and keeps its prompt; the other resumes
//! from that kept prompt, at token granularity.
//!
//! Waiting is only ever for a call already submitted, which never waits in turn; the wait ends
//! when that call reads its group's prefill, so it needs that call to be polled, as any
//! future's progress does (strategies run concurrent calls under `join!` or
//! `FuturesOrdered`, which poll them all). If that call ends without computing the prompt
//! (cancelled, failed), the waiter computes it itself. An announcement lives exactly as long
//! as the call's group.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use ponder_kvcache::shared_prefix_len;
use tokio::sync::watch;

use super::Kept;

type Slot = watch::Receiver<Option<Arc<Kept>>>;

/// Announced prompts by their tokens.
#[derive(Debug, Default)]
pub(super) struct InFlight {
    prompts: Mutex<HashMap<Vec<u32>, (u64, Slot)>>,
    next: AtomicU64,
}

impl InFlight {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Vec<u32>, (u64, Slot)>> {
        self.prompts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Announces that the caller's group computes and keeps the prompt `tokens`; the entry
    /// lasts as long as the returned [`Announced`].
    pub(super) fn announce(self: &Arc<Self>, tokens: &[u32]) -> Announced {
        let (tx, rx) = watch::channel(None);
        let ticket = self.next.fetch_add(1, Ordering::Relaxed);
        self.lock().insert(tokens.to_vec(), (ticket, rx));
        Announced {
            owner: Arc::clone(self),
            tokens: tokens.to_vec(),
            ticket,
            tx,
        }
    }

    /// The prompt in flight sharing the longest opening with `tokens`: how many leading
    /// tokens it shares, and its slot.
    pub(super) fn longest_shared(&self, tokens: &[u32]) -> Option<(usize, Slot)> {
        self.lock()
            .iter()
            .map(|(prompt, (_, rx))| (shared_prefix_len(prompt, tokens), rx))
            .filter(|(shared, _)| *shared > 0)
            .max_by_key(|(shared, _)| *shared)
            .map(|(shared, rx)| (shared, rx.clone()))
    }

    /// The kept prompt once its call has computed it; `None` if that call ended without.
    pub(super) async fn wait(mut slot: Slot) -> Option<Arc<Kept>> {
        slot.wait_for(Option::is_some).await.ok()?.clone()
    }
}

/// One announced prompt; dropping it withdraws the announcement.
#[derive(Debug)]
pub(super) struct Announced {
    owner: Arc<InFlight>,
    tokens: Vec<u32>,
    ticket: u64,
    tx: watch::Sender<Option<Arc<Kept>>>,
}

impl Announced {
    /// The prompt is computed and kept as `kept`: waiters resume from it.
    pub(super) fn computed(&self, kept: &Arc<Kept>) {
        self.tx.send_replace(Some(Arc::clone(kept)));
    }
}

impl Drop for Announced {
    fn drop(&mut self) {
        let mut prompts = self.owner.lock();
        if prompts
            .get(&self.tokens)
            .is_some_and(|(t, _)| *t == self.ticket)
        {
            prompts.remove(&self.tokens);
        }
    }
}
