//! The kernels crate's error type: every variant names the argument at fault and the size it
//! was expected to have, so a caller can see at a glance which tensor was mis-shaped.
//!
//! Invariant: kernels validate all lengths up front and return one of these before touching
//! any buffer; nothing in the crate panics on a user-supplied shape.

use super::kernel::KernelPath;
use super::QuantFormat;

/// Errors from building or applying a quantized matrix.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    /// `cols` (k) is not a multiple of the format's block size.
    #[error("cols (k) = {cols} is not a multiple of the {format:?} block size {block}")]
    ColsNotBlockMultiple {
        /// The weight format.
        format: QuantFormat,
        /// The offending column count.
        cols: usize,
        /// The block size it must divide into.
        block: usize,
    },
    /// `rows * cols` (or a derived byte count) does not fit in `usize`.
    #[error("a {rows}x{cols} matrix is too large to address")]
    ShapeOverflow {
        /// Rows (n).
        rows: usize,
        /// Columns (k).
        cols: usize,
    },
    /// `bytes` passed to `QuantMatrix::from_ggml_bytes` has the wrong length.
    #[error("`bytes` has {got} bytes; a {rows}x{cols} {format:?} matrix needs {expected}")]
    WeightBytes {
        /// The weight format.
        format: QuantFormat,
        /// Rows (n).
        rows: usize,
        /// Columns (k).
        cols: usize,
        /// The byte count required.
        expected: usize,
        /// The byte count supplied.
        got: usize,
    },
    /// `x` passed to `matmul` is not `m * k` long.
    #[error("`x` has {got} elements; m x k = {m} x {k} needs {expected}")]
    InputLen {
        /// Activation rows.
        m: usize,
        /// Columns of the matrix (k).
        k: usize,
        /// `m * k`.
        expected: usize,
        /// The length supplied.
        got: usize,
    },
    /// `out` passed to `matmul` is not `m * n` long.
    #[error("`out` has {got} elements; m x n = {m} x {n} needs {expected}")]
    OutputLen {
        /// Activation rows.
        m: usize,
        /// Rows of the matrix (n).
        n: usize,
        /// `m * n`.
        expected: usize,
        /// The length supplied.
        got: usize,
    },
    /// `QuantMatrix::stack` was given parts it cannot stack.
    #[error("cannot stack part {part}: {reason}")]
    Stack {
        /// Index of the offending part.
        part: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// The outputs passed to `QuantMatrix::matmul_parts` do not split its columns.
    #[error("output part {part}: {reason}")]
    OutputParts {
        /// Index of the offending output (the number of outputs when their sum is wrong).
        part: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// A forced kernel path is not supported by this CPU.
    #[error("kernel path {path:?} is not available on this CPU")]
    PathUnavailable {
        /// The path that was requested.
        path: KernelPath,
    },
}

/// Result alias for the kernels crate.
pub type Result<T> = std::result::Result<T, KernelError>;
