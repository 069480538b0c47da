//! Work sharing for one matmul call: the output columns are cut into tasks of whole 16-column
//! tiles; the calling thread claims and computes tasks itself while optional rayon helpers,
//! woken with `rayon::spawn`, claim the rest from the same atomic counter.
//!
//! Why not a plain `par_iter`: from a thread outside rayon's pool that parks the caller until
//! the pool is done, and on small VMs waking a parked thread costs tens of microseconds, more
//! than a whole decode-sized matmul. Here the caller never waits for a helper that has not
//! started: a helper that wakes late finds no task left and exits, and the caller only waits
//! (spinning briefly) for tasks a running helper has already claimed. So a call is never much
//! slower than single-threaded, and up to `threads` times faster when helpers are awake.
//!
//! Invariants:
//! - Numerics do not depend on who computes a task, on the task size or on the thread count:
//!   each tile is computed by the same kernel call with the same inputs either way.
//! - The caller writes its own tasks straight into `out`; a helper writes into its own buffer
//!   and publishes it once (`OnceLock`), and the caller copies it in. A helper that panics
//!   publishes an empty buffer and the caller recomputes that task itself, so a failure never
//!   hangs or aborts the call.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use super::kernel::Kernel;
use super::layout::TILE;
use super::quant::QuantizedRows;
use super::QuantFormat;

/// Everything a task needs, shared by the caller and its helpers.
pub(crate) struct Job {
    /// The weight format.
    pub(crate) format: QuantFormat,
    /// The kernel computing each tile.
    pub(crate) kernel: Kernel,
    /// The matrix's tiles (see `layout.rs`).
    pub(crate) tiles: Arc<[u8]>,
    /// Bytes of one tile (`nb` tile blocks).
    pub(crate) tile_bytes: usize,
    /// The quantized activations (`m` rows).
    pub(crate) act: QuantizedRows,
    /// Activation rows.
    pub(crate) m: usize,
    /// Output columns (matrix rows).
    pub(crate) n: usize,
}

/// A job cut into tasks of `cols_per_task` columns (a multiple of `TILE`).
struct Tasks {
    job: Job,
    cols_per_task: usize,
}

/// Tasks plus their claim counter and the helpers' published results.
struct Shared {
    job: Tasks,
    n_tasks: usize,
    next: AtomicUsize,
    results: Vec<OnceLock<Vec<f32>>>,
}

impl Tasks {
    /// The output columns of task `t`.
    fn cols(&self, t: usize) -> std::ops::Range<usize> {
        let start = t * self.cols_per_task;
        start..self.job.n.min(start + self.cols_per_task)
    }

    /// Computes task `t`, handing each tile's `m` rows of lanes to `emit(row, col, lanes)`.
    fn compute(&self, t: usize, mut emit: impl FnMut(usize, usize, &[f32])) {
        let (cols, job) = (self.cols(t), &self.job);
        let mut buf = vec![0f32; job.m * TILE];
        for col in cols.clone().step_by(TILE) {
            let tile = &job.tiles[(col / TILE) * job.tile_bytes..][..job.tile_bytes];
            // The next tile streams in while this one is computed.
            if let Some(next) = job.tiles.get((col / TILE + 1) * job.tile_bytes..) {
                job.kernel.prefetch(&next[..job.tile_bytes.min(next.len())]);
            }
            job.kernel.tile(job.format, tile, &job.act, job.m, &mut buf);
            let width = TILE.min(cols.end - col);
            for (r, lanes) in buf.chunks_exact(TILE).enumerate() {
                emit(r, col, &lanes[..width]);
            }
        }
    }

    /// Computes task `t` straight into the `m x n` output.
    fn compute_into(&self, t: usize, out: &mut [f32]) {
        let n = self.job.n;
        self.compute(t, |r, col, lanes| {
            out[r * n + col..][..lanes.len()].copy_from_slice(lanes)
        });
    }

    /// Computes task `t` into a fresh buffer in the order the tiles come out: tile by tile,
    /// each tile's `m` rows of its (up to 16) lanes; filled by appending, never zeroed first.
    fn compute_owned(&self, t: usize) -> Vec<f32> {
        let mut own = Vec::with_capacity(self.job.m * self.cols(t).len());
        self.compute(t, |_, _, lanes| own.extend_from_slice(lanes));
        own
    }
}

/// Runs `job` into `out` (`m * n` long) with up to `helpers` rayon helpers and about
/// `tasks` tasks.
pub(crate) fn run(job: Job, out: &mut [f32], helpers: usize, tasks: usize) {
    let tiles = job.n.div_ceil(TILE);
    let cols_per_task = tiles.div_ceil(tasks.clamp(1, tiles.max(1))) * TILE;
    let n_tasks = job.n.div_ceil(cols_per_task);
    let job = Tasks { job, cols_per_task };
    if helpers == 0 || n_tasks < 2 {
        for t in 0..n_tasks {
            job.compute_into(t, out);
        }
        return;
    }
    let shared = Arc::new(Shared {
        job,
        n_tasks,
        next: AtomicUsize::new(0),
        results: (0..n_tasks).map(|_| OnceLock::new()).collect(),
    });
    for _ in 0..helpers.min(n_tasks - 1) {
        let shared = Arc::clone(&shared);
        rayon::spawn(move || help(&shared));
    }
    finish(&shared, out);
}

/// The caller's side: claim and compute tasks until none are left, then collect the tasks the
/// helpers claimed (recomputing any a helper failed to publish).
fn finish(shared: &Shared, out: &mut [f32]) {
    let mut mine = vec![false; shared.n_tasks];
    while let Some(t) = claim(shared) {
        mine[t] = true;
        shared.job.compute_into(t, out);
    }
    for t in (0..shared.n_tasks).filter(|&t| !mine[t]) {
        let theirs = wait(&shared.results[t]);
        let (cols, m, n) = (shared.job.cols(t), shared.job.job.m, shared.job.job.n);
        if theirs.len() != m * cols.len() {
            shared.job.compute_into(t, out); // the helper failed: do it here
            continue;
        }
        // `compute_owned`'s order: per tile of (up to) 16 columns, its `m` rows.
        let (mut rest, end) = (theirs, cols.end);
        for col in cols.step_by(TILE) {
            let width = TILE.min(end - col);
            let (tile, tail) = rest.split_at(m * width);
            for (r, lanes) in tile.chunks_exact(width).enumerate() {
                out[r * n + col..][..width].copy_from_slice(lanes);
            }
            rest = tail;
        }
    }
}

fn claim(shared: &Shared) -> Option<usize> {
    let t = shared.next.fetch_add(1, Ordering::Relaxed);
    (t < shared.n_tasks).then_some(t)
}

/// A helper: claims and publishes tasks until none are left.
fn help(shared: &Shared) {
    while let Some(t) = claim(shared) {
        let slot = &shared.results[t];
        let result = catch_unwind(AssertUnwindSafe(|| shared.job.compute_owned(t)));
        // An empty buffer tells the caller to recompute the task.
        let _ = slot.set(result.unwrap_or_default());
    }
}

/// Waits for a task a running helper has claimed: spin briefly, then yield.
fn wait(slot: &OnceLock<Vec<f32>>) -> &[f32] {
    let mut spins = 0u32;
    loop {
        if let Some(result) = slot.get() {
            return result;
        }
        if spins < 2000 {
            std::hint::spin_loop();
            spins += 1;
        } else {
            std::thread::yield_now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::layout;
    use crate::cpu::quant::{ActFormat, Quantizer};

    /// A 37 x 64 Q4_1 job over 5 activation rows, cut into tasks of one tile.
    fn shared() -> Shared {
        shared_in_tasks_of(1)
    }

    /// The same job cut into tasks of `tiles` tiles (the last task may be shorter).
    fn shared_in_tasks_of(tiles: usize) -> Shared {
        let (m, n, k) = (5, 37, 64);
        let mut state = 7u32;
        let mut next = || {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            state >> 8
        };
        let mut ggml = Vec::new();
        for _ in 0..n * k / 32 {
            ggml.extend([0x00, 0x20, 0x00, 0xb0]); // d = 0.0078125, m = -0.125
            ggml.extend((0..16).map(|_| next() as u8));
        }
        let x: Vec<f32> = (0..m * k)
            .map(|_| next() as f32 / (1 << 24) as f32 - 0.5)
            .collect();
        let format = QuantFormat::Q4_1;
        let job = Job {
            format,
            kernel: Kernel::Scalar,
            tiles: layout::from_ggml(format, n, k, &ggml).into(),
            tile_bytes: k / 32 * format.tile_block_bytes(),
            act: QuantizedRows::quantize(ActFormat::Q8_1, Quantizer::Scalar, &x, m, k),
            m,
            n,
        };
        let n_tasks = n.div_ceil(tiles * TILE);
        Shared {
            job: Tasks {
                job,
                cols_per_task: tiles * TILE,
            },
            n_tasks,
            next: AtomicUsize::new(0),
            results: (0..n_tasks).map(|_| OnceLock::new()).collect(),
        }
    }

    fn serial(shared: &Shared) -> Vec<f32> {
        let mut out = vec![f32::NAN; shared.job.job.m * shared.job.job.n];
        for t in 0..shared.n_tasks {
            shared.job.compute_into(t, &mut out);
        }
        out
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|v| v.to_bits()).collect()
    }

    #[test]
    fn tasks_published_by_a_helper_are_copied_into_place() {
        let shared = shared();
        let expected = serial(&shared);
        // A helper claims and publishes the first two tasks; the caller does the rest.
        for _ in 0..2 {
            let Some(t) = claim(&shared) else {
                panic!("no task to claim")
            };
            assert!(shared.results[t].set(shared.job.compute_owned(t)).is_ok());
        }
        let mut out = vec![f32::NAN; expected.len()];
        finish(&shared, &mut out);
        assert_eq!(bits(&out), bits(&expected));
    }

    #[test]
    fn helper_tasks_of_several_tiles_land_in_their_columns() {
        for tiles in [2, 3] {
            let shared = shared_in_tasks_of(tiles);
            let expected = serial(&shared);
            help(&shared);
            let mut out = vec![f32::NAN; expected.len()];
            finish(&shared, &mut out);
            assert_eq!(bits(&out), bits(&expected), "tasks of {tiles} tiles");
        }
    }

    #[test]
    fn a_task_whose_helper_failed_is_recomputed_by_the_caller() {
        let shared = shared();
        let expected = serial(&shared);
        // A helper claims task 0 and publishes the empty buffer of a panicked computation.
        assert_eq!(claim(&shared), Some(0));
        assert!(shared.results[0].set(Vec::new()).is_ok());
        let mut out = vec![f32::NAN; expected.len()];
        finish(&shared, &mut out);
        assert_eq!(bits(&out), bits(&expected));
    }

    #[test]
    fn a_helper_that_runs_first_computes_every_task() {
        let shared = shared();
        let expected = serial(&shared);
        help(&shared);
        assert!(shared.results.iter().all(|r| r.get().is_some()));
        let mut out = vec![f32::NAN; expected.len()];
        finish(&shared, &mut out);
        assert_eq!(bits(&out), bits(&expected));
    }
}
