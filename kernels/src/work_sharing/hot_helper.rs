//! [`HotHelper`]: keeps one rayon worker spinning between the many short kernel calls of a span
//! (a model's forward pass), so each call's work is posted to an awake thread instead of waking
//! one. Spinning, parking and the pool's other work are its concerns; which tasks run where is
//! the parent module's protocol, which a hot helper joins like any other helper.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::Shared;

/// A call's work as a hot helper sees it: `help` with the types erased.
pub(super) trait Work: Send + Sync {
    fn help(&self);
}

impl<P: Sync, S, R: Send> Work for Shared<P, S, R> {
    fn help(&self) {
        super::help(self);
    }
}

thread_local! {
    /// The hot helper serving calls made on this thread, while a [`HotHelper`] guard lives here.
    static HOT_HELPER: RefCell<Option<Arc<HotHelperState>>> = const { RefCell::new(None) };
}

/// Whether some thread holds an active [`HotHelper`].
static HOT_HELPER_ACTIVE: AtomicBool = AtomicBool::new(false);

/// How long a hot helper spins for the next call before it parks (a forward pass's serial
/// stretches between calls are tens of microseconds; its end is marked by the guard).
const HOT_HELPER_SPIN: Duration = Duration::from_millis(2);

/// What a hot helper's caller and the helper share.
struct HotHelperState {
    /// The work posted for the helper and not yet taken.
    posted: Mutex<Option<Arc<dyn Work>>>,
    /// Whether `posted` may hold something (checked without the lock while spinning).
    ready: AtomicBool,
    /// Set when the guard drops: the helper leaves.
    stop: AtomicBool,
    /// Whether the helper is running its loop (a post to a helper that has not started or has
    /// left falls back to `rayon::spawn`).
    alive: AtomicBool,
    /// The helper's thread, to unpark it.
    thread: Mutex<Option<std::thread::Thread>>,
}

impl HotHelperState {
    /// Hands `work` to the helper; `false` when there is no live, idle helper to take it.
    fn post(&self, work: Arc<dyn Work>) -> bool {
        if !self.alive.load(Ordering::Acquire) || self.ready.load(Ordering::Acquire) {
            return false;
        }
        match self.posted.lock() {
            Ok(mut slot) => *slot = Some(work),
            Err(_) => return false,
        }
        self.ready.store(true, Ordering::Release);
        if let Ok(thread) = self.thread.lock() {
            if let Some(t) = thread.as_ref() {
                t.unpark();
            }
        }
        true
    }

    /// The helper's loop: take posted work and run it, spin while idle, park after
    /// [`HOT_HELPER_SPIN`] without work, leave when stopped.
    fn serve(&self) {
        if let Ok(mut thread) = self.thread.lock() {
            *thread = Some(std::thread::current());
        }
        self.alive.store(true, Ordering::Release);
        let mut idle_since = Instant::now();
        let mut spins = 0u32;
        while !self.stop.load(Ordering::Acquire) {
            if self.ready.load(Ordering::Acquire) {
                let work = self.posted.lock().ok().and_then(|mut slot| slot.take());
                self.ready.store(false, Ordering::Release);
                if let Some(work) = work {
                    work.help();
                }
                idle_since = Instant::now();
                spins = 0;
                continue;
            }
            spins += 1;
            if !spins.is_multiple_of(1024) {
                std::hint::spin_loop();
                continue;
            }
            // Run the pool's other work meanwhile (a hot helper must not starve it: a caller blocked
            // on a rayon job, or a second hot helper, would otherwise wait for this worker forever).
            if rayon::yield_now() == Some(rayon::Yield::Executed) {
                idle_since = Instant::now();
            } else if idle_since.elapsed() > HOT_HELPER_SPIN {
                std::thread::park_timeout(Duration::from_millis(1));
            }
        }
        self.alive.store(false, Ordering::Release);
        // Work posted after the last check is run here rather than lost: its caller waits
        // for the tasks it claimed, and `help` claims nothing once the caller has done them.
        if let Some(work) = self.posted.lock().ok().and_then(|mut slot| slot.take()) {
            work.help();
        }
    }
}

/// Keeps one helper thread hot for the calls this thread makes while the guard lives (see the
/// module doc). Start one around a span of many short kernel calls; a hot helper on a pool of one
/// thread, or nested inside another on the same thread, does nothing. The helper is a rayon
/// worker running a loop, released when the guard drops. Not `Send`: it must drop on the
/// thread it serves.
///
/// ```
/// use ponder_kernels::{HotHelper, QuantFormat, QuantMatrix};
///
/// // A 32 x 64 Q8_0 matrix (GGML blocks: f16 scale 1.0, then 32 quants of 1).
/// let block: Vec<u8> = [0x00, 0x3c].into_iter().chain([1u8; 32]).collect();
/// let w = QuantMatrix::from_ggml_bytes(QuantFormat::Q8_0, 32, 64, block.repeat(64))?;
/// let x = vec![0.5f32; 64];
/// let mut y = vec![0f32; 32];
/// {
///     let _hot = HotHelper::start(); // one helper stays hot for these calls
///     for _ in 0..3 {
///         w.matmul(&x, 1, &mut y)?;
///     }
/// } // the helper leaves here
/// // Each output is 64 halves times 64 ones, up to the 8-bit quantization.
/// assert!(y.iter().all(|&v| (v - 32.0).abs() < 0.1));
/// # Ok::<(), ponder_kernels::KernelError>(())
/// ```
pub struct HotHelper {
    state: Option<Arc<HotHelperState>>,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl HotHelper {
    /// Starts a hot helper for the calling thread. Only one is active in a process at a time
    /// (two models' forward passes on two threads would otherwise keep two workers spinning on
    /// a two-core machine where the callers need the cores); a second one does nothing and its
    /// calls wake helpers as usual.
    pub fn start() -> Self {
        let inactive = Self {
            state: None,
            _not_send: std::marker::PhantomData,
        };
        if rayon::current_num_threads() < 2 || HOT_HELPER.with_borrow(Option::is_some) {
            return inactive;
        }
        if HOT_HELPER_ACTIVE
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return inactive;
        }
        let state = Arc::new(HotHelperState {
            posted: Mutex::new(None),
            ready: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            alive: AtomicBool::new(false),
            thread: Mutex::new(None),
        });
        let helper = Arc::clone(&state);
        rayon::spawn(move || helper.serve());
        HOT_HELPER.with_borrow_mut(|hot| *hot = Some(Arc::clone(&state)));
        Self {
            state: Some(state),
            _not_send: std::marker::PhantomData,
        }
    }
}

impl Drop for HotHelper {
    fn drop(&mut self) {
        if let Some(state) = self.state.take() {
            HOT_HELPER.with_borrow_mut(|hot| *hot = None);
            HOT_HELPER_ACTIVE.store(false, Ordering::Release);
            state.stop.store(true, Ordering::Release);
            if let Ok(thread) = state.thread.lock() {
                if let Some(t) = thread.as_ref() {
                    t.unpark();
                }
            }
        }
    }
}

/// Posts `work()` to the calling thread's hot helper; `false` (and `work` not called) when the
/// thread has none, or it is not alive and idle.
pub(super) fn post(work: impl FnOnce() -> Arc<dyn Work>) -> bool {
    HOT_HELPER.with_borrow(|hot| hot.as_ref().map(|h| h.post(work()))) == Some(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn squares(n: usize, helpers: usize) -> Vec<u64> {
        let mut out = vec![0u64; n];
        let task = |_: &mut (), t: usize| (t as u64) * (t as u64);
        let theirs =
            super::super::run_tasks(n, helpers, |t| out[t] = task(&mut (), t), &|| (), &task);
        for (t, r) in theirs {
            out[t] = r;
        }
        out
    }

    #[test]
    fn calls_under_a_hot_helper_compute_every_task_and_the_helper_leaves() {
        let pool = match rayon::ThreadPoolBuilder::new().num_threads(2).build() {
            Ok(pool) => pool,
            Err(e) => panic!("pool: {e}"),
        };
        pool.install(|| {
            let hot = HotHelper::start();
            if hot.state.is_none() {
                // Another test holds the process's one active hot helper: the calls below still
                // have to be right, only without a hot helper.
                eprintln!("hot helper inactive (another is active)");
            }
            assert!(
                HotHelper::start().state.is_none(),
                "a nested hot helper does nothing"
            );
            for round in 0..200 {
                let n = 1 + round % 40;
                assert_eq!(
                    squares(n, 1),
                    (0..n as u64).map(|t| t * t).collect::<Vec<_>>()
                );
            }
            let state = hot.state.as_ref().map(Arc::clone);
            drop(hot);
            if let Some(state) = state {
                let start = Instant::now();
                while state.alive.load(Ordering::Acquire) {
                    assert!(start.elapsed() < Duration::from_secs(10), "the helper left");
                    std::thread::yield_now();
                }
            }
        });
    }

    #[test]
    fn one_hot_helper_at_a_time_and_the_pool_keeps_working() {
        // Threads outside the pool (as the executors' are) start hot helpers at once: at most one is
        // active, and each thread can still use the pool while they live.
        let threads = rayon::current_num_threads().max(2) + 1;
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let barrier = Arc::new(std::sync::Barrier::new(threads));
        for _ in 0..threads {
            let (done_tx, barrier) = (done_tx.clone(), Arc::clone(&barrier));
            std::thread::spawn(move || {
                let hot = HotHelper::start();
                let active = hot.state.is_some();
                barrier.wait(); // every hot helper is started before any ends
                use rayon::prelude::*;
                let sum: u64 = (0..100_000u64).into_par_iter().sum();
                barrier.wait();
                drop(hot);
                let _ = done_tx.send((active, sum));
            });
        }
        let mut active = 0;
        for _ in 0..threads {
            match done_rx.recv_timeout(Duration::from_secs(20)) {
                Ok((a, sum)) => {
                    assert_eq!(sum, 4_999_950_000);
                    active += usize::from(a);
                }
                Err(e) => panic!("a hot helper starved the pool: {e}"),
            }
        }
        assert!(active <= 1, "{active} hot helpers were active at once");
    }
}
