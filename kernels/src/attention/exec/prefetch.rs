//! The next block's prefetch during an item's sweep (a hint; x86-64 only), asked for a slice of
//! the block's slots before each kernel call on the current block instead of all at once: a
//! whole block's cache lines in one burst wait for the core's few fill buffers and stall the
//! item loop.

use super::super::block::BlockView;

/// The prefetch of one block's slices of some heads, spread over kernel calls.
#[derive(Default)]
pub(super) struct Prefetch<'a> {
    pub(super) view: Option<BlockView<'a>>,
    /// Floats per slot to ask for (the item's heads).
    pub(super) width: usize,
    /// Slots of the block, and the first one not yet asked for.
    pub(super) slots: usize,
    pub(super) next: usize,
    /// Slots per kernel call.
    pub(super) per_call: usize,
}

impl Prefetch<'_> {
    /// Asks for the next slice (before a kernel call on the current block).
    pub(super) fn issue_slice(&mut self) {
        self.issue(self.per_call);
    }

    /// Asks for whatever is left (once the current block is done).
    pub(super) fn issue_rest(&mut self) {
        self.issue(usize::MAX);
    }

    /// Asks for up to `slots` more slots.
    fn issue(&mut self, slots: usize) {
        #[cfg(target_arch = "x86_64")]
        if let Some(view) = self.view {
            let end = self.slots.min(self.next.saturating_add(slots));
            super::super::x86::prefetch(view, self.next..end, self.width);
            self.next = end;
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = slots;
    }
}
