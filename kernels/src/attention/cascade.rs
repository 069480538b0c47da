//! Shared-prefix (cascade) attention on the CPU, written as the CUDA kernels compute it: the
//! reference for `cuda/cascade_attention.cu` + `cuda/paged_attention.cu` (Juravsky et al.
//! 2024, "Hydragen"; FlashInfer's cascade attention).
//!
//! A [`PrefixGroup`] names sequences whose block tables begin with the same blocks, holding the
//! same first `prefix_len` tokens. For each group, every key of the prefix is loaded once and
//! folded into the softmax state of every query row (and head) of every member: the
//! matrix-matrix form. Then each row folds its own keys `prefix_len..=pos` (all of `0..=pos`
//! for a row outside every group) into a second state, and the two are merged by
//! [`SoftmaxState::merge`]. Keys are folded in splits of [`SPLIT_TOKENS`] positions fixed by
//! position (split `j` is `[j * S, (j + 1) * S)`), each split's state merged in order, as the
//! GPU's flash-decoding splits are.
//!
//! Invariants checked before anything is computed (`validate_groups`): members exist and
//! belong to one group at most; `prefix_len >= 1`; every member's first query row sees the
//! whole prefix (`prefix_len <= start_pos + 1`); every member with query rows has the same
//! block ids in the `ceil(prefix_len / block_size)` table entries covering the prefix.

use super::lse::SoftmaxState;
use super::shape::{validate, SeqArgs, SeqShape, Shape};
use super::{AttentionError, AttentionParams, PagedKv, SeqQueries};

/// Positions per flash-decoding split, on the CPU reference and the GPU alike.
pub const SPLIT_TOKENS: usize = 256;

/// Sequences (indices into `seqs`) whose first `prefix_len` tokens live in the same blocks.
#[derive(Debug, Clone, Copy)]
pub struct PrefixGroup<'a> {
    /// Member sequences.
    pub members: &'a [usize],
    /// Tokens of the shared prefix (at least 1; at most any member's `start_pos + 1`).
    pub prefix_len: usize,
}

/// A validated group: the members with query rows, and the one whose table names the prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ValidGroup {
    /// Members with at least one query row, in the order given.
    pub(crate) members: Vec<usize>,
    /// Tokens of the shared prefix.
    pub(crate) prefix_len: usize,
}

/// Checks `groups` against the validated sequences (module invariants). Returns the groups
/// that have query rows, and for each sequence the prefix length its own keys start after
/// (0 outside every group).
pub(crate) fn validate_groups(
    seqs: &[impl SeqArgs],
    shapes: &[SeqShape],
    groups: &[PrefixGroup<'_>],
    block_size: usize,
) -> Result<(Vec<ValidGroup>, Vec<usize>), AttentionError> {
    let mut begin = vec![0usize; seqs.len()];
    let mut seen = vec![false; seqs.len()];
    let mut valid = Vec::new();
    for (g, group) in groups.iter().enumerate() {
        if group.members.is_empty() {
            return Err(AttentionError::EmptyGroup { group: g });
        }
        if group.prefix_len == 0 {
            return Err(AttentionError::EmptyPrefix { group: g });
        }
        let prefix_blocks = group.prefix_len.div_ceil(block_size);
        let mut lead: Option<&[u32]> = None;
        let mut members = Vec::new();
        for &s in group.members {
            if s >= seqs.len() {
                return Err(AttentionError::GroupMemberOutOfRange {
                    group: g,
                    member: s,
                    seqs: seqs.len(),
                });
            }
            if std::mem::replace(&mut seen[s], true) {
                return Err(AttentionError::DuplicateMember { group: g, seq: s });
            }
            if group.prefix_len > shapes[s].start + 1 {
                return Err(AttentionError::PrefixNotVisible {
                    group: g,
                    seq: s,
                    prefix_len: group.prefix_len,
                    start_pos: shapes[s].start,
                });
            }
            if shapes[s].len == 0 {
                continue;
            }
            // Validated: a member with rows has `blocks >= ceil((start + 1) / bs) >= prefix_blocks`.
            let table = &seqs[s].block_table()[..prefix_blocks];
            match lead {
                None => lead = Some(table),
                Some(lead) => {
                    if let Some(index) = (0..prefix_blocks).find(|&i| lead[i] != table[i]) {
                        return Err(AttentionError::PrefixMismatch {
                            group: g,
                            seq: s,
                            index,
                        });
                    }
                }
            }
            begin[s] = group.prefix_len;
            members.push(s);
        }
        if !members.is_empty() {
            valid.push(ValidGroup {
                members,
                prefix_len: group.prefix_len,
            });
        }
    }
    Ok((valid, begin))
}

/// Attention with the prefix of each group computed once for all its members; same arguments,
/// output layout and errors as `paged_attention`, plus the group checks (module docs).
/// Sequences in no group attend to all their keys on their own.
pub fn cascade_attention(
    kv: &PagedKv<'_>,
    seqs: &[SeqQueries<'_>],
    groups: &[PrefixGroup<'_>],
    params: &AttentionParams,
    out: &mut [f32],
) -> Result<(), AttentionError> {
    let (shape, shapes) = validate(kv, seqs, params, out.len())?;
    let (valid, begin) = validate_groups(seqs, &shapes, groups, shape.block_size)?;
    let total_rows: usize = shapes.iter().map(|s| s.len).sum();
    let mut prefix: Vec<Option<Vec<SoftmaxState>>> = vec![None; total_rows];
    for group in &valid {
        prefix_states(kv, seqs, &shapes, &shape, group, &mut prefix)?;
    }
    let hd = shape.head_dim;
    for (s, (seq, sh)) in seqs.iter().zip(&shapes).enumerate() {
        for i in 0..sh.len {
            let row = sh.row_offset + i;
            let q_row = &seq.q[i * shape.row_len..][..shape.row_len];
            for h in 0..shape.num_heads {
                let mut state = match &prefix[row] {
                    Some(states) => states[h].clone(),
                    None => SoftmaxState::empty(hd),
                };
                let q = &q_row[h * hd..][..hd];
                let (lo, end) = (begin[s], sh.pos(i) + 1);
                for split in lo / SPLIT_TOKENS..end.div_ceil(SPLIT_TOKENS) {
                    let from = lo.max(split * SPLIT_TOKENS);
                    let to = end.min((split + 1) * SPLIT_TOKENS);
                    let mut part = SoftmaxState::empty(hd);
                    for t in from..to {
                        let (k, v) = key_value(kv, &shape, seq.block_table, t, h / shape.group);
                        part.push(shape.scale * dot(q, k), v)?;
                    }
                    state.merge(&part)?;
                }
                state.write_output(&mut out[row * shape.row_len + h * hd..][..hd])?;
            }
        }
    }
    Ok(())
}

/// The prefix state of every (member row, head) of `group`, each prefix key loaded once and
/// swept by all of them; stored at the rows' global indices.
fn prefix_states(
    kv: &PagedKv<'_>,
    seqs: &[SeqQueries<'_>],
    shapes: &[SeqShape],
    shape: &Shape,
    group: &ValidGroup,
    prefix: &mut [Option<Vec<SoftmaxState>>],
) -> Result<(), AttentionError> {
    let hd = shape.head_dim;
    let Some(&lead) = group.members.first() else {
        return Ok(());
    };
    let table = seqs[lead].block_table;
    // (global row, query rows of its heads) for every member row.
    let rows: Vec<(usize, &[f32])> = group
        .members
        .iter()
        .flat_map(|&s| {
            let sh = &shapes[s];
            (0..sh.len).map(move |i| {
                (
                    sh.row_offset + i,
                    &seqs[s].q[i * shape.row_len..][..shape.row_len],
                )
            })
        })
        .collect();
    let mut totals = vec![SoftmaxState::empty(hd); rows.len() * shape.num_heads];
    for split in 0..group.prefix_len.div_ceil(SPLIT_TOKENS) {
        let mut parts = vec![SoftmaxState::empty(hd); totals.len()];
        let to = group.prefix_len.min((split + 1) * SPLIT_TOKENS);
        for t in split * SPLIT_TOKENS..to {
            for kvh in 0..shape.num_kv_heads {
                let (k, v) = key_value(kv, shape, table, t, kvh);
                for (r, (_, q_row)) in rows.iter().enumerate() {
                    for h in kvh * shape.group..(kvh + 1) * shape.group {
                        let score = shape.scale * dot(&q_row[h * hd..][..hd], k);
                        parts[r * shape.num_heads + h].push(score, v)?;
                    }
                }
            }
        }
        for (total, part) in totals.iter_mut().zip(&parts) {
            total.merge(part)?;
        }
    }
    for ((row, _), states) in rows.iter().zip(totals.chunks(shape.num_heads)) {
        prefix[*row] = Some(states.to_vec());
    }
    Ok(())
}

/// Key and value of position `t`, KV head `kvh`, through `table` (validated in range).
fn key_value<'a>(
    kv: &PagedKv<'a>,
    shape: &Shape,
    table: &[u32],
    t: usize,
    kvh: usize,
) -> (&'a [f32], &'a [f32]) {
    let bs = shape.block_size;
    let at = table[t / bs] as usize * shape.block_len
        + (t % bs) * shape.kv_stride
        + kvh * shape.head_dim;
    (
        &kv.k[at..at + shape.head_dim],
        &kv.v[at..at + shape.head_dim],
    )
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}
