//! The slow reference for `paged_attention`: gathers each sequence's keys and values into
//! contiguous `[tokens, num_kv_heads, head_dim]` buffers through its block table, then does a
//! plain two-pass softmax per query row and head, accumulating in f64.
//!
//! It shares only argument validation with the fast path (no blocking, no merge, no `block`
//! helpers, std's `exp`), so agreement between the two checks the paging, the causal masks,
//! the GQA head mapping and the log-sum-exp merge independently.

use super::shape::validate;
use super::{AttentionError, AttentionParams, PagedKv, SeqQueries};

/// Reference attention with the same arguments and output layout as `paged_attention`.
pub fn attention_reference(
    kv: &PagedKv<'_>,
    seqs: &[SeqQueries<'_>],
    params: &AttentionParams,
    out: &mut [f32],
) -> Result<(), AttentionError> {
    let (shape, shapes) = validate(kv, seqs, params, out.len())?;
    let (hd, stride, bs) = (shape.head_dim, shape.kv_stride, shape.block_size);
    for (seq, sh) in seqs.iter().zip(&shapes) {
        let tokens = sh.start + sh.len;
        let (mut keys, mut values) = (
            Vec::with_capacity(tokens * stride),
            Vec::with_capacity(tokens * stride),
        );
        for p in 0..tokens {
            let at = seq.block_table[p / bs] as usize * shape.block_len + (p % bs) * stride;
            keys.extend_from_slice(&kv.k[at..at + stride]);
            values.extend_from_slice(&kv.v[at..at + stride]);
        }
        for i in 0..sh.len {
            let visible = sh.pos(i) + 1;
            for h in 0..shape.num_heads {
                let kvh = h / shape.group;
                let q = &seq.q[i * shape.row_len + h * hd..][..hd];
                let scores: Vec<f64> = (0..visible)
                    .map(|t| {
                        let k = &keys[t * stride + kvh * hd..][..hd];
                        let d: f64 = q.iter().zip(k).map(|(&a, &b)| a as f64 * b as f64).sum();
                        shape.scale as f64 * d
                    })
                    .collect();
                let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
                let total: f64 = weights.iter().sum();
                let o = &mut out[(sh.row_offset + i) * shape.row_len + h * hd..][..hd];
                for (d, o) in o.iter_mut().enumerate() {
                    let acc: f64 = weights
                        .iter()
                        .enumerate()
                        .map(|(t, w)| w * values[t * stride + kvh * hd + d] as f64)
                        .sum();
                    *o = (acc / total) as f32;
                }
            }
        }
    }
    Ok(())
}
