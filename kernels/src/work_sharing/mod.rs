//! Work sharing for one kernel call: the calling thread claims and runs tasks itself while
//! optional rayon helpers, woken with `rayon::spawn`, claim the rest from the same atomic
//! counter. The matmul (`cpu/parallel.rs`) and the attention executor (`attention/exec/`)
//! share their work this way. A call may start with a serial prologue whose result every task
//! reads ([`run_tasks_prepared`]: the matmul quantizes its activations there): the caller runs it
//! after waking the helpers, so their wake-up overlaps it instead of following it.
//!
//! A [`HotHelper`] keeps one helper awake for a span of many calls (a model's forward pass, ~150
//! calls): instead of `rayon::spawn` per call, each call on the guard's thread posts its work to
//! that helper, which spins between calls rather than going back to rayon's idle loop (where it
//! yields to the scheduler and soon sleeps, so the next call pays a wake-up).
//!
//! Why not a plain `par_iter`: from a thread outside rayon's pool that parks the caller until
//! the pool is done, and on small VMs waking a parked thread costs tens to hundreds of
//! microseconds, so short calls ran their items one after another on a single worker while the
//! second was still waking and the caller sat idle. Here the caller is never idle: it works from
//! the first task, a helper that wakes late finds fewer (or no) tasks left and exits, and the
//! caller only waits (spinning briefly) for tasks a running helper has already claimed. So a
//! call is never much slower than single-threaded, and up to `helpers + 1` times faster when
//! helpers are awake.
//!
//! Invariants:
//! - Who computes a task never changes its result: the caller and the helpers run the same
//!   task function on the same inputs (the caller's variant may only write elsewhere).
//! - A helper that panics publishes nothing usable and the caller recomputes that task, so a
//!   failure never hangs or aborts the call.
//! - Helpers reach the caller's borrowed task function and prologue result only between
//!   claiming a task and publishing its result, and claim nothing before the prologue result
//!   is published. [`run_tasks_prepared`] returns only after every task is claimed and every
//!   claimed task is published (and, when the caller unwinds, after in-flight helpers are out
//!   of the function), so a helper that runs later claims nothing and touches nothing
//!   borrowed. This protocol is the only reason the module needs `unsafe`.
//!
//! The protocol is model-checked with loom (`loom_tests.rs`, built with `--cfg loom`, run by
//! `scripts/test.sh`): every interleaving of a caller and its helpers, within a preemption
//! bound, computes every task once, never deadlocks, and returns only when no helper is inside
//! the borrowed task function. [`HotHelper`] (`hot_helper.rs`) is compiled out of that build.
#![allow(unsafe_code)]

#[cfg(not(loom))]
mod hot_helper;
#[cfg(all(test, loom))]
mod loom_tests;
mod sync;

use std::panic::{catch_unwind, AssertUnwindSafe};

#[cfg(not(loom))]
pub use hot_helper::HotHelper;
use sync::Ordering;
use sync::{spawn_helper, spin_loop, yield_now, Arc, AtomicPtr, AtomicU8, AtomicUsize, Mutex};

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
// protocol (while the caller is inside `run_tasks`); results cross threads only as `R: Send`.
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
pub(crate) fn run_tasks<S: 'static, R: Send + 'static>(
    n_tasks: usize,
    helpers: usize,
    mut mine: impl FnMut(usize),
    init: &(dyn Fn() -> S + Sync),
    task: &(dyn Fn(&mut S, usize) -> R + Sync),
) -> Vec<(usize, R)> {
    let task = |_: &(), state: &mut S, t: usize| task(state, t);
    run_tasks_prepared(n_tasks, helpers, || (), |_, t| mine(t), init, &task)
}

/// [`run_tasks`] after a serial prologue: wakes the helpers, runs `prologue()` on the calling
/// thread, then shares the tasks, each of which reads the prologue's result (`mine(&p, t)`,
/// `task(&p, &mut state, t)`). Helpers that wake before the prologue is done wait for it.
pub(crate) fn run_tasks_prepared<P: Sync + 'static, S: 'static, R: Send + 'static>(
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
    let to_spawn = helpers.min(n_tasks - 1) - usize::from(post_to_hot_helper(&shared));
    for _ in 0..to_spawn {
        let shared = Arc::clone(&shared);
        spawn_helper(move || help(&shared));
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

/// Hands the call to the calling thread's [`HotHelper`], if it has an idle one.
#[cfg(not(loom))]
fn post_to_hot_helper<P: Sync + 'static, S: 'static, R: Send + 'static>(
    shared: &Arc<Shared<P, S, R>>,
) -> bool {
    hot_helper::post(|| Arc::clone(shared) as Arc<dyn hot_helper::Work>)
}

/// Under loom there is no hot helper: every helper is spawned.
#[cfg(loom)]
fn post_to_hot_helper<P, S, R>(_: &Arc<Shared<P, S, R>>) -> bool {
    false
}

/// [`run_tasks`] for tasks whose results the caller wants in task order, whoever computed them:
/// `task(&mut state, t)` for every `t`, the caller with a state of its own.
pub(crate) fn map_tasks_with<S: 'static, R: Send + 'static>(
    n_tasks: usize,
    helpers: usize,
    init: &(dyn Fn() -> S + Sync),
    task: &(dyn Fn(&mut S, usize) -> R + Sync),
) -> Vec<R> {
    let mut out: Vec<Option<R>> = (0..n_tasks).map(|_| None).collect();
    let mut state = None;
    let theirs = run_tasks(
        n_tasks,
        helpers,
        |t| out[t] = Some(task(state.get_or_insert_with(init), t)),
        init,
        task,
    );
    for (t, r) in theirs {
        out[t] = Some(r);
    }
    // `run_tasks` runs every task exactly once, by `mine` or a helper: no slot is left empty.
    let out: Vec<R> = out.into_iter().flatten().collect();
    debug_assert_eq!(out.len(), n_tasks);
    out
}

/// `task(t)` for every `t in 0..n_tasks`, results in task order: the calling thread works
/// from the first task while a helper (the thread's [`HotHelper`] helper if it has one, else one
/// rayon worker woken for the call) claims the rest; with a pool of one thread, or a single
/// task, the caller runs them all. For work the caller would otherwise do alone between
/// kernel calls (the scheduler samples a batch's rows this way), at no risk of waiting for a
/// late helper.
///
/// ```
/// let squares = ponder_kernels::map_tasks(5, &|t| t * t);
/// assert_eq!(squares, vec![0, 1, 4, 9, 16]);
/// ```
pub fn map_tasks<R: Send + 'static>(n_tasks: usize, task: &(dyn Fn(usize) -> R + Sync)) -> Vec<R> {
    let helpers = rayon::current_num_threads().saturating_sub(1).min(1);
    map_tasks_with(n_tasks, helpers, &|| (), &|_, t| task(t))
}

/// `f` on each of two parts, the first on the calling thread and the second on a helper, as
/// [`map_tasks`] runs tasks. The parts may hold mutable borrows, so a pass over rows can split
/// its output with `split_at_mut` and give each thread one half. A part whose helper panicked
/// is run again from the start on the calling thread (a deterministic panic then reaches the
/// caller).
///
/// ```
/// let mut rows = vec![1.0f32; 8];
/// let (top, bottom) = rows.split_at_mut(4);
/// ponder_kernels::run_pair([top, bottom], &|half| half.iter_mut().for_each(|v| *v *= 2.0));
/// assert_eq!(rows, vec![2.0; 8]);
/// ```
pub fn run_pair<T: Send>(parts: [T; 2], f: &(dyn Fn(&mut T) + Sync)) {
    let parts = parts.map(Mutex::new);
    map_tasks(parts.len(), &|i| {
        // Each task locks its own part once, so the lock is never contended; it is poisoned
        // only by a panic inside `f`, after which the part is run again.
        let mut part = parts[i]
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        f(&mut part);
    });
}

/// On unwinding out of [`run_tasks`], closes the counter and waits until no helper is inside the
/// borrowed task function any more.
struct Guard<'a, P, S, R>(&'a Shared<P, S, R>);

impl<P, S, R> Drop for Guard<'_, P, S, R> {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return; // every task was claimed and published: nothing borrowed is reachable
        }
        self.0.next.store(usize::MAX / 2, Ordering::SeqCst);
        while self.0.active.load(Ordering::SeqCst) != 0 {
            yield_now();
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
            spin_loop();
            spins += 1;
        } else {
            yield_now();
        }
    };
    let mut state = None;
    while let Some(t) = shared.claim() {
        let slot = &shared.slots[t];
        let result = catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: task `t` is claimed and not yet published, so the caller is still inside
            // `run_tasks_prepared` (it waits for this slot): both closures and the prologue's
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
                spin_loop();
                spins += 1;
            }
            _ => std::thread::yield_now(),
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn squares(n: usize, helpers: usize) -> Vec<u64> {
        let mut out = vec![0u64; n];
        let task = |_: &mut (), t: usize| (t as u64) * (t as u64);
        let theirs = run_tasks(n, helpers, |t| out[t] = task(&mut (), t), &|| (), &task);
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
            let got = map_tasks_with(50, helpers, &|| 0usize, &task);
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
            let theirs = run_tasks(8, 1, |t| out[t] = t + 1, &|| (), &task);
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
                let theirs = run_tasks_prepared(
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
                run_tasks_prepared(
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
}
