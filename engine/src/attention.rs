//! Attention over contiguous per-sequence keys and values with candle ops: the reference path.
//!
//! Shapes and op order deliberately mirror llama.cpp / candle-transformers (kv heads repeated,
//! one batched matmul per head, additive causal mask): SmolLM2's activations are quantized to
//! 8 bits before every projection, so a one-ulp difference here is amplified into visibly
//! different logits thirty layers later. Parity tests against candle-transformers run through
//! this path; the paged store uses the block-wise kernel in `ponder-kernels` instead.

use candle_core::{Device, Tensor};

use super::error::Result;

/// Heads and head size of a layer's attention.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttentionShape {
    /// Query heads.
    pub num_heads: usize,
    /// Key/value heads.
    pub num_kv_heads: usize,
    /// Dimension of one head.
    pub head_dim: usize,
}

impl AttentionShape {
    /// Query heads per kv head.
    pub fn group(&self) -> usize {
        self.num_heads / self.num_kv_heads.max(1)
    }
}

/// Causal attention of `q` `[nh, L, d]` over `k`, `v` `[nkv, T, d]`; the `L` queries sit at
/// positions `start..start+L` and the keys at `0..T`. Returns `[L, nh * d]`.
pub(crate) fn contiguous_attention(
    shape: &AttentionShape,
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    start: usize,
) -> Result<Tensor> {
    let (nh, d) = (shape.num_heads, shape.head_dim);
    let len = q.dim(1)?;
    let total = k.dim(1)?;
    let q = q.unsqueeze(0)?;
    let k = repeat_kv(&k.unsqueeze(0)?, shape.group())?;
    let v = repeat_kv(&v.unsqueeze(0)?, shape.group())?;
    let scores = (q.matmul(&k.t()?)? / (d as f64).sqrt())?;
    let scores = if len > 1 {
        scores.broadcast_add(&causal_mask(len, start, total, q.device())?)?
    } else {
        scores
    };
    let probs = candle_nn::ops::softmax_last_dim(&scores)?;
    let y = probs.matmul(&v.contiguous()?)?; // [1, nh, len, d]
    Ok(y.transpose(1, 2)?.reshape((len, nh * d))?)
}

/// `[b, nkv, T, d]` → `[b, nkv * group, T, d]`, head `h` reading kv head `h / group`.
fn repeat_kv(x: &Tensor, group: usize) -> Result<Tensor> {
    if group == 1 {
        return Ok(x.clone());
    }
    let (b, nkv, t, d) = x.dims4()?;
    Ok(Tensor::cat(&vec![x; group], 2)?.reshape((b, nkv * group, t, d))?)
}

/// Additive mask `[len, total]`: query `i` (position `start + i`) sees keys `0..=start + i`.
fn causal_mask(len: usize, start: usize, total: usize, device: &Device) -> Result<Tensor> {
    let mask: Vec<f32> = (0..len)
        .flat_map(|i| {
            (0..total).map(move |j| {
                if j > start + i {
                    f32::NEG_INFINITY
                } else {
                    0.0
                }
            })
        })
        .collect();
    Ok(Tensor::from_vec(mask, (len, total), device)?)
}
