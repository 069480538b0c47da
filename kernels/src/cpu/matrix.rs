//! `QuantMatrix`: a GGML-quantized weight matrix (Q4_1 or Q8_0) and its batch-invariant
//! `x @ W^T` on the CPU.
//!
//! A call quantizes the `m` activation rows once (Q8_1 for Q4_1 weights, Q8_0 for Q8_0, exactly
//! as candle-core 0.11.1 does), shares the output columns, in tasks of whole 16-column tiles,
//! between the calling thread and rayon helpers (`parallel.rs`), and streams each tile's weight
//! blocks once for all `m` rows.
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

use std::sync::Arc;

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
/// Tasks per thread, so that a helper that wakes late still finds work. Does not affect
/// numerics.
const TASKS_PER_THREAD: usize = 4;

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
/// column-tiled layout of `layout.rs`.
#[derive(Debug, Clone)]
pub struct QuantMatrix {
    format: QuantFormat,
    rows: usize,
    cols: usize,
    /// `rows.div_ceil(TILE)` tiles of `cols / 32` tile blocks each (shared with helpers).
    tiles: Arc<[u8]>,
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
        })
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
        layout::to_ggml(self.format, self.rows, self.cols, &self.tiles)
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
        let kernel = Kernel::resolve(path).ok_or(KernelError::PathUnavailable { path })?;
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
        if mn == 0 {
            return Ok(());
        }
        let quantize = move || {
            let act =
                QuantizedRows::quantize(self.format.act_format(), kernel.quantizer(), x, m, k);
            kernel.prepare(act, m)
        };
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
            tile_bytes: k / QK * self.format.tile_block_bytes(),
            m,
            n,
        };
        let tasks = threads * TASKS_PER_THREAD;
        if QuantizedRows::splits_over_threads(x.len()) {
            // A prefill chunk's quantization runs on the pool itself: finish it before helpers
            // occupy the pool waiting for it.
            let act = quantize();
            parallel::run(job, move || act, out, helpers, tasks);
        } else {
            parallel::run(job, quantize, out, helpers, tasks);
        }
        Ok(())
    }
}
