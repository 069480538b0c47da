//! The synchronisation primitives the work-sharing protocol is written against: the standard
//! library's and rayon's in a normal build, loom's under `--cfg loom` (so the model checker sees
//! every atomic, lock, spin and spawn of the protocol).

#[cfg(loom)]
pub(super) use loom::sync::atomic::{AtomicPtr, AtomicU8, AtomicUsize, Ordering};
#[cfg(loom)]
pub(super) use loom::sync::{Arc, Mutex};
#[cfg(not(loom))]
pub(super) use std::sync::atomic::{AtomicPtr, AtomicU8, AtomicUsize, Ordering};
#[cfg(not(loom))]
pub(super) use std::sync::{Arc, Mutex};

/// Starts a helper thread running `f` (a rayon worker; a loom thread under loom).
pub(super) fn spawn_helper(f: impl FnOnce() + Send + 'static) {
    #[cfg(not(loom))]
    rayon::spawn(f);
    #[cfg(loom)]
    drop(loom::thread::spawn(f));
}

/// One turn of a busy-wait.
pub(super) fn spin_loop() {
    #[cfg(not(loom))]
    std::hint::spin_loop();
    #[cfg(loom)]
    loom::hint::spin_loop();
}

/// Gives the core away while waiting.
pub(super) fn yield_now() {
    #[cfg(not(loom))]
    std::thread::yield_now();
    #[cfg(loom)]
    loom::thread::yield_now();
}
