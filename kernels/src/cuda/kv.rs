//! Launchers for the KV cache writes in `cuda/kv_cache.cu`: appending tokens' keys and values
//! into their slots and copying blocks for copy-on-write forks, with the CPU's `kv::append` /
//! `kv::copy_blocks` checks run first (same errors), for f32, f16 and bf16 caches.
#![allow(unsafe_code)]

use cudarc::driver::{CudaSlice, LaunchConfig, PushKernelArg};

use super::attention::{upload, KvGeom};
use super::device::{CudaKernels, Module};
use super::error::{grid_yz, u32_arg, CudaError};
use crate::kv::{validate_append, validate_copies, KvDtype, KvElem, KvLayout};

/// Threads per CTA of the KV kernels.
const THREADS: u32 = 256;
/// CTAs per copied block (each copies a strided share).
const COPY_CHUNKS: usize = 8;

impl CudaKernels {
    /// Writes token `t` of `k_new` / `v_new` (`[tokens, num_kv_heads, head_dim]`, f32) into slot
    /// `slots[t]` of the caches, narrowing to `T` by round-to-nearest-even.
    pub fn kv_append<T: KvElem>(
        &self,
        layout: &KvLayout,
        k_cache: &mut CudaSlice<T>,
        v_cache: &mut CudaSlice<T>,
        k_new: &CudaSlice<f32>,
        v_new: &CudaSlice<f32>,
        slots: &[u32],
    ) -> Result<(), CudaError> {
        validate_append(
            layout,
            (k_cache.len(), v_cache.len()),
            (k_new.len(), v_new.len()),
            slots,
        )?;
        if slots.is_empty() {
            return Ok(());
        }
        let geom = geom(layout, k_cache.len())?;
        let total = k_new.len();
        let blocks = total.div_ceil(THREADS as usize).min(65_535 * 16);
        let cfg = LaunchConfig {
            grid_dim: (u32_arg("tokens", blocks)?, 1, 1),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let f = self.function(Module::KvCache, &append_kernel(T::DTYPE))?;
        let slots_d = upload(self, slots)?;
        let tokens = u32_arg("slots", slots.len())?;
        let mut b = self.stream().launch_builder(&f);
        b.arg(k_new).arg(v_new).arg(&slots_d).arg(&tokens);
        b.arg(k_cache).arg(v_cache).arg(&geom);
        // SAFETY: the arguments match `kv_append_*` in kv_cache.cu; `validate_append` checked
        // the cache and input lengths and that every slot is in range and distinct, so each
        // thread reads inside `k_new`/`v_new` and writes one element inside the caches.
        unsafe { b.launch(cfg) }?;
        Ok(())
    }

    /// For each `(src, dst)`, makes block `dst` of both caches a copy of block `src`.
    pub fn kv_copy_blocks<T: KvElem>(
        &self,
        layout: &KvLayout,
        k_cache: &mut CudaSlice<T>,
        v_cache: &mut CudaSlice<T>,
        pairs: &[(u32, u32)],
    ) -> Result<(), CudaError> {
        let num_blocks = layout.num_blocks(k_cache.len(), v_cache.len())?;
        validate_copies(num_blocks, pairs)?;
        if pairs.is_empty() {
            return Ok(());
        }
        let geom = geom(layout, k_cache.len())?;
        let (src, dst): (Vec<u32>, Vec<u32>) = pairs.iter().copied().unzip();
        let (src, dst) = (upload(self, &src)?, upload(self, &dst)?);
        let cfg = LaunchConfig {
            grid_dim: (
                u32_arg("pairs", pairs.len())?,
                grid_yz("copy chunks", COPY_CHUNKS)?,
                1,
            ),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let f = self.function(Module::KvCache, &copy_kernel(T::DTYPE))?;
        let mut b = self.stream().launch_builder(&f);
        b.arg(&src).arg(&dst).arg(k_cache).arg(v_cache).arg(&geom);
        // SAFETY: the arguments match `kv_copy_blocks_*` in kv_cache.cu; `validate_copies`
        // checked every id against the caches' block count and that no block is both written
        // and read, so the CTAs touch disjoint destination blocks inside the caches.
        unsafe { b.launch(cfg) }?;
        Ok(())
    }
}

/// `kv_append_<dtype>`.
pub(crate) fn append_kernel(dtype: KvDtype) -> String {
    format!("kv_append_{}", dtype.name())
}

/// `kv_copy_blocks_<dtype>`.
pub(crate) fn copy_kernel(dtype: KvDtype) -> String {
    format!("kv_copy_blocks_{}", dtype.name())
}

/// The kernels' geometry for a cache of `cache_len` elements (already validated).
fn geom(layout: &KvLayout, cache_len: usize) -> Result<KvGeom, CudaError> {
    let (_, block_len) = layout.sizes()?;
    Ok(KvGeom {
        num_blocks: u32_arg("cache blocks", cache_len / block_len)?,
        block_size: u32_arg("layout.block_size", layout.block_size)?,
        num_kv_heads: u32_arg("layout.num_kv_heads", layout.num_kv_heads)?,
        head_dim: u32_arg("layout.head_dim", layout.head_dim)?,
    })
}
