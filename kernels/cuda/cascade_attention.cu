// Shared-prefix (cascade) attention: the prefix a group of sequences shares is attended once
// for all query rows of the group, as a matrix-matrix product per tile of keys (Juravsky et
// al. 2024, "Hydragen"; FlashInfer's cascade attention), producing one partial softmax state
// per (member row, head, prefix split). Each member's own suffix is then attended by
// `paged_partial_*` (paged_attention.cu) from the prefix's end, which also merges the prefix
// states with the suffix's exactly by log-sum-exp.
//
// Group x has prefix length `group_len[x]` (tokens, all visible to every member row: the host
// checks `prefix_len <= pos + 1`), its prefix block table at `tables + group_table[x]`, and
// member rows `member_rows[group_rows[x] .. group_rows[x + 1]]`.
//
// `cascade_prefix_<dtype>_d<64 c>`: grid (groups, num_kv_heads * pair_chunks, pre_slots), 128
// threads. CTA (x, y, j) takes KV head y / pair_chunks, a chunk of up to CP = 32 (member row,
// query head of that KV head) pairs, and prefix split j: positions `[j * split, min((j + 1) *
// split, prefix_len))` (`split` a multiple of CT, chosen by the plan to fill the GPU). It walks
// the split in tiles of CT = 32 keys, register-tiled like a small GEMM:
//
// - load: the tile's K and V (this KV head) are widened to f32 into shared memory once, 4
//   elements (8 bytes of bf16) per load when head_dim % 4 == 0;
// - scores S[32 pairs][32 keys] = Q K^T: thread (pg = tid / 8, kg = tid % 8) owns pairs
//   {pg, pg + 16} x keys {kg, kg + 8, kg + 16, kg + 24}, reading Q and K as float4 along the
//   head dim: 6 shared loads per 32 FMAs;
// - online softmax per pair over the tile: max and sum across the 8 lanes sharing a pair
//   (shuffles), probabilities to shared memory, the pair's (m, l) and rescale `alpha` updated;
// - acc[32 pairs][head_dim] = alpha acc + P V: thread (pr = tid / 16, dc = tid % 16) owns
//   pairs 4 pr .. 4 pr + 3 x dims {4 dc + 64 c .. + 3 : c < C} in registers (C = 1, 2, 4 for
//   head_dim <= 64, 128, 256): 1 + C float4 loads per 16 C FMAs.
//
// Dynamic shared memory, in floats (`hs` = head_dim rounded up to 4, plus 4 when that is a
// multiple of 8, so rows start 4 (mod 8) words apart and the 8 lanes of a float4 phase hit
// distinct banks; `hv` = 64 C): Q `[CP][hs]`, K `[CT][hs]`, V `[CT][hv]`, P `[CT][CP + 4]`,
// m, l, alpha `[CP]`. Pad columns and absent pairs are zero. The host sizes it
// (`cascade_smem_bytes`) and raises the kernel's dynamic shared memory limit above 48 KiB.
// The state is written unnormalised to `pre_{m,l,acc}[row, head, j]`; a split past the
// group's prefix writes nothing (the merge reads only the row's `pre` slots).
//
// CPU reference: `ponder_kernels::attention::cascade_attention` (same grouping, prefix state
// once per group, suffix per row, LSE merge), checked against `attention_reference`.
#include "common.cuh"

namespace ponder {

constexpr int C_THREADS = 128;
constexpr int CP = 32;  // pairs per CTA
constexpr int CT = 32;  // keys per tile
constexpr int SP_STRIDE = CP + 4;

struct CascadeArgs {
  KvGeom g;
  uint32_t num_heads;
  uint32_t split_tokens;
  uint32_t slots;
  float scale;
  uint32_t max_chunks;
};

__device__ __forceinline__ float dot4(float4 a, float4 b, float s) {
  s = fmaf(a.x, b.x, s);
  s = fmaf(a.y, b.y, s);
  s = fmaf(a.z, b.z, s);
  return fmaf(a.w, b.w, s);
}

// Reduction over the 8 lanes that share `lane / 8` (xor 1, 2, 4 stays inside them).
__device__ __forceinline__ float group8_max(float x) {
#pragma unroll
  for (int o = 1; o < 8; o <<= 1) x = fmaxf(x, __shfl_xor_sync(FULL_MASK, x, o));
  return x;
}

__device__ __forceinline__ float group8_sum(float x) {
#pragma unroll
  for (int o = 1; o < 8; o <<= 1) x += __shfl_xor_sync(FULL_MASK, x, o);
  return x;
}

template <typename T, int C>
__device__ void cascade_prefix(const float* __restrict__ q, const T* __restrict__ k,
                               const T* __restrict__ v, const uint32_t* __restrict__ tables,
                               const uint32_t* __restrict__ group_table,
                               const uint32_t* __restrict__ group_len,
                               const uint32_t* __restrict__ group_rows,
                               const uint32_t* __restrict__ member_rows,
                               float* __restrict__ pre_m, float* __restrict__ pre_l,
                               float* __restrict__ pre_acc, CascadeArgs c) {
  constexpr int HV = 64 * C;
  extern __shared__ float4 smem4[];
  const uint32_t hd = c.g.head_dim;
  const uint32_t hd4 = (hd + 3) & ~3u;
  const uint32_t hs = (hd4 % 8 == 0) ? hd4 + 4 : hd4;
  float* sq = reinterpret_cast<float*>(smem4);  // [CP][hs]
  float* sk = sq + CP * hs;                     // [CT][hs]
  float* sv = sk + CT * hs;                     // [CT][HV]
  float* sp = sv + CT * HV;                     // [CT][SP_STRIDE]
  float* sm = sp + CT * SP_STRIDE;              // [CP]
  float* sl = sm + CP;                          // [CP]
  float* sa = sl + CP;                          // [CP]

  const uint32_t x = blockIdx.x;
  const uint32_t group = c.num_heads / c.g.num_kv_heads;
  const uint32_t n_pairs = (group_rows[x + 1] - group_rows[x]) * group;
  const uint32_t kvh = blockIdx.y / c.max_chunks;
  const uint32_t p0 = (blockIdx.y % c.max_chunks) * CP;
  const uint32_t prefix = group_len[x];
  const uint32_t lo = blockIdx.z * c.split_tokens;
  if (p0 >= n_pairs || lo >= prefix) return;
  const uint32_t np = min((uint32_t)CP, n_pairs - p0);
  const uint32_t hi = min(prefix, lo + c.split_tokens);
  const uint32_t* table = tables + group_table[x];
  const uint32_t* rows = member_rows + group_rows[x];
  const uint32_t tid = threadIdx.x;
  const float nan = __int_as_float(0x7fc00000);

  // Pair p of this CTA: member row rows[(p0 + p) / group], query head kvh * group + (p0 + p) %
  // group. Q rows (zero for absent pairs and pad dims), zero pads of K and V, empty states.
  for (uint32_t idx = tid; idx < CP * hs; idx += C_THREADS) {
    const uint32_t p = idx / hs;
    const uint32_t d = idx % hs;
    float val = 0.0f;
    if (p < np && d < hd) {
      const uint32_t row = rows[(p0 + p) / group];
      const uint32_t head = kvh * group + (p0 + p) % group;
      val = q[((size_t)row * c.num_heads + head) * hd + d];
    }
    sq[idx] = val;
  }
  for (uint32_t idx = tid; idx < CT * hs; idx += C_THREADS) {
    if (idx % hs >= hd) sk[idx] = 0.0f;
  }
  for (uint32_t idx = tid; idx < CT * HV; idx += C_THREADS) {
    if (idx % HV >= hd) sv[idx] = 0.0f;
  }
  if (tid < CP) {
    sm[tid] = -INFINITY;
    sl[tid] = 0.0f;
  }

  const uint32_t pg = tid / 8;
  const uint32_t kg = tid % 8;
  const uint32_t pr = tid / 16;
  const uint32_t dc = tid % 16;
  float4 acc[4][C];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int j = 0; j < C; ++j) acc[i][j] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
  const bool vec = hd % 4 == 0;

  for (uint32_t t0 = lo; t0 < hi; t0 += CT) {
    const uint32_t n = min((uint32_t)CT, hi - t0);
    __syncthreads();  // the previous tile's K, V, P are consumed
    if (vec) {
      const uint32_t per = hd / 4;
      for (uint32_t idx = tid; idx < n * per; idx += C_THREADS) {
        const uint32_t t = idx / per;
        const uint32_t d = (idx % per) * 4;
        const int64_t off = kv_offset(table, t0 + t, kvh, c.g);
        float kf[4];
        float vf[4];
        if (off < 0) {
#pragma unroll
          for (int e = 0; e < 4; ++e) kf[e] = vf[e] = nan;
        } else {
          load_vec<T, 4>(k + off + d, kf);
          load_vec<T, 4>(v + off + d, vf);
        }
        *reinterpret_cast<float4*>(sk + t * hs + d) = make_float4(kf[0], kf[1], kf[2], kf[3]);
        *reinterpret_cast<float4*>(sv + t * HV + d) = make_float4(vf[0], vf[1], vf[2], vf[3]);
      }
    } else {
      for (uint32_t idx = tid; idx < n * hd; idx += C_THREADS) {
        const uint32_t t = idx / hd;
        const uint32_t d = idx % hd;
        const int64_t off = kv_offset(table, t0 + t, kvh, c.g);
        sk[t * hs + d] = off < 0 ? nan : to_f32(k[off + d]);
        sv[t * HV + d] = off < 0 ? nan : to_f32(v[off + d]);
      }
    }
    __syncthreads();

    // Scores: pairs {pg, pg + 16} x keys {kg + 8 j}.
    float s[2][4];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
#pragma unroll
      for (int j = 0; j < 4; ++j) s[i][j] = 0.0f;
    }
#pragma unroll 4
    for (uint32_t d = 0; d < hd4; d += 4) {
      float4 qa[2];
      float4 kb[4];
#pragma unroll
      for (int i = 0; i < 2; ++i) qa[i] = *reinterpret_cast<const float4*>(sq + (pg + 16 * i) * hs + d);
#pragma unroll
      for (int j = 0; j < 4; ++j) kb[j] = *reinterpret_cast<const float4*>(sk + (kg + 8 * j) * hs + d);
#pragma unroll
      for (int i = 0; i < 2; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) s[i][j] = dot4(qa[i], kb[j], s[i][j]);
      }
    }

    // Online softmax of each pair over the tile; the 8 lanes of a pair agree on everything.
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const uint32_t p = pg + 16 * i;
      float tmax = -INFINITY;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        s[i][j] = (kg + 8 * j < n) ? s[i][j] * c.scale : -INFINITY;
        tmax = fmaxf(tmax, s[i][j]);
      }
      const float m_old = sm[p];
      const float m_new = fmaxf(m_old, group8_max(tmax));
      const float alpha = m_old == -INFINITY ? 0.0f : expf(m_old - m_new);
      float lsum = 0.0f;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float pt = (kg + 8 * j < n) ? expf(s[i][j] - m_new) : 0.0f;
        sp[(kg + 8 * j) * SP_STRIDE + p] = pt;
        lsum += pt;
      }
      const float l_tile = group8_sum(lsum);
      if (kg == 0) {
        sm[p] = m_new;
        sl[p] = sl[p] * alpha + l_tile;
        sa[p] = alpha;
      }
    }
    __syncthreads();

    // acc = alpha acc + P V for pairs 4 pr + i, dims 4 dc + 64 j.
    float alpha[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) alpha[i] = sa[4 * pr + i];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
      for (int j = 0; j < C; ++j) {
        acc[i][j].x *= alpha[i];
        acc[i][j].y *= alpha[i];
        acc[i][j].z *= alpha[i];
        acc[i][j].w *= alpha[i];
      }
    }
#pragma unroll 4
    for (uint32_t t = 0; t < n; ++t) {
      const float4 p4 = *reinterpret_cast<const float4*>(sp + t * SP_STRIDE + 4 * pr);
      const float pv[4] = {p4.x, p4.y, p4.z, p4.w};
#pragma unroll
      for (int j = 0; j < C; ++j) {
        const float4 v4 = *reinterpret_cast<const float4*>(sv + t * HV + 4 * dc + 64 * j);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          acc[i][j].x = fmaf(pv[i], v4.x, acc[i][j].x);
          acc[i][j].y = fmaf(pv[i], v4.y, acc[i][j].y);
          acc[i][j].z = fmaf(pv[i], v4.z, acc[i][j].z);
          acc[i][j].w = fmaf(pv[i], v4.w, acc[i][j].w);
        }
      }
    }
  }
  __syncthreads();  // the last tile's m and l are in shared memory

  // Unnormalised states to pre_*[row, head, blockIdx.z].
  auto slot_of = [&](uint32_t p) {
    const uint32_t row = rows[(p0 + p) / group];
    const uint32_t head = kvh * group + (p0 + p) % group;
    return ((size_t)row * c.num_heads + head) * c.slots + blockIdx.z;
  };
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint32_t p = 4 * pr + i;
    if (p >= np) continue;
    const size_t slot = slot_of(p);
#pragma unroll
    for (int j = 0; j < C; ++j) {
      const float a4[4] = {acc[i][j].x, acc[i][j].y, acc[i][j].z, acc[i][j].w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const uint32_t d = 4 * dc + 64 * j + e;
        if (d < hd) pre_acc[slot * hd + d] = a4[e];
      }
    }
  }
  if (tid < np) {
    const size_t slot = slot_of(tid);
    pre_m[slot] = sm[tid];
    pre_l[slot] = sl[tid];
  }
}

}  // namespace ponder

#define PONDER_CASCADE_PREFIX(NAME, T, C)                                                     \
  extern "C" __global__ void __launch_bounds__(ponder::C_THREADS) NAME(                       \
      const float* q, const T* k, const T* v, const uint32_t* tables,                         \
      const uint32_t* group_table, const uint32_t* group_len, const uint32_t* group_rows,     \
      const uint32_t* member_rows, float* pre_m, float* pre_l, float* pre_acc,                \
      ponder::CascadeArgs c) {                                                                \
    ponder::cascade_prefix<T, C>(q, k, v, tables, group_table, group_len, group_rows,         \
                                 member_rows, pre_m, pre_l, pre_acc, c);                      \
  }

#define PONDER_CASCADE_PREFIX_ALL(DTYPE, T)                 \
  PONDER_CASCADE_PREFIX(cascade_prefix_##DTYPE##_d64, T, 1)  \
  PONDER_CASCADE_PREFIX(cascade_prefix_##DTYPE##_d128, T, 2) \
  PONDER_CASCADE_PREFIX(cascade_prefix_##DTYPE##_d256, T, 4)

PONDER_CASCADE_PREFIX_ALL(f32, float)
PONDER_CASCADE_PREFIX_ALL(f16, __half)
PONDER_CASCADE_PREFIX_ALL(bf16, __nv_bfloat16)
