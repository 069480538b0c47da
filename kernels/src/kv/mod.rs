//! KV cache writes on the CPU, the reference for `cuda/kv_cache.cu`: appending new tokens'
//! keys and values into their slots (vLLM's `reshape_and_cache`) and copying whole blocks for
//! copy-on-write forks, for caches of f32, f16 or bf16 ([`KvElem`]).
//!
//! Layout (as `attention::PagedKv`): a cache is `[num_blocks, block_size, num_kv_heads,
//! head_dim]`; slot `s` is block `s / block_size`, offset `s % block_size`. New keys and values
//! arrive as f32 `[tokens, num_kv_heads, head_dim]` and are narrowed by round-to-nearest-even,
//! as the GPU's `__float2half_rn` / `__float2bfloat16_rn` do, so CPU and GPU caches hold the
//! same bits (for non-NaN inputs).
//!
//! Invariants: everything is validated before the first write (`validate_append`,
//! `validate_copies`, shared with the CUDA launchers): slots and block ids in range, no slot
//! written twice, no block both written and read by a copy. The result is therefore the same
//! whatever order the writes run in, on any device.

mod error;

pub use error::KvError;

use half::{bf16, f16};

/// The element type of a KV cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KvDtype {
    /// 32-bit float.
    F32,
    /// IEEE half precision.
    F16,
    /// bfloat16.
    Bf16,
}

impl KvDtype {
    /// The suffix of this type's CUDA kernel names (`f32`, `f16`, `bf16`).
    pub fn name(self) -> &'static str {
        match self {
            KvDtype::F32 => "f32",
            KvDtype::F16 => "f16",
            KvDtype::Bf16 => "bf16",
        }
    }
}

/// An element type a KV cache can hold: widened to f32 exactly, narrowed to nearest even.
pub trait KvElem: Copy + Send + Sync + std::fmt::Debug + 'static {
    /// The matching [`KvDtype`].
    const DTYPE: KvDtype;
    /// Narrows an f32 (round to nearest, ties to even).
    fn from_f32(x: f32) -> Self;
    /// Widens to f32 (exact).
    fn to_f32(self) -> f32;
}

impl KvElem for f32 {
    const DTYPE: KvDtype = KvDtype::F32;
    fn from_f32(x: f32) -> Self {
        x
    }
    fn to_f32(self) -> f32 {
        self
    }
}

impl KvElem for f16 {
    const DTYPE: KvDtype = KvDtype::F16;
    fn from_f32(x: f32) -> Self {
        f16::from_f32(x)
    }
    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }
}

impl KvElem for bf16 {
    const DTYPE: KvDtype = KvDtype::Bf16;
    fn from_f32(x: f32) -> Self {
        bf16::from_f32(x)
    }
    fn to_f32(self) -> f32 {
        bf16::to_f32(self)
    }
}

/// The geometry of one layer's KV cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvLayout {
    /// Token slots per block.
    pub block_size: usize,
    /// Key/value heads.
    pub num_kv_heads: usize,
    /// Elements per head vector.
    pub head_dim: usize,
}

impl KvLayout {
    /// Elements per token slot (`num_kv_heads * head_dim`) and per block, checked non-zero.
    pub(crate) fn sizes(&self) -> Result<(usize, usize), KvError> {
        for (arg, v) in [
            ("layout.block_size", self.block_size),
            ("layout.num_kv_heads", self.num_kv_heads),
            ("layout.head_dim", self.head_dim),
        ] {
            if v == 0 {
                return Err(KvError::ZeroDim { arg });
            }
        }
        let overflow = |arg| KvError::Overflow { arg };
        let stride = self
            .num_kv_heads
            .checked_mul(self.head_dim)
            .ok_or(overflow("layout.num_kv_heads"))?;
        let block = stride
            .checked_mul(self.block_size)
            .ok_or(overflow("layout.block_size"))?;
        Ok((stride, block))
    }

    /// Blocks in caches of `k_len` and `v_len` elements, checked whole and equal.
    pub(crate) fn num_blocks(&self, k_len: usize, v_len: usize) -> Result<usize, KvError> {
        let (_, block_len) = self.sizes()?;
        for (arg, got) in [("k_cache", k_len), ("v_cache", v_len)] {
            if !got.is_multiple_of(block_len) {
                return Err(KvError::CacheLen {
                    arg,
                    got,
                    block_len,
                });
            }
        }
        if k_len != v_len {
            return Err(KvError::CacheMismatch { k: k_len, v: v_len });
        }
        Ok(k_len / block_len)
    }
}

/// Checks an append of `slots.len()` tokens into caches of `cache_len` elements each.
pub(crate) fn validate_append(
    layout: &KvLayout,
    (k_cache, v_cache): (usize, usize),
    (k_new, v_new): (usize, usize),
    slots: &[u32],
) -> Result<(), KvError> {
    let num_blocks = layout.num_blocks(k_cache, v_cache)?;
    let (stride, _) = layout.sizes()?;
    let expected = slots
        .len()
        .checked_mul(stride)
        .ok_or(KvError::Overflow { arg: "slots" })?;
    for (arg, got) in [("k_new", k_new), ("v_new", v_new)] {
        if got != expected {
            return Err(KvError::NewLen {
                arg,
                got,
                tokens: slots.len(),
                expected,
            });
        }
    }
    let num_slots = num_blocks * layout.block_size;
    let mut seen = std::collections::HashSet::with_capacity(slots.len());
    for (index, &slot) in slots.iter().enumerate() {
        if slot as usize >= num_slots {
            return Err(KvError::SlotOutOfRange {
                index,
                slot,
                num_slots,
            });
        }
        if !seen.insert(slot) {
            return Err(KvError::DuplicateSlot { index, slot });
        }
    }
    Ok(())
}

/// Checks block copies `(src, dst)` in caches of `num_blocks` blocks.
pub(crate) fn validate_copies(num_blocks: usize, pairs: &[(u32, u32)]) -> Result<(), KvError> {
    let mut dsts = std::collections::HashSet::with_capacity(pairs.len());
    for (index, &(src, dst)) in pairs.iter().enumerate() {
        for (side, block) in [("src", src), ("dst", dst)] {
            if block as usize >= num_blocks {
                return Err(KvError::BlockOutOfRange {
                    index,
                    side,
                    block,
                    num_blocks,
                });
            }
        }
        if !dsts.insert(dst) {
            return Err(KvError::DuplicateDestination { index, block: dst });
        }
    }
    let srcs: std::collections::HashSet<u32> = pairs.iter().map(|&(src, _)| src).collect();
    if let Some((index, &(_, block))) = pairs
        .iter()
        .enumerate()
        .find(|(_, (_, dst))| srcs.contains(dst))
    {
        return Err(KvError::DestinationIsSource { index, block });
    }
    Ok(())
}

/// Writes token `t`'s keys and values (`k_new`, `v_new`: `[tokens, num_kv_heads, head_dim]`)
/// into slot `slots[t]` of `k_cache` / `v_cache`.
pub fn append<T: KvElem>(
    layout: &KvLayout,
    k_cache: &mut [T],
    v_cache: &mut [T],
    k_new: &[f32],
    v_new: &[f32],
    slots: &[u32],
) -> Result<(), KvError> {
    validate_append(
        layout,
        (k_cache.len(), v_cache.len()),
        (k_new.len(), v_new.len()),
        slots,
    )?;
    let (stride, _) = layout.sizes()?;
    for (t, &slot) in slots.iter().enumerate() {
        let (from, to) = (t * stride, slot as usize * stride);
        for (dst, &src) in k_cache[to..to + stride]
            .iter_mut()
            .zip(&k_new[from..from + stride])
        {
            *dst = T::from_f32(src);
        }
        for (dst, &src) in v_cache[to..to + stride]
            .iter_mut()
            .zip(&v_new[from..from + stride])
        {
            *dst = T::from_f32(src);
        }
    }
    Ok(())
}

/// For each `(src, dst)`, makes block `dst` of both caches a copy of block `src` (a
/// copy-on-write fork's private copy of a shared block).
pub fn copy_blocks<T: KvElem>(
    layout: &KvLayout,
    k_cache: &mut [T],
    v_cache: &mut [T],
    pairs: &[(u32, u32)],
) -> Result<(), KvError> {
    let num_blocks = layout.num_blocks(k_cache.len(), v_cache.len())?;
    validate_copies(num_blocks, pairs)?;
    let (_, block_len) = layout.sizes()?;
    for &(src, dst) in pairs {
        let (s, d) = (src as usize * block_len, dst as usize * block_len);
        k_cache.copy_within(s..s + block_len, d);
        v_cache.copy_within(s..s + block_len, d);
    }
    Ok(())
}
