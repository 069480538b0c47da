//! `QuantMatrix`: a GGML-quantized weight matrix (Q4_1 or Q8_0) and its batch-invariant
//! `x @ W^T` on the CPU.
//!
//! A call quantizes the `m` activation rows once (Q8_1 for Q4_1 weights, Q8_0 for Q8_0, exactly
//! as candle-core 0.11.1 does), shares the output columns, in tasks of whole 16-column tiles,
//! between the calling thread and rayon helpers (`parallel.rs`), and streams each tile's weight
//! blocks once for all `m` rows. Matrices that read the same input (q/k/v, gate/up) can be
//! stacked into one, which a single call computes into one output per part.
//!
//! Invariants:
//! - Batch invariance: `out[r][c]` is a function of x row `r` and weight row `c` only. Rows are
//!   quantized independently; every kernel computes each (row, column) with one fixed sequence
//!   of operations whatever `m`, the row blocking, the tile split or the thread count.
//! - Numerics: Q4_1 is bitwise candle-core 0.11.1's generic path (`matmul` with
//!   `BlockQ4_1::vec_dot_unopt`, the only Q4_1 dot candle has). Q8_0 is bitwise
//!   `BlockQ8_0::vec_dot_unopt`; candle's own x86 Q8_0 matmul uses its AVX kernel (per-block
//!   `dx * dy` then a lane-wise FMA and a horizontal sum) or, when `k % 256 == 0` and
//!   `n % 16 == 0` on AVX-512 VNNI, a repacked path with Q8_K activations, so it differs from
//!   us by float rounding (and, on that repacked path, by activation quantization).
//! - Every SIMD path equals [`KernelPath::Scalar`] bitwise (tested on random data).
//!
//! Unsafe code: one `Vec::set_len` in [`QuantMatrix::matmul_parts_vec`], after
//! `Columns::all_written` proved the new outputs written (they are not zeroed first).

use std::sync::Arc;

use super::columns::Columns;
use super::error::{KernelError, Result};
use super::kernel::{Kernel, KernelPath};
use super::layout::{self, TILE};
use super::parallel::{self, Job};
use super::quant::{ActFormat, QuantizedRows, QK};

/// Work (`m * n * k` multiply-accumulates, about 4 us single-threaded) from which a call
/// wakes rayon helpers (see `parallel.rs`); below it the wake-up costs more than helpers can
/// save. Measured on the 2-core dev VM: SmolLM2's k_v projection (n=192, m=1) stays serial.
/// Does not affect numerics.
const PAR_MIN_WORK: usize = 1 << 18;
/// Tasks per thread: one contiguous run of tiles each, so every thread streams one long stretch
/// of the weights (each task's start is a new stream for the hardware prefetchers to pick up).
/// A helper that wakes late never makes the caller wait: the caller claims the task it has not
/// started. Measured on the 2-core dev VM (AMD Zen 5), default `nsample`, 6 alternated pairs of
/// binaries: one task per thread decoded one stream at 265-298 tok/s (median 280) against
/// 241-276 (261) with four, and the batched run took a median 1.72 s against 1.77 s; 16 per
/// thread was ~10 % slower still, and stealing across regions lost more to claims than it won
/// on the tail (the seventeenth session in `git show 0a5712f:BENCHMARKS.md`). Does not affect numerics.
const TASKS_PER_THREAD: usize = 1;

/// GGML block format of a [`QuantMatrix`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuantFormat {
    /// 32 weights as `d * q + m`, `q` in 0..=15 (f16 `d`, f16 `m`, 16 nibble bytes).
    Q4_1,
    /// 32 weights as `d * q`, `q` an i8 (f16 `d`, 32 bytes).
    Q8_0,
}

impl QuantFormat {
    fn act_format(self) -> ActFormat {
        match self {
            QuantFormat::Q4_1 => ActFormat::Q8_1,
            QuantFormat::Q8_0 => ActFormat::Q8_0,
        }
    }
}

/// An `n x k` GGML-quantized weight matrix (row `c` is output column `c`), stored in the
/// column-tiled layout of `layout.rs`. Cloning shares the storage; so do the parts of a
/// [`QuantMatrix::stack`].
#[derive(Debug, Clone)]
pub struct QuantMatrix {
    format: QuantFormat,
    rows: usize,
    cols: usize,
    /// Tiles of `cols / 32` tile blocks each (shared with helpers and with the other parts of
    /// a stack); this matrix is `rows.div_ceil(TILE)` of them from `first_tile` on.
    tiles: Arc<[u8]>,
    first_tile: usize,
}

/// Most activation rows one pass over the weights takes. A prefill chunk's rows are cut into
/// passes of this many, so that their quantized activations (64 x 576 int8 plus scales, ~40
/// KiB for SmolLM2's hidden size) stay in L1 while the pass sweeps every column tile: one pass
/// over all 512 rows re-read them from L2 for each tile. Measured on the development VM (one
/// thread, cache-warm 1536 x 576 Q4_1, AMX): 153 ns per 16 x 16 x 32 tile block with 512 rows
/// in one pass, 69-97 ns in passes of 64 (91 ns for 16 or 64 rows). In the default model's
/// 512-token prefill, where the weights come from memory, the gain is smaller: the MLP's
/// gate/up matmuls took 177-192 ms instead of 204-212 ms (two runs each). Rows never affect
/// each other's bits, so the cut changes no result. A multiple of the AMX row group.
const ROW_CHUNK: usize = 64;

/// `0..m` in consecutive ranges of at most [`ROW_CHUNK`] rows (one empty range when `m == 0`,
/// so that shape checks still run).
fn row_chunks(m: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    (0..m.div_ceil(ROW_CHUNK).max(1)).map(move |c| c * ROW_CHUNK..((c + 1) * ROW_CHUNK).min(m))
}

impl QuantMatrix {
    /// `bytes` are the GGML block data of an n x k matrix (row-major blocks, k % 32 == 0), as
    /// stored in GGUF.
    pub fn from_ggml_bytes(
        format: QuantFormat,
        rows: usize,
        cols: usize,
        bytes: Vec<u8>,
    ) -> Result<Self> {
        if !cols.is_multiple_of(QK) {
            return Err(KernelError::ColsNotBlockMultiple {
                format,
                cols,
                block: QK,
            });
        }
        // The tiled copy pads `rows` up to whole tiles; both sizes must be addressable.
        let row_bytes = (cols / QK).checked_mul(format.ggml_block_bytes());
        let tiled_bytes = rows
            .checked_next_multiple_of(TILE)
            .zip(row_bytes)
            .and_then(|(r, b)| r.checked_mul(b));
        let (Some(row_bytes), Some(_)) = (row_bytes, tiled_bytes) else {
            return Err(KernelError::ShapeOverflow { rows, cols });
        };
        let expected = row_bytes * rows;
        if bytes.len() != expected {
            return Err(KernelError::WeightBytes {
                format,
                rows,
                cols,
                expected,
                got: bytes.len(),
            });
        }
        let tiles = layout::from_ggml(format, rows, cols, &bytes).into();
        Ok(Self {
            format,
            rows,
            cols,
            tiles,
            first_tile: 0,
        })
    }

    /// Stacks matrices of one format and one `cols` into a single matrix whose rows are the
    /// parts' rows in order, so that one [`Self::matmul`] computes all their outputs side by
    /// side (one activation quantization, one parallel region; each output bitwise what the
    /// part's own matmul gives). Returns the stack and each part as a view of it (sharing its
    /// storage, so keeping both costs no memory). Every part but the last must have a whole
    /// number of 16-row tiles.
    pub fn stack(parts: &[QuantMatrix]) -> Result<(QuantMatrix, Vec<QuantMatrix>)> {
        let Some(first) = parts.first() else {
            return Err(KernelError::Stack {
                part: 0,
                reason: "there are no parts".into(),
            });
        };
        for (i, part) in parts.iter().enumerate() {
            let reason = if part.format != first.format {
                format!(
                    "format {:?} differs from part 0's {:?}",
                    part.format, first.format
                )
            } else if part.cols != first.cols {
                format!("cols {} differ from part 0's {}", part.cols, first.cols)
            } else if i + 1 < parts.len() && !part.rows.is_multiple_of(TILE) {
                format!(
                    "rows {} are not a multiple of {TILE} (only the last part may end in a \
                     partial tile)",
                    part.rows
                )
            } else {
                continue;
            };
            return Err(KernelError::Stack { part: i, reason });
        }
        let rows: usize = parts.iter().map(|p| p.rows).sum();
        let mut tiles = Vec::with_capacity(parts.iter().map(|p| p.tile_bytes().len()).sum());
        let mut views = Vec::with_capacity(parts.len());
        let mut first_tile = 0;
        for part in parts {
            tiles.extend_from_slice(part.tile_bytes());
            views.push(first_tile);
            first_tile += part.rows.div_ceil(TILE);
        }
        let stack = QuantMatrix {
            format: first.format,
            rows,
            cols: first.cols,
            tiles: tiles.into(),
            first_tile: 0,
        };
        let views = parts
            .iter()
            .zip(views)
            .map(|(part, first_tile)| QuantMatrix {
                tiles: Arc::clone(&stack.tiles),
                first_tile,
                ..part.clone()
            })
            .collect();
        Ok((stack, views))
    }

    /// Bytes of one tile.
    fn bytes_per_tile(&self) -> usize {
        self.cols / QK * self.format.tile_block_bytes()
    }

    /// This matrix's tiles.
    fn tile_bytes(&self) -> &[u8] {
        let per_tile = self.bytes_per_tile();
        let start = self.first_tile * per_tile;
        &self.tiles[start..start + self.rows.div_ceil(TILE) * per_tile]
    }

    /// Rows (n): output features.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns (k): input features.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// The block format.
    pub fn format(&self) -> QuantFormat {
        self.format
    }

    /// The GGML block bytes this matrix was built from (the layout is a lossless permutation).
    pub fn to_ggml_bytes(&self) -> Vec<u8> {
        layout::to_ggml(self.format, self.rows, self.cols, self.tile_bytes())
    }

    /// `out[r*n + c] = dot(x[r*k..(r+1)*k], W[c])` for `r < m`. `x` is m x k row-major f32.
    /// Batch-invariant: a row's outputs do not depend on `m` or the other rows.
    pub fn matmul(&self, x: &[f32], m: usize, out: &mut [f32]) -> Result<()> {
        self.matmul_with(KernelPath::best(), x, m, out)
    }

    /// [`Self::matmul`] on the portable scalar reference kernel.
    pub fn matmul_scalar(&self, x: &[f32], m: usize, out: &mut [f32]) -> Result<()> {
        self.matmul_with(KernelPath::Scalar, x, m, out)
    }

    /// [`Self::matmul`] on a chosen kernel path; errors if the CPU does not support it.
    pub fn matmul_with(
        &self,
        path: KernelPath,
        x: &[f32],
        m: usize,
        out: &mut [f32],
    ) -> Result<()> {
        let n = self.rows;
        let mn = m
            .checked_mul(n)
            .ok_or(KernelError::ShapeOverflow { rows: m, cols: n })?;
        if out.len() != mn {
            return Err(KernelError::OutputLen {
                m,
                n,
                expected: mn,
                got: out.len(),
            });
        }
        self.matmul_into(path, x, m, &mut [out], &[n])
    }

    /// [`Self::matmul`] with the output columns split over several outputs, as for a
    /// [`Self::stack`]: `outs[i]` (row-major `m x width_i`, `width_i = outs[i].len() / m`)
    /// gets the next `width_i` columns. The widths must add up to `rows`, and every output but
    /// the last must start a whole number of 16-column tiles after the previous one.
    pub fn matmul_parts(&self, x: &[f32], m: usize, outs: &mut [&mut [f32]]) -> Result<()> {
        if m == 0 {
            return match outs.iter().position(|o| !o.is_empty()) {
                None => self.matmul_into(KernelPath::best(), x, 0, &mut [], &[]),
                Some(part) => Err(KernelError::OutputParts {
                    part,
                    reason: "holds values but there are no rows".into(),
                }),
            };
        }
        let mut widths = Vec::with_capacity(outs.len());
        for (part, out) in outs.iter().enumerate() {
            if !out.len().is_multiple_of(m) {
                return Err(KernelError::OutputParts {
                    part,
                    reason: format!("length {} is not a multiple of m = {m}", out.len()),
                });
            }
            widths.push(out.len() / m);
        }
        self.check_widths(&widths)?;
        self.matmul_into(KernelPath::best(), x, m, outs, &widths)
    }

    /// [`Self::matmul`] into a new vector (`m x rows`, row-major), which the kernel writes
    /// without zeroing it first.
    pub fn matmul_vec(&self, x: &[f32], m: usize) -> Result<Vec<f32>> {
        let mut outs = self.matmul_parts_vec(x, m, &[self.rows])?;
        Ok(outs.pop().unwrap_or_default())
    }

    /// [`Self::matmul_parts`] into new vectors, output `i` `m x widths[i]`, which the kernel
    /// writes without zeroing them first.
    ///
    /// ```
    /// use ponder_kernels::{QuantFormat, QuantMatrix};
    ///
    /// // A 48 x 32 Q8_0 matrix (GGML blocks: f16 scale 1.0, then 32 quants of 2): every
    /// // output column is 2 * sum(x).
    /// let block: Vec<u8> = [0x00, 0x3c].into_iter().chain([2u8; 32]).collect();
    /// let w = QuantMatrix::from_ggml_bytes(QuantFormat::Q8_0, 48, 32, block.repeat(48))?;
    /// let x = vec![0.25f32; 2 * 32]; // two rows
    /// let parts = w.matmul_parts_vec(&x, 2, &[32, 16])?;
    /// assert_eq!((parts[0].len(), parts[1].len()), (2 * 32, 2 * 16));
    /// assert!(parts.iter().flatten().all(|&y| (y - 16.0).abs() < 0.1));
    /// # Ok::<(), ponder_kernels::KernelError>(())
    /// ```
    pub fn matmul_parts_vec(&self, x: &[f32], m: usize, widths: &[usize]) -> Result<Vec<Vec<f32>>> {
        self.check_widths(widths)?;
        let mut vecs = Vec::with_capacity(widths.len());
        for &w in widths {
            let len = m
                .checked_mul(w)
                .ok_or(KernelError::ShapeOverflow { rows: m, cols: w })?;
            vecs.push(Vec::<f32>::with_capacity(len));
        }
        let kernel = Kernel::resolve(KernelPath::best()).ok_or(KernelError::PathUnavailable {
            path: KernelPath::best(),
        })?;
        let k = self.check_input(x, m)?;
        for rows in row_chunks(m) {
            let mut spare: Vec<_> = vecs
                .iter_mut()
                .zip(widths)
                .map(|(v, &w)| &mut v.spare_capacity_mut()[rows.start * w..rows.end * w])
                .collect();
            let out = Columns::new_uninit(&mut spare, widths, rows.len()).ok_or_else(|| {
                KernelError::OutputParts {
                    part: widths.len(),
                    reason: "outputs do not match their widths".into(),
                }
            })?;
            self.run(kernel, &x[rows.start * k..rows.end * k], rows.len(), &out)?;
            if !rows.is_empty() && !out.all_written() {
                return Err(KernelError::OutputParts {
                    part: widths.len(),
                    reason: "the kernel left columns unwritten (a work-sharing bug)".into(),
                });
            }
        }
        for (v, &w) in vecs.iter_mut().zip(widths) {
            // SAFETY: the first `m * w` elements of each vector's capacity were the outputs of
            // `Columns::new_uninit`, and `all_written` proved every one of them written (with
            // no rows there is nothing to write).
            #[allow(unsafe_code)]
            unsafe {
                v.set_len(m * w)
            };
        }
        Ok(vecs)
    }

    /// Checks that `x` holds `m` rows of `cols`; returns `cols`.
    fn check_input(&self, x: &[f32], m: usize) -> Result<usize> {
        let k = self.cols;
        if x.len() != m.saturating_mul(k) {
            return Err(KernelError::InputLen {
                m,
                k,
                expected: m.saturating_mul(k),
                got: x.len(),
            });
        }
        Ok(k)
    }

    /// Checks output widths against the matrix: they add up to `rows`, and all but the last
    /// are whole tiles.
    fn check_widths(&self, widths: &[usize]) -> Result<()> {
        for (part, &w) in widths.iter().enumerate() {
            if part + 1 < widths.len() && !w.is_multiple_of(TILE) {
                return Err(KernelError::OutputParts {
                    part,
                    reason: format!(
                        "width {w} is not a multiple of {TILE} (only the last part may end in a \
                         partial tile)"
                    ),
                });
            }
        }
        let total: usize = widths.iter().sum();
        if total != self.rows {
            return Err(KernelError::OutputParts {
                part: widths.len(),
                reason: format!(
                    "widths add up to {total}, the matrix has {} rows",
                    self.rows
                ),
            });
        }
        Ok(())
    }

    /// The matmul into outputs already checked against `widths` (which add up to `rows`).
    fn matmul_into(
        &self,
        path: KernelPath,
        x: &[f32],
        m: usize,
        outs: &mut [&mut [f32]],
        widths: &[usize],
    ) -> Result<()> {
        let kernel = Kernel::resolve(path).ok_or(KernelError::PathUnavailable { path })?;
        let parts = outs.len();
        let k = self.check_input(x, m)?;
        for rows in row_chunks(m) {
            let mut chunk: Vec<&mut [f32]> = outs
                .iter_mut()
                .zip(widths)
                .map(|(o, &w)| o.get_mut(rows.start * w..rows.end * w).unwrap_or_default())
                .collect();
            let out = Columns::new(&mut chunk, widths, rows.len()).ok_or_else(|| {
                KernelError::OutputParts {
                    part: parts,
                    reason: "outputs do not match their widths".into(),
                }
            })?;
            self.run(kernel, &x[rows.start * k..rows.end * k], rows.len(), &out)?;
        }
        Ok(())
    }

    /// Computes `x`'s `m` rows into `out`, whose widths add up to `rows`.
    fn run(&self, kernel: Kernel, x: &[f32], m: usize, out: &Columns<'_>) -> Result<()> {
        let (n, k) = (self.rows, self.cols);
        let mk = m
            .checked_mul(k)
            .ok_or(KernelError::ShapeOverflow { rows: m, cols: k })?;
        if x.len() != mk {
            return Err(KernelError::InputLen {
                m,
                k,
                expected: mk,
                got: x.len(),
            });
        }
        let mn = m * n; // each output's length is m times its width, so this fits
        if mn == 0 {
            return Ok(());
        }
        let quantize = move || kernel.quantize(self.format.act_format(), x, m, k);
        let threads = rayon::current_num_threads().max(1);
        let helpers = if mn.saturating_mul(k) >= PAR_MIN_WORK {
            threads - 1
        } else {
            0
        };
        let job = Job {
            format: self.format,
            kernel,
            tiles: Arc::clone(&self.tiles),
            first_tile: self.first_tile,
            tile_bytes: self.bytes_per_tile(),
            m,
            n,
        };
        let tasks = threads * TASKS_PER_THREAD;
        if QuantizedRows::splits(x.len()) {
            // Quantization that shares its work (a batched step's or a prefill chunk's) needs
            // the helpers itself: finish it before they wait for it here.
            let act = quantize();
            parallel::run(job, move || act, out, helpers, tasks);
        } else {
            parallel::run(job, quantize, out, helpers, tasks);
        }
        Ok(())
    }
}
