//! Work sharing for one matmul call: the output columns are cut into tasks of whole 16-column
//! tiles, shared between the calling thread and rayon helpers by `work_sharing` (why not a plain
//! `par_iter` is explained there). The caller quantizes the activations after waking the
//! helpers, so that their wake-up overlaps it.
//!
//! Invariants:
//! - Numerics do not depend on who computes a task, on the task size or on the thread count:
//!   each tile is computed by the same kernel call with the same inputs either way.
//! - Whoever computes a task writes it straight into its columns of the outputs
//!   ([`Columns`]: the task claims them first), so nothing is copied after the parallel part.
//! - The output columns may be split over several row-major outputs (the parts of a stacked
//!   matrix), each starting at a tile boundary, so a tile's lanes always land in one output.

use std::sync::Arc;

use crate::work_sharing::run_tasks_prepared;

use super::columns::Columns;
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
    /// The matrix's tiles (see `layout.rs`): its own from `first_tile` on.
    pub(crate) tiles: Arc<[u8]>,
    /// The matrix's first tile in `tiles`.
    pub(crate) first_tile: usize,
    /// Bytes of one tile (`nb` tile blocks).
    pub(crate) tile_bytes: usize,
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

impl Tasks {
    /// The output columns of task `t`.
    fn cols(&self, t: usize) -> std::ops::Range<usize> {
        let start = t * self.cols_per_task;
        start..self.job.n.min(start + self.cols_per_task)
    }

    /// Computes task `t` over the quantized activations `act`, writing each tile's `m` rows
    /// into its columns of `out`.
    fn compute(&self, t: usize, act: &QuantizedRows, out: &Columns<'_>) {
        let (cols, job) = (self.cols(t), &self.job);
        // `run_tasks_prepared` hands out every task once, and tasks' columns are disjoint.
        let Some(claim) = out.claim(cols.clone()) else {
            panic!("columns {cols:?} of task {t} were claimed before: a work-sharing bug");
        };
        let _session = job.kernel.session(job.m);
        let mut buf = vec![0f32; job.m * TILE];
        for col in cols.clone().step_by(TILE) {
            let at = job.first_tile + col / TILE;
            let tile = &job.tiles[at * job.tile_bytes..][..job.tile_bytes];
            // The next tile streams in while this one is computed.
            let next = job.tiles.get((at + 1) * job.tile_bytes..).unwrap_or(&[]);
            let next = &next[..job.tile_bytes.min(next.len())];
            job.kernel
                .tile(job.format, tile, next, act, job.m, &mut buf);
            claim.put_tile(col, TILE.min(cols.end - col), &buf);
        }
    }
}

/// Runs `job` over the activations `quantize()` returns (called once, on this thread, while
/// the helpers wake) into `out` with up to `helpers` rayon helpers and about `tasks` tasks.
pub(crate) fn run(
    job: Job,
    quantize: impl FnOnce() -> QuantizedRows,
    out: &Columns<'_>,
    helpers: usize,
    tasks: usize,
) {
    let tiles = job.n.div_ceil(TILE);
    let cols_per_task = tiles.div_ceil(tasks.clamp(1, tiles.max(1))) * TILE;
    let n_tasks = job.n.div_ceil(cols_per_task);
    let job = Tasks { job, cols_per_task };
    let nothing_to_copy = run_tasks_prepared(
        n_tasks,
        helpers,
        quantize,
        |act, t| job.compute(t, act, out),
        &|| (),
        &|act: &QuantizedRows, _: &mut (), t| job.compute(t, act, out),
    );
    drop(nothing_to_copy);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::layout;
    use crate::cpu::quant::{ActFormat, Quantizer};

    /// A 37 x 64 Q4_1 job over 5 activation rows, cut into tasks of `tiles` tiles (the last
    /// task may be shorter), with its activations.
    fn tasks_of(tiles: usize) -> (Tasks, QuantizedRows) {
        let (job, act) = job();
        (
            Tasks {
                job,
                cols_per_task: tiles * TILE,
            },
            act,
        )
    }

    fn job() -> (Job, QuantizedRows) {
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
            first_tile: 0,
            tile_bytes: k / 32 * format.tile_block_bytes(),
            m,
            n,
        };
        let act = QuantizedRows::quantize(ActFormat::Q8_1, Quantizer::Scalar, &x, m, k);
        (job, act)
    }

    fn serial(tasks: &Tasks, act: &QuantizedRows) -> Vec<f32> {
        let (m, n) = (tasks.job.m, tasks.job.n);
        let mut out = vec![f32::NAN; m * n];
        let mut outs = [&mut out[..]];
        let cols = Columns::new(&mut outs, &[n], m).expect("valid outputs");
        for t in 0..n.div_ceil(tasks.cols_per_task) {
            tasks.compute(t, act, &cols);
        }
        out
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|v| v.to_bits()).collect()
    }

    #[test]
    fn tasks_of_several_tiles_land_in_their_columns_in_any_order() {
        let (one, act) = tasks_of(1);
        let expected = serial(&one, &act);
        for tiles in [1, 2, 3] {
            let (tasks, act) = tasks_of(tiles);
            let (m, n) = (tasks.job.m, tasks.job.n);
            let mut out = vec![f32::NAN; expected.len()];
            let mut outs = [&mut out[..]];
            let cols = Columns::new(&mut outs, &[n], m).expect("valid outputs");
            for t in (0..n.div_ceil(tasks.cols_per_task)).rev() {
                tasks.compute(t, &act, &cols);
            }
            assert_eq!(bits(&out), bits(&expected), "tasks of {tiles} tiles");
        }
    }

    #[test]
    fn a_run_with_helpers_computes_the_serial_bits() {
        let (tasks, act) = tasks_of(1);
        let expected = serial(&tasks, &act);
        for (helpers, tasks) in [(0, 1), (1, 3), (2, 8), (3, 100)] {
            let mut out = vec![f32::NAN; expected.len()];
            let (job, act) = job();
            let (m, n) = (job.m, job.n);
            let mut outs = [&mut out[..]];
            let cols = Columns::new(&mut outs, &[n], m).expect("valid outputs");
            run(job, move || act, &cols, helpers, tasks);
            assert_eq!(
                bits(&out),
                bits(&expected),
                "helpers {helpers}, tasks {tasks}"
            );
        }
    }
}
