//! Work sharing for one kernel call: the calling thread claims and runs tasks itself while
//! optional rayon helpers, woken with `rayon::spawn`, claim the rest from the same atomic
//! counter. The matmul (`cpu/parallel.rs`) and the attention executor (`attention/exec.rs`)
//! share their work this way. A call may start with a serial prologue whose result every task
//! reads ([`share_prepared`]: the matmul quantizes its activations there): the caller runs it
//! after waking the helpers, so their wake-up overlaps it instead of following it.
//!
//! A [`Crew`] keeps one helper awake for a span of many calls (a model's forward pass, ~150
//! calls): instead of `rayon::spawn` per call, each call on the crew's thread posts its work to
//! that helper, which spins between calls rather than going back to rayon's idle loop (where it
//! yields to the scheduler and soon sleeps, so the next call pays a wake-up).
//!
//! Why not a plain `par_iter`: from a thread outside rayon's pool that parks the caller until
//! the pool is done, and on small VMs waking a parked thread costs tens to hundreds of
//! microseconds. Measured in a 16-branch decode step on the 2-core dev VM: the attention
//! `par_iter` ran its 15 items one after another on a single worker (sum of item times 669 us,
//! wall 663 us) while the second worker was still waking up, and the caller sat idle. Here the
//! caller is never idle: it works from the first task, a helper that wakes late finds fewer
//! (or no) tasks left and exits, and the caller only waits (spinning briefly) for tasks a
//! running helper has already claimed. So a call is never much slower than single-threaded,
//! and up to `helpers + 1` times faster when helpers are awake.
//!
//! Invariants:
//! - Who computes a task never changes its result: the caller and the helpers run the same
//!   task function on the same inputs (the caller's variant may only write elsewhere).
//! - A helper that panics publishes nothing usable and the caller recomputes that task, so a
//!   failure never hangs or aborts the call.
//! - Helpers reach the caller's borrowed task function and prologue result only between
//!   claiming a task and publishing its result, and claim nothing before the prologue result
//!   is published. [`share_prepared`] returns only after every task is claimed and every
//!   claimed task is published (and, when the caller unwinds, after in-flight helpers are out
//!   of the function), so a helper that runs later claims nothing and touches nothing
//!   borrowed. This protocol is the only reason the module needs `unsafe`.
#![allow(unsafe_code)]

use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A helper's task function with its borrow erased (see the module invariants).
type TaskFn<P, S, R> = dyn Fn(&P, &mut S, usize) -> R + Sync;
/// A helper's state constructor with its borrow erased.
type InitFn<S> = dyn Fn() -> S + Sync;

/// One task's published result.
struct Slot<R> {
    /// `PENDING`, `DONE` (value set) or `FAILED` (the helper panicked).
    state: AtomicU8,
    value: Mutex<Option<R>>,
}

const PENDING: u8 = 0;
const DONE: u8 = 1;
const FAILED: u8 = 2;

/// What the caller and its helpers share.
struct Shared<P, S, R> {
    task: *const TaskFn<P, S, R>,
    init: *const InitFn<S>,
    /// The prologue's result in the caller's frame: null until the prologue has returned.
    prepared: AtomicPtr<P>,
    n_tasks: usize,
    next: AtomicUsize,
    /// Helpers between their first claim attempt and their last publish.
    active: AtomicUsize,
    slots: Vec<Slot<R>>,
}

// SAFETY: the raw pointers point to `Sync` closures and are dereferenced only under the module
// protocol (while the caller is inside `share`); results cross threads only as `R: Send`.
unsafe impl<P: Sync, S, R: Send> Send for Shared<P, S, R> {}
// SAFETY: as above (`P: Sync`: helpers only read the prologue's result); every other field is
// itself `Sync`.
unsafe impl<P: Sync, S, R: Send> Sync for Shared<P, S, R> {}

impl<P, S, R> Shared<P, S, R> {
    fn claim(&self) -> Option<usize> {
        let t = self.next.fetch_add(1, Ordering::SeqCst);
        (t < self.n_tasks).then_some(t)
    }

    /// Whether the counter is past the last task (all claimed, or closed by an unwinding
    /// caller).
    fn closed(&self) -> bool {
        self.next.load(Ordering::SeqCst) >= self.n_tasks
    }
}

/// Runs tasks `0..n_tasks` with up to `helpers` rayon helpers. The caller runs `mine(t)` for
/// each task it claims (it may write its result straight into its output); a helper runs
/// `task(&mut state, t)` with its own `state = init()`. Returns the helpers' results as
/// `(task, result)` pairs in task order; tasks not in it were run by `mine`. `mine(t)` must
/// compute what `task(_, t)` computes.
pub(crate) fn share<S: 'static, R: Send + 'static>(
    n_tasks: usize,
    helpers: usize,
    mut mine: impl FnMut(usize),
    init: &(dyn Fn() -> S + Sync),
    task: &(dyn Fn(&mut S, usize) -> R + Sync),
) -> Vec<(usize, R)> {
    let task = |_: &(), state: &mut S, t: usize| task(state, t);
    share_prepared(n_tasks, helpers, || (), |_, t| mine(t), init, &task)
}

/// [`share`] after a serial prologue: wakes the helpers, runs `prologue()` on the calling
/// thread, then shares the tasks, each of which reads the prologue's result (`mine(&p, t)`,
/// `task(&p, &mut state, t)`). Helpers that wake before the prologue is done wait for it.
pub(crate) fn share_prepared<P: Sync + 'static, S: 'static, R: Send + 'static>(
    n_tasks: usize,
    helpers: usize,
    prologue: impl FnOnce() -> P,
    mut mine: impl FnMut(&P, usize),
    init: &(dyn Fn() -> S + Sync),
    task: &(dyn Fn(&P, &mut S, usize) -> R + Sync),
) -> Vec<(usize, R)> {
    if helpers == 0 || n_tasks < 2 {
        let prepared = prologue();
        (0..n_tasks).for_each(|t| mine(&prepared, t));
        return Vec::new();
    }
    // SAFETY: only the lifetimes change (same fat-pointer layout). The module protocol keeps
    // every dereference inside this call.
    let (task, init): (*const TaskFn<P, S, R>, *const InitFn<S>) = unsafe {
        (
            std::mem::transmute::<
                *const (dyn Fn(&P, &mut S, usize) -> R + Sync + '_),
                *const TaskFn<P, S, R>,
            >(task),
            std::mem::transmute::<*const (dyn Fn() -> S + Sync + '_), *const InitFn<S>>(init),
        )
    };
    let shared = Arc::new(Shared {
        task,
        init,
        prepared: AtomicPtr::new(std::ptr::null_mut()),
        n_tasks,
        next: AtomicUsize::new(0),
        active: AtomicUsize::new(0),
        slots: (0..n_tasks)
            .map(|_| Slot {
                state: AtomicU8::new(PENDING),
                value: Mutex::new(None),
            })
            .collect(),
    });
    let guard = Guard(&shared);
    let mut to_spawn = helpers.min(n_tasks - 1);
    if CREW.with_borrow(|crew| {
        crew.as_ref()
            .map(|c| c.post(Arc::clone(&shared) as Arc<dyn Work>))
    }) == Some(true)
    {
        to_spawn -= 1;
    }
    for _ in 0..to_spawn {
        let shared = Arc::clone(&shared);
        rayon::spawn(move || help(&shared));
    }
    let prepared = prologue();
    // Helpers only read through this pointer (`P: Sync`), and only while the caller waits for
    // their claimed tasks, i.e. while `prepared` is alive.
    shared
        .prepared
        .store(std::ptr::from_ref(&prepared).cast_mut(), Ordering::Release);
    let mut mine_done = vec![false; n_tasks];
    while let Some(t) = shared.claim() {
        mine_done[t] = true;
        mine(&prepared, t);
    }
    let mut theirs = Vec::new();
    for t in (0..n_tasks).filter(|&t| !mine_done[t]) {
        match wait(&shared.slots[t]) {
            Some(r) => theirs.push((t, r)),
            None => mine(&prepared, t), // the helper failed: do it here
        }
    }
    drop(guard);
    theirs
}

/// [`share`] for tasks whose results the caller wants in task order, whoever computed them:
/// `task(&mut state, t)` for every `t`, the caller with a state of its own.
pub(crate) fn map<S: 'static, R: Send + 'static>(
    n_tasks: usize,
    helpers: usize,
    init: &(dyn Fn() -> S + Sync),
    task: &(dyn Fn(&mut S, usize) -> R + Sync),
) -> Vec<R> {
    let mut out: Vec<Option<R>> = (0..n_tasks).map(|_| None).collect();
    let mut state = None;
    let theirs = share(
        n_tasks,
        helpers,
        |t| out[t] = Some(task(state.get_or_insert_with(init), t)),
        init,
        task,
    );
    for (t, r) in theirs {
        out[t] = Some(r);
    }
    // `share` runs every task exactly once, by `mine` or a helper: no slot is left empty.
    let out: Vec<R> = out.into_iter().flatten().collect();
    debug_assert_eq!(out.len(), n_tasks);
    out
}

/// `task(t)` for every `t in 0..n_tasks`, results in task order: the calling thread works
/// from the first task while a helper (the thread's [`Crew`] helper if it has one, else one
/// rayon worker woken for the call) claims the rest; with a pool of one thread, or a single
/// task, the caller runs them all. For work the caller would otherwise do alone between
/// kernel calls (the scheduler samples a batch's rows this way), at no risk of waiting for a
/// late helper.
///
/// ```
/// let squares = ponder_kernels::share_map(5, &|t| t * t);
/// assert_eq!(squares, vec![0, 1, 4, 9, 16]);
/// ```
pub fn share_map<R: Send + 'static>(n_tasks: usize, task: &(dyn Fn(usize) -> R + Sync)) -> Vec<R> {
    let helpers = rayon::current_num_threads().saturating_sub(1).min(1);
    map(n_tasks, helpers, &|| (), &|_, t| task(t))
}

/// `f` on each of two parts, the first on the calling thread and the second on a helper, as
/// [`share_map`] runs tasks. The parts may hold mutable borrows, so a pass over rows can split
/// its output with `split_at_mut` and give each thread one half. A part whose helper panicked
/// is run again from the start on the calling thread (a deterministic panic then reaches the
/// caller).
///
/// ```
/// let mut rows = vec![1.0f32; 8];
/// let (top, bottom) = rows.split_at_mut(4);
/// ponder_kernels::share_pair([top, bottom], &|half| half.iter_mut().for_each(|v| *v *= 2.0));
/// assert_eq!(rows, vec![2.0; 8]);
/// ```
pub fn share_pair<T: Send>(parts: [T; 2], f: &(dyn Fn(&mut T) + Sync)) {
    let parts = parts.map(Mutex::new);
    share_map(parts.len(), &|i| {
        // Each task locks its own part once, so the lock is never contended; it is poisoned
        // only by a panic inside `f`, after which the part is run again.
        let mut part = parts[i]
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        f(&mut part);
    });
}

/// A call's work as a crew helper sees it: `help` with the types erased.
trait Work: Send + Sync {
    fn help(&self);
}

impl<P: Sync, S, R: Send> Work for Shared<P, S, R> {
    fn help(&self) {
        help(self);
    }
}

thread_local! {
    /// The crew serving calls made on this thread, while a [`Crew`] guard lives here.
    static CREW: RefCell<Option<Arc<CrewState>>> = const { RefCell::new(None) };
}

/// Whether some thread holds an active [`Crew`].
static CREW_ACTIVE: AtomicBool = AtomicBool::new(false);

/// How long a crew helper spins for the next call before it parks (a forward pass's serial
/// stretches between calls are tens of microseconds; its end is marked by the guard).
const CREW_SPIN: Duration = Duration::from_millis(2);

/// What a crew's caller and its helper share.
struct CrewState {
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

impl CrewState {
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
    /// [`CREW_SPIN`] without work, leave when stopped.
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
            // Run the pool's other work meanwhile (a crew must not starve it: a caller blocked
            // on a rayon job, or a second crew, would otherwise wait for this worker forever).
            if rayon::yield_now() == Some(rayon::Yield::Executed) {
                idle_since = Instant::now();
            } else if idle_since.elapsed() > CREW_SPIN {
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
/// module doc). Start one around a span of many short kernel calls; a crew on a pool of one
/// thread, or nested inside another on the same thread, does nothing. The helper is a rayon
/// worker running a loop, released when the guard drops. Not `Send`: it must drop on the
/// thread it serves.
///
/// ```
/// use ponder_kernels::{Crew, QuantFormat, QuantMatrix};
///
/// // A 32 x 64 Q8_0 matrix (GGML blocks: f16 scale 1.0, then 32 quants of 1).
/// let block: Vec<u8> = [0x00, 0x3c].into_iter().chain([1u8; 32]).collect();
/// let w = QuantMatrix::from_ggml_bytes(QuantFormat::Q8_0, 32, 64, block.repeat(64))?;
/// let x = vec![0.5f32; 64];
/// let mut y = vec![0f32; 32];
/// {
///     let _crew = Crew::start(); // one helper stays hot for these calls
///     for _ in 0..3 {
///         w.matmul(&x, 1, &mut y)?;
///     }
/// } // the helper leaves here
/// // Each output is 64 halves times 64 ones, up to the 8-bit quantization.
/// assert!(y.iter().all(|&v| (v - 32.0).abs() < 0.1));
/// # Ok::<(), ponder_kernels::KernelError>(())
/// ```
pub struct Crew {
    state: Option<Arc<CrewState>>,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Crew {
    /// Starts a crew for the calling thread. Only one crew is active in a process at a time
    /// (two models' forward passes on two threads would otherwise keep two workers spinning on
    /// a two-core machine where the callers need the cores); a second one does nothing and its
    /// calls wake helpers as usual.
    pub fn start() -> Self {
        let inactive = Self {
            state: None,
            _not_send: std::marker::PhantomData,
        };
        if rayon::current_num_threads() < 2 || CREW.with_borrow(Option::is_some) {
            return inactive;
        }
        if CREW_ACTIVE
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return inactive;
        }
        let state = Arc::new(CrewState {
            posted: Mutex::new(None),
            ready: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            alive: AtomicBool::new(false),
            thread: Mutex::new(None),
        });
        let helper = Arc::clone(&state);
        rayon::spawn(move || helper.serve());
        CREW.with_borrow_mut(|crew| *crew = Some(Arc::clone(&state)));
        Self {
            state: Some(state),
            _not_send: std::marker::PhantomData,
        }
    }
}

impl Drop for Crew {
    fn drop(&mut self) {
        if let Some(state) = self.state.take() {
            CREW.with_borrow_mut(|crew| *crew = None);
            CREW_ACTIVE.store(false, Ordering::Release);
            state.stop.store(true, Ordering::Release);
            if let Ok(thread) = state.thread.lock() {
                if let Some(t) = thread.as_ref() {
                    t.unpark();
                }
            }
        }
    }
}

/// On unwinding out of [`share`], closes the counter and waits until no helper is inside the
/// borrowed task function any more.
struct Guard<'a, P, S, R>(&'a Shared<P, S, R>);

impl<P, S, R> Drop for Guard<'_, P, S, R> {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return; // every task was claimed and published: nothing borrowed is reachable
        }
        self.0.next.store(usize::MAX / 2, Ordering::SeqCst);
        while self.0.active.load(Ordering::SeqCst) != 0 {
            std::thread::yield_now();
        }
    }
}

/// A helper: waits for the prologue's result, then claims and publishes tasks until none are
/// left.
fn help<P, S, R>(shared: &Shared<P, S, R>) {
    shared.active.fetch_add(1, Ordering::SeqCst);
    let mut spins = 0u32;
    let prepared = loop {
        let p = shared.prepared.load(Ordering::Acquire);
        if !p.is_null() {
            break p;
        }
        if shared.closed() {
            // The caller unwound out of its prologue (or is done): nothing to do.
            shared.active.fetch_sub(1, Ordering::SeqCst);
            return;
        }
        if spins < 2000 {
            std::hint::spin_loop();
            spins += 1;
        } else {
            std::thread::yield_now();
        }
    };
    let mut state = None;
    while let Some(t) = shared.claim() {
        let slot = &shared.slots[t];
        let result = catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: task `t` is claimed and not yet published, so the caller is still inside
            // `share_prepared` (it waits for this slot): both closures and the prologue's
            // result are alive.
            let (task, init, prepared) = unsafe { (&*shared.task, &*shared.init, &*prepared) };
            let state = state.get_or_insert_with(init);
            task(prepared, state, t)
        }));
        let published = match result {
            Ok(r) => match slot.value.lock() {
                Ok(mut v) => {
                    *v = Some(r);
                    DONE
                }
                Err(_) => FAILED,
            },
            Err(_) => {
                state = None; // possibly left half-updated by the panic
                FAILED
            }
        };
        slot.state.store(published, Ordering::Release);
    }
    shared.active.fetch_sub(1, Ordering::SeqCst);
}

/// Waits for a task a running helper has claimed: spin briefly, then yield. `None`: the
/// helper failed.
fn wait<R>(slot: &Slot<R>) -> Option<R> {
    let mut spins = 0u32;
    loop {
        match slot.state.load(Ordering::Acquire) {
            DONE => return slot.value.lock().ok()?.take(),
            FAILED => return None,
            _ if spins < 2000 => {
                std::hint::spin_loop();
                spins += 1;
            }
            _ => std::thread::yield_now(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn squares(n: usize, helpers: usize) -> Vec<u64> {
        let mut out = vec![0u64; n];
        let task = |_: &mut (), t: usize| (t as u64) * (t as u64);
        let theirs = share(n, helpers, |t| out[t] = task(&mut (), t), &|| (), &task);
        for (t, r) in theirs {
            out[t] = r;
        }
        out
    }

    #[test]
    fn every_task_is_computed_once_whoever_runs_it() {
        for helpers in [0, 1, 3] {
            for n in [0, 1, 2, 7, 100] {
                let expected: Vec<u64> = (0..n as u64).map(|t| t * t).collect();
                assert_eq!(squares(n, helpers), expected, "n={n} helpers={helpers}");
            }
        }
    }

    #[test]
    fn map_returns_every_result_in_task_order() {
        let task = |calls: &mut usize, t: usize| {
            *calls += 1;
            3 * t
        };
        for helpers in [0, 1, 2] {
            let got = map(50, helpers, &|| 0usize, &task);
            assert_eq!(got, (0..50).map(|t| 3 * t).collect::<Vec<_>>());
        }
    }

    #[test]
    fn a_helper_that_runs_first_computes_every_task() {
        // Drive the protocol by hand: a "helper" takes every task before the caller looks.
        let task = |_: &(), _: &mut (), t: usize| t * 10;
        let init = || ();
        let (task_ref, init_ref): (&TaskFn<(), (), usize>, &InitFn<()>) = (&task, &init);
        let prepared = ();
        let shared = Shared {
            task: task_ref as *const _,
            init: init_ref as *const _,
            prepared: AtomicPtr::new(std::ptr::from_ref(&prepared).cast_mut()),
            n_tasks: 5,
            next: AtomicUsize::new(0),
            active: AtomicUsize::new(0),
            slots: (0..5)
                .map(|_| Slot {
                    state: AtomicU8::new(PENDING),
                    value: Mutex::new(None),
                })
                .collect(),
        };
        help(&shared);
        assert_eq!(shared.claim(), None);
        let got: Vec<Option<usize>> = shared.slots.iter().map(wait).collect();
        assert_eq!(got, (0..5).map(|t| Some(t * 10)).collect::<Vec<_>>());
        assert_eq!(shared.active.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_panicking_helper_task_is_recomputed_by_the_caller() {
        let task = |_: &mut (), t: usize| {
            if t == 3 && rayon::current_thread_index().is_some() {
                panic!("helper failure on task 3");
            }
            t + 1
        };
        for _ in 0..20 {
            let mut out = vec![0usize; 8];
            let theirs = share(8, 1, |t| out[t] = t + 1, &|| (), &task);
            for (t, r) in theirs {
                out[t] = r;
            }
            assert_eq!(out, (1..=8).collect::<Vec<_>>());
        }
    }

    #[test]
    fn every_task_reads_the_prologue_result_whoever_runs_it() {
        for helpers in [0, 1, 3] {
            for n in [0, 1, 2, 9, 64] {
                let mut out = vec![0u64; n];
                let task = |offset: &u64, _: &mut (), t: usize| offset + t as u64;
                let theirs = share_prepared(
                    n,
                    helpers,
                    || 1000u64,
                    |offset, t| out[t] = task(offset, &mut (), t),
                    &|| (),
                    &task,
                );
                for (t, r) in theirs {
                    out[t] = r;
                }
                let expected: Vec<u64> = (0..n as u64).map(|t| 1000 + t).collect();
                assert_eq!(out, expected, "n={n} helpers={helpers}");
            }
        }
    }

    #[test]
    fn a_panicking_prologue_releases_the_waiting_helpers() {
        for _ in 0..20 {
            let task = |_: &u64, _: &mut (), t: usize| t;
            let result = catch_unwind(AssertUnwindSafe(|| {
                share_prepared(
                    16,
                    2,
                    || -> u64 { panic!("prologue failure") },
                    |_, _| {},
                    &|| (),
                    &task,
                )
            }));
            assert!(result.is_err());
        }
    }

    #[test]
    fn calls_under_a_crew_compute_every_task_and_the_crew_leaves() {
        let pool = match rayon::ThreadPoolBuilder::new().num_threads(2).build() {
            Ok(pool) => pool,
            Err(e) => panic!("pool: {e}"),
        };
        pool.install(|| {
            let crew = Crew::start();
            if crew.state.is_none() {
                // Another test holds the process's one active crew: the calls below still
                // have to be right, only without a hot helper.
                eprintln!("crew inactive (another is active)");
            }
            assert!(Crew::start().state.is_none(), "a nested crew does nothing");
            for round in 0..200 {
                let n = 1 + round % 40;
                assert_eq!(
                    squares(n, 1),
                    (0..n as u64).map(|t| t * t).collect::<Vec<_>>()
                );
            }
            let state = crew.state.as_ref().map(Arc::clone);
            drop(crew);
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
    fn one_crew_at_a_time_and_the_pool_keeps_working() {
        // Threads outside the pool (as the executors' are) start crews at once: at most one is
        // active, and each thread can still use the pool while they live.
        let threads = rayon::current_num_threads().max(2) + 1;
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let barrier = Arc::new(std::sync::Barrier::new(threads));
        for _ in 0..threads {
            let (done_tx, barrier) = (done_tx.clone(), Arc::clone(&barrier));
            std::thread::spawn(move || {
                let crew = Crew::start();
                let active = crew.state.is_some();
                barrier.wait(); // every crew is started before any ends
                use rayon::prelude::*;
                let sum: u64 = (0..100_000u64).into_par_iter().sum();
                barrier.wait();
                drop(crew);
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
                Err(e) => panic!("a crew starved the pool: {e}"),
            }
        }
        assert!(active <= 1, "{active} crews were active at once");
    }
}
