// Shared device helpers for Ponder's kernels: KV element conversion, warp reductions and the
// softmax-state (log-sum-exp) merge that flash-decoding and cascade attention rely on.
//
// Invariants:
// - KV elements are f32, f16 or bf16; they are widened to f32 exactly (`to_f32`) and every
//   accumulation is in f32. Narrowing (`from_f32`) rounds to nearest even, as the `half`
//   crate does on the CPU, so CPU and GPU caches hold the same bits.
// - A softmax state is (m, l, acc): running max, sum of e^(s - m), sum of e^(s - m) v. The
//   empty state is (-inf, 0, 0) and is an exact identity of `merge_weights`: merging it into
//   any state, or any state into it, changes no bit. The CPU twin is
//   `ponder_kernels::attention::SoftmaxState` (src/attention/lse.rs).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

namespace ponder {

constexpr int WARP = 32;
constexpr unsigned FULL_MASK = 0xffffffffu;

__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T> __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_f32<__half>(float x) {
  return __float2half_rn(x);
}
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int o = WARP / 2; o > 0; o >>= 1) x += __shfl_xor_sync(FULL_MASK, x, o);
  return x;
}

__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
  for (int o = WARP / 2; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(FULL_MASK, x, o));
  return x;
}

// Weights (a, b) that merge state (m1, ...) with state (m2, ...) into max `m`:
// `l = l1 a + l2 b`, `acc = acc1 a + acc2 b`. An empty side (max -inf) gets weight 0, so the
// empty state is an identity and two empty states stay empty (no `-inf - -inf` NaN).
struct MergeWeights {
  float m;
  float a;
  float b;
};

__device__ __forceinline__ MergeWeights merge_weights(float m1, float m2) {
  MergeWeights w;
  w.m = fmaxf(m1, m2);
  w.a = (m1 == -INFINITY) ? 0.0f : expf(m1 - w.m);
  w.b = (m2 == -INFINITY) ? 0.0f : expf(m2 - w.m);
  return w;
}

// Key/value cache geometry, as in `PagedKv`: `[num_blocks, block_size, num_kv_heads, head_dim]`.
struct KvGeom {
  uint32_t num_blocks;
  uint32_t block_size;
  uint32_t num_kv_heads;
  uint32_t head_dim;
};

// Element offset of (position `pos`, kv head `kvh`, dim 0) through a block table, or -1 when
// the table names a block out of range (the host validates tables first; this is the
// device's own guard, so a bad table can only give NaN, never a wild read).
__device__ __forceinline__ int64_t kv_offset(const uint32_t* table, uint32_t pos, uint32_t kvh,
                                             const KvGeom& g) {
  uint32_t block = table[pos / g.block_size];
  if (block >= g.num_blocks) return -1;
  uint64_t slot = (uint64_t)block * g.block_size + pos % g.block_size;
  return (int64_t)((slot * g.num_kv_heads + kvh) * g.head_dim);
}

// `N` consecutive KV elements at `p` widened to f32, loaded as 16-, 8-, 4- or 2-byte vectors.
// `p` must be aligned to `N * sizeof(T)` bytes (up to 16): the launchers pick the vector
// paths only when `head_dim % N == 0`, so every head vector, and each lane's `N`-element
// slice of it, starts on such a boundary (device allocations are 256-byte aligned).
template <typename T, int N>
__device__ __forceinline__ void load_vec(const T* __restrict__ p, float* out) {
  constexpr int BYTES = N * (int)sizeof(T);
  if constexpr (BYTES >= 16) {
    constexpr int PER = 16 / (int)sizeof(T);
#pragma unroll
    for (int c = 0; c < BYTES / 16; ++c) {
      const uint4 raw = reinterpret_cast<const uint4*>(p)[c];
      const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
      for (int i = 0; i < PER; ++i) out[c * PER + i] = to_f32(e[i]);
    }
  } else if constexpr (BYTES == 8) {
    const uint2 raw = *reinterpret_cast<const uint2*>(p);
    const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int i = 0; i < N; ++i) out[i] = to_f32(e[i]);
  } else if constexpr (BYTES == 4) {
    const uint32_t raw = *reinterpret_cast<const uint32_t*>(p);
    const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int i = 0; i < N; ++i) out[i] = to_f32(e[i]);
  } else {
    out[0] = to_f32(p[0]);
  }
}

// Per-row metadata of an attention plan (`cuda/plan.rs`, `RowMeta`): the row's block table at
// `tables + table`, its own keys `[begin, end)` (after its group's prefix; `end = pos + 1`),
// and `pre`, the number of prefix-state slots the cascade kernel wrote for it (0 outside
// every group).
struct RowMeta {
  uint32_t table;
  uint32_t begin;
  uint32_t end;
  uint32_t pre;
};

}  // namespace ponder
