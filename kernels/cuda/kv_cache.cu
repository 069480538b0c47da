// KV cache writes: appending new tokens' keys and values into their slots (vLLM's
// `reshape_and_cache`), and whole-block copies for copy-on-write forks.
//
// Layout (as `ponder_kernels::attention::PagedKv`): a cache is `[num_blocks, block_size,
// num_kv_heads, head_dim]` of f32, f16 or bf16; a slot is `block * block_size + offset`.
//
// `kv_append_<dtype>`: new keys/values are f32 `[tokens, num_kv_heads, head_dim]`; token t
// goes to slot `slots[t]`, narrowed to the cache type by round-to-nearest-even. One thread per
// element. The host validates every slot (`< num_blocks * block_size`) and that no slot
// repeats; the device skips an out-of-range slot rather than write outside the cache.
//
// `kv_copy_blocks_<dtype>`: for each pair i, block `dst[i]` of K and of V becomes a copy of
// block `src[i]`. Grid (pairs, chunks); each CTA copies a strided part of one block. The host
// validates ids and that destinations are distinct and never also a source (so the result does
// not depend on the order pairs run in); the device skips an out-of-range id.
//
// CPU reference: `ponder_kernels::kv::{append, copy_blocks}` (bitwise equal: conversions are
// exact or round-to-nearest-even on both sides).
#include "common.cuh"

namespace ponder {

template <typename T>
__device__ void kv_append(const float* __restrict__ k_new, const float* __restrict__ v_new,
                          const uint32_t* __restrict__ slots, uint32_t tokens,
                          T* __restrict__ k_cache, T* __restrict__ v_cache, KvGeom g) {
  const uint64_t stride = (uint64_t)g.num_kv_heads * g.head_dim;
  const uint64_t total = (uint64_t)tokens * stride;
  const uint64_t num_slots = (uint64_t)g.num_blocks * g.block_size;
  for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
       i += (uint64_t)gridDim.x * blockDim.x) {
    const uint64_t t = i / stride;
    const uint64_t slot = slots[t];
    if (slot >= num_slots) continue;
    const uint64_t at = slot * stride + i % stride;
    k_cache[at] = from_f32<T>(k_new[i]);
    v_cache[at] = from_f32<T>(v_new[i]);
  }
}

template <typename T>
__device__ void kv_copy_blocks(const uint32_t* __restrict__ src, const uint32_t* __restrict__ dst,
                               T* __restrict__ k_cache, T* __restrict__ v_cache, KvGeom g) {
  const uint32_t pair = blockIdx.x;
  const uint32_t s = src[pair];
  const uint32_t d = dst[pair];
  if (s >= g.num_blocks || d >= g.num_blocks) return;
  const uint64_t block_len = (uint64_t)g.block_size * g.num_kv_heads * g.head_dim;
  const T* ks = k_cache + s * block_len;
  const T* vs = v_cache + s * block_len;
  T* kd = k_cache + d * block_len;
  T* vd = v_cache + d * block_len;
  for (uint64_t i = (uint64_t)blockIdx.y * blockDim.x + threadIdx.x; i < block_len;
       i += (uint64_t)gridDim.y * blockDim.x) {
    kd[i] = ks[i];
    vd[i] = vs[i];
  }
}

}  // namespace ponder

#define PONDER_KV(DTYPE, T)                                                                   \
  extern "C" __global__ void kv_append_##DTYPE(const float* k_new, const float* v_new,        \
                                                const uint32_t* slots, uint32_t tokens,       \
                                                T* k_cache, T* v_cache, ponder::KvGeom g) {   \
    ponder::kv_append<T>(k_new, v_new, slots, tokens, k_cache, v_cache, g);                   \
  }                                                                                           \
  extern "C" __global__ void kv_copy_blocks_##DTYPE(const uint32_t* src, const uint32_t* dst, \
                                                     T* k_cache, T* v_cache,                  \
                                                     ponder::KvGeom g) {                      \
    ponder::kv_copy_blocks<T>(src, dst, k_cache, v_cache, g);                                 \
  }

PONDER_KV(f32, float)
PONDER_KV(f16, __half)
PONDER_KV(bf16, __nv_bfloat16)
