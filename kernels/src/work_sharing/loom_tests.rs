//! The work-sharing protocol under loom: each test is run for every interleaving of the caller
//! and its helper threads (within loom's preemption bound), so a lost task, a task computed
//! twice, a deadlock or a helper still inside the borrowed task function after the call returns
//! fails here, however rarely it would happen on a real machine.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p ponder-kernels --lib work_sharing::loom_tests`
//! in a target directory of its own (scripts/test.sh does). A mutant whose task claim is a load
//! and a store instead of one `fetch_add` fails here (two threads run one task, and the caller
//! returns while a helper still uses its borrows).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize as StdAtomicUsize, Ordering as StdOrdering};

use loom::model::Builder;

use super::{map_tasks_with, run_tasks_prepared};

/// The model checker with a bound on preemptions (spin loops make the unbounded space huge).
fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = Builder::new();
    builder.preemption_bound = Some(3);
    builder.check(f);
}

#[test]
fn every_task_is_computed_exactly_once_in_every_interleaving() {
    model(|| {
        // Counts per task, across caller and helper (plain atomics: they are the test's
        // bookkeeping, not part of the protocol under check).
        let runs: Vec<StdAtomicUsize> = (0..3).map(|_| StdAtomicUsize::new(0)).collect();
        let task = |_: &mut (), t: usize| {
            runs[t].fetch_add(1, StdOrdering::SeqCst);
            t * 10
        };
        let got = map_tasks_with(3, 1, &|| (), &task);
        assert_eq!(got, vec![0, 10, 20]);
        for (t, r) in runs.iter().enumerate() {
            assert_eq!(
                r.load(StdOrdering::SeqCst),
                1,
                "task {t} ran more or less than once"
            );
        }
    });
}

#[test]
fn helpers_see_the_prologue_result_in_every_interleaving() {
    model(|| {
        let mut out = vec![0u64; 2];
        let task = |offset: &u64, _: &mut (), t: usize| offset + t as u64;
        let theirs = run_tasks_prepared(
            2,
            2,
            || 1000u64,
            |offset, t| out[t] = task(offset, &mut (), t),
            &|| (),
            &task,
        );
        for (t, r) in theirs {
            out[t] = r;
        }
        assert_eq!(out, vec![1000, 1001]);
    });
}

#[test]
fn a_panicking_prologue_returns_only_when_no_helper_is_inside() {
    model(|| {
        // `inside` counts helpers inside the borrowed task function; after the call unwinds
        // it must be zero and stay zero (a helper that wakes later claims nothing).
        let inside = std::sync::Arc::new(StdAtomicUsize::new(0));
        let probe = std::sync::Arc::clone(&inside);
        let task = move |_: &u64, _: &mut (), t: usize| {
            probe.fetch_add(1, StdOrdering::SeqCst);
            probe.fetch_sub(1, StdOrdering::SeqCst);
            t
        };
        let result = catch_unwind(AssertUnwindSafe(|| {
            run_tasks_prepared(
                2,
                1,
                || -> u64 { panic!("prologue failure") },
                |_, _| {},
                &|| (),
                &task,
            )
        }));
        assert!(result.is_err());
        assert_eq!(inside.load(StdOrdering::SeqCst), 0);
    });
}

#[test]
fn a_panicking_helper_task_is_recomputed_by_the_caller_in_every_interleaving() {
    model(|| {
        let caller = loom::thread::current().id();
        let task = move |_: &mut (), t: usize| {
            if t == 1 && loom::thread::current().id() != caller {
                panic!("helper failure on task 1");
            }
            t + 1
        };
        let got = map_tasks_with(2, 1, &|| (), &task);
        assert_eq!(got, vec![1, 2]);
    });
}
