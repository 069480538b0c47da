//! Validation of an attention call's arguments into the derived sizes every kernel uses.
//!
//! Owns the one place that checks shapes: after `validate` returns `Ok`, every index the
//! kernels compute (`block * block_len + slot * kv_stride + head * head_dim`, query and output
//! offsets) is in bounds, and every block id in the first `SeqShape::blocks` table entries is
//! below `Shape::num_blocks`. Checks run in argument order (`kv`, `params`, `seqs`, `out`), so
//! the first bad argument is the one reported.

use super::{AttentionError, AttentionParams, PagedKv, SeqQueries};

/// What validation reads of a sequence: `SeqQueries` on the CPU, a row count plus host block
/// table for queries on a GPU (`cuda::SeqSpan`).
pub(crate) trait SeqArgs {
    /// Query elements supplied (`len * row_len` for a sequence of `len` rows).
    fn q_len(&self, row_len: usize) -> usize;
    /// Block ids holding positions `0, block_size, ...`.
    fn block_table(&self) -> &[u32];
    /// Position of the first query row.
    fn start_pos(&self) -> usize;
}

impl SeqArgs for SeqQueries<'_> {
    fn q_len(&self, _row_len: usize) -> usize {
        self.q.len()
    }
    fn block_table(&self) -> &[u32] {
        self.block_table
    }
    fn start_pos(&self) -> usize {
        self.start_pos
    }
}

/// Sizes derived from `PagedKv` and `AttentionParams`, all validated non-zero.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shape {
    /// Tokens per block.
    pub(crate) block_size: usize,
    /// Key/value heads.
    pub(crate) num_kv_heads: usize,
    /// Query heads.
    pub(crate) num_heads: usize,
    /// Elements per head vector.
    pub(crate) head_dim: usize,
    /// Query heads per key/value head (`num_heads / num_kv_heads`).
    pub(crate) group: usize,
    /// Elements in one query/output row (`num_heads * head_dim`).
    pub(crate) row_len: usize,
    /// Elements between consecutive token slots of a block (`num_kv_heads * head_dim`).
    pub(crate) kv_stride: usize,
    /// Elements in one block (`block_size * kv_stride`).
    pub(crate) block_len: usize,
    /// Blocks held by `kv.k` (and `kv.v`).
    pub(crate) num_blocks: usize,
    /// Score scale, usually `1 / sqrt(head_dim)`.
    pub(crate) scale: f32,
}

/// One sequence's validated extent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SeqShape {
    /// Query rows in this call.
    pub(crate) len: usize,
    /// Position of the first query row.
    pub(crate) start: usize,
    /// Index of the sequence's first row in `out` (rows of earlier sequences before it).
    pub(crate) row_offset: usize,
    /// Blocks holding positions `0..start + len` (`ceil((start + len) / block_size)`).
    pub(crate) blocks: usize,
}

impl SeqShape {
    /// Position of query row `i` (which attends to keys `0..=pos`).
    pub(crate) fn pos(&self, i: usize) -> usize {
        self.start + i
    }
}

/// The cache geometry an attention call is checked against: `PagedKv`'s fields, with the
/// lengths of `k` and `v` only (so a cache on a GPU is checked by the same code).
#[derive(Debug, Clone, Copy)]
pub(crate) struct KvDims {
    /// Elements in the key cache.
    pub(crate) k_len: usize,
    /// Elements in the value cache.
    pub(crate) v_len: usize,
    /// Tokens per block.
    pub(crate) block_size: usize,
    /// Key/value heads.
    pub(crate) num_kv_heads: usize,
    /// Elements per head vector.
    pub(crate) head_dim: usize,
}

impl KvDims {
    /// The geometry of a CPU cache.
    pub(crate) fn of(kv: &PagedKv<'_>) -> Self {
        KvDims {
            k_len: kv.k.len(),
            v_len: kv.v.len(),
            block_size: kv.block_size,
            num_kv_heads: kv.num_kv_heads,
            head_dim: kv.head_dim,
        }
    }
}

/// Checks every argument of an attention call; returns the derived sizes.
pub(crate) fn validate(
    kv: &PagedKv<'_>,
    seqs: &[SeqQueries<'_>],
    params: &AttentionParams,
    out_len: usize,
) -> Result<(Shape, Vec<SeqShape>), AttentionError> {
    validate_dims_of(KvDims::of(kv), seqs, params, out_len)
}

/// `validate` for a cache given by its geometry alone.
pub(crate) fn validate_dims_of<S: SeqArgs>(
    kv: KvDims,
    seqs: &[S],
    params: &AttentionParams,
    out_len: usize,
) -> Result<(Shape, Vec<SeqShape>), AttentionError> {
    let shape = validate_dims(&kv, params)?;
    let mut shapes = Vec::with_capacity(seqs.len());
    let mut rows = 0usize;
    for (seq, s) in seqs.iter().enumerate() {
        let q_len = s.q_len(shape.row_len);
        if !q_len.is_multiple_of(shape.row_len) {
            return Err(AttentionError::QueryLen {
                seq,
                got: q_len,
                row_len: shape.row_len,
            });
        }
        let len = q_len / shape.row_len;
        let end = s
            .start_pos()
            .checked_add(len)
            .ok_or(AttentionError::Overflow {
                arg: "seqs[].start_pos",
            })?;
        let needed = end.div_ceil(shape.block_size);
        if s.block_table().len() < needed {
            return Err(AttentionError::BlockTableTooShort {
                seq,
                got: s.block_table().len(),
                needed,
                end,
            });
        }
        for (index, &block) in s.block_table()[..needed].iter().enumerate() {
            if block as usize >= shape.num_blocks {
                return Err(AttentionError::BlockOutOfRange {
                    seq,
                    index,
                    block,
                    num_blocks: shape.num_blocks,
                });
            }
        }
        shapes.push(SeqShape {
            len,
            start: s.start_pos(),
            row_offset: rows,
            blocks: needed,
        });
        rows += len;
    }
    let expected = rows
        .checked_mul(shape.row_len)
        .ok_or(AttentionError::Overflow { arg: "out" })?;
    if out_len != expected {
        return Err(AttentionError::OutputLen {
            rows,
            expected,
            got: out_len,
        });
    }
    Ok((shape, shapes))
}

/// Checks the cache geometry and head counts.
fn validate_dims(kv: &KvDims, params: &AttentionParams) -> Result<Shape, AttentionError> {
    for (arg, value) in [
        ("kv.block_size", kv.block_size),
        ("kv.num_kv_heads", kv.num_kv_heads),
        ("kv.head_dim", kv.head_dim),
        ("params.num_heads", params.num_heads),
    ] {
        if value == 0 {
            return Err(AttentionError::ZeroDim { arg });
        }
    }
    let overflow = |arg| AttentionError::Overflow { arg };
    let kv_stride = kv
        .num_kv_heads
        .checked_mul(kv.head_dim)
        .ok_or(overflow("kv.num_kv_heads"))?;
    let block_len = kv
        .block_size
        .checked_mul(kv_stride)
        .ok_or(overflow("kv.block_size"))?;
    for (arg, got) in [("kv.k", kv.k_len), ("kv.v", kv.v_len)] {
        if !got.is_multiple_of(block_len) {
            return Err(AttentionError::KvLen {
                arg,
                got,
                block_len,
            });
        }
    }
    if kv.k_len != kv.v_len {
        return Err(AttentionError::KvMismatch {
            k: kv.k_len,
            v: kv.v_len,
        });
    }
    if !params.num_heads.is_multiple_of(kv.num_kv_heads) {
        return Err(AttentionError::HeadsNotMultiple {
            num_heads: params.num_heads,
            num_kv_heads: kv.num_kv_heads,
        });
    }
    let row_len = params
        .num_heads
        .checked_mul(kv.head_dim)
        .ok_or(overflow("params.num_heads"))?;
    Ok(Shape {
        block_size: kv.block_size,
        num_kv_heads: kv.num_kv_heads,
        num_heads: params.num_heads,
        head_dim: kv.head_dim,
        group: params.num_heads / kv.num_kv_heads,
        row_len,
        kv_stride,
        block_len,
        num_blocks: kv.k_len / block_len,
        scale: params.scale,
    })
}
