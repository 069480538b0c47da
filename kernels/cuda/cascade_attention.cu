// Shared-prefix (cascade) attention: the prefix a group of sequences shares is attended once
// for all query rows of the group, as a matrix-matrix product per tile of keys (Juravsky et
// al. 2024, "Hydragen"; FlashInfer's cascade attention), producing one partial softmax state
// per (member row, head, prefix split). Each member's own suffix is attended by
// `paged_partial_*` (paged_attention.cu) from the prefix's end, and `attention_merge` merges
// the two states exactly by log-sum-exp.
//
// Group x has prefix length `group_len[x]` (tokens, all visible to every member row: the host
// checks `prefix_len <= pos + 1`), its prefix block table at `tables + group_table[x]`, and
// member rows `member_rows[group_rows[x] .. group_rows[x + 1]]`.
//
// `cascade_prefix_<dtype>`: grid (groups, num_kv_heads * pair_chunks, pre_slots); CTA
// (x, y, j) takes KV head y / pair_chunks, a chunk of `pairs_per_cta` (member row, query head
// of that KV head) pairs, and prefix split j: positions `[j * split, min((j + 1) * split,
// prefix_len))`. It walks the split in tiles of `tile` (<= 32) tokens: the tile's keys and
// values (for this KV head) are loaded into shared memory once, then every warp sweeps them
// with its pairs (one lane per key for the scores, one lane per dim for the values). Dynamic
// shared memory: K `[tile][head_dim + 1]` (padded against bank conflicts), V `[tile][head_dim]`,
// Q and acc `[pairs_per_cta][head_dim]`, m and l `[pairs_per_cta]`, probabilities
// `[NWARPS][32]`; the host sizes `pairs_per_cta` to fit. The state is written unnormalised to
// `pre_{m,l,acc}[row, head, j]`; an empty split writes the empty state.
//
// CPU reference: `ponder_kernels::attention::cascade_attention` (same grouping, prefix state
// once per group, suffix per row, LSE merge), checked against `attention_reference`.
#include "common.cuh"

namespace ponder {

constexpr int C_NWARPS = 4;

struct CascadeArgs {
  KvGeom g;
  uint32_t num_heads;
  uint32_t split_tokens;
  uint32_t slots;
  float scale;
  uint32_t tile;
  uint32_t pairs_per_cta;
};

template <typename T>
__device__ void cascade_prefix(const float* __restrict__ q, const T* __restrict__ k,
                               const T* __restrict__ v, const uint32_t* __restrict__ tables,
                               const uint32_t* __restrict__ group_table,
                               const uint32_t* __restrict__ group_len,
                               const uint32_t* __restrict__ group_rows,
                               const uint32_t* __restrict__ member_rows,
                               float* __restrict__ pre_m, float* __restrict__ pre_l,
                               float* __restrict__ pre_acc, CascadeArgs c) {
  extern __shared__ float smem[];
  const uint32_t hd = c.g.head_dim;
  const uint32_t ppc = c.pairs_per_cta;
  float* sk = smem;                          // [tile][hd + 1]
  float* sv = sk + c.tile * (hd + 1);        // [tile][hd]
  float* sq = sv + c.tile * hd;              // [ppc][hd]
  float* sacc = sq + ppc * hd;               // [ppc][hd]
  float* sm = sacc + ppc * hd;               // [ppc]
  float* sl = sm + ppc;                      // [ppc]
  float* sp = sl + ppc;                      // [C_NWARPS][32]

  const uint32_t x = blockIdx.x;
  const uint32_t group = c.num_heads / c.g.num_kv_heads;
  const uint32_t members = group_rows[x + 1] - group_rows[x];
  const uint32_t n_pairs = members * group;
  const uint32_t chunks = (n_pairs + ppc - 1) / ppc;
  const uint32_t max_chunks = gridDim.y / c.g.num_kv_heads;
  const uint32_t kvh = blockIdx.y / max_chunks;
  const uint32_t chunk = blockIdx.y % max_chunks;
  if (chunk >= chunks) return;
  const uint32_t p0 = chunk * ppc;
  const uint32_t np = min(ppc, n_pairs - p0);
  const uint32_t prefix = group_len[x];
  const uint32_t lo = blockIdx.z * c.split_tokens;
  const uint32_t hi = min(prefix, lo + c.split_tokens);
  const uint32_t* table = tables + group_table[x];
  const uint32_t* rows = member_rows + group_rows[x];
  const int warp = threadIdx.x / WARP;
  const int lane = threadIdx.x % WARP;
  const float nan = __int_as_float(0x7fc00000);

  // Pair p of this CTA: member row rows[(p0 + p) / group], query head kvh * group + (p0 + p) % group.
  for (uint32_t idx = threadIdx.x; idx < np * hd; idx += blockDim.x) {
    const uint32_t p = idx / hd;
    const uint32_t d = idx % hd;
    const uint32_t row = rows[(p0 + p) / group];
    const uint32_t head = kvh * group + (p0 + p) % group;
    sq[idx] = q[((size_t)row * c.num_heads + head) * hd + d];
    sacc[idx] = 0.0f;
  }
  for (uint32_t p = threadIdx.x; p < np; p += blockDim.x) {
    sm[p] = -INFINITY;
    sl[p] = 0.0f;
  }
  __syncthreads();

  for (uint32_t t0 = lo; t0 < hi; t0 += c.tile) {
    const uint32_t n = min(c.tile, hi - t0);
    for (uint32_t idx = threadIdx.x; idx < n * hd; idx += blockDim.x) {
      const uint32_t t = idx / hd;
      const uint32_t d = idx % hd;
      const int64_t off = kv_offset(table, t0 + t, kvh, c.g);
      sk[t * (hd + 1) + d] = off < 0 ? nan : to_f32(k[off + d]);
      sv[t * hd + d] = off < 0 ? nan : to_f32(v[off + d]);
    }
    __syncthreads();
    for (uint32_t p = warp; p < np; p += C_NWARPS) {
      float s = -INFINITY;
      if ((uint32_t)lane < n) {
        const float* qp = sq + p * hd;
        const float* kt = sk + lane * (hd + 1);
        float dot = 0.0f;
        for (uint32_t d = 0; d < hd; ++d) dot += qp[d] * kt[d];
        s = dot * c.scale;
      }
      const float m_old = sm[p];
      const float m_new = fmaxf(m_old, warp_max(s));
      const float alpha = m_old == -INFINITY ? 0.0f : expf(m_old - m_new);
      const float pt = (uint32_t)lane < n ? expf(s - m_new) : 0.0f;
      const float l_tile = warp_sum(pt);
      sp[warp * WARP + lane] = pt;
      __syncwarp();
      for (uint32_t d = lane; d < hd; d += WARP) {
        float av = 0.0f;
        for (uint32_t t = 0; t < n; ++t) av += sp[warp * WARP + t] * sv[t * hd + d];
        sacc[p * hd + d] = sacc[p * hd + d] * alpha + av;
      }
      __syncwarp();
      if (lane == 0) {
        sm[p] = m_new;
        sl[p] = sl[p] * alpha + l_tile;
      }
      __syncwarp();
    }
    __syncthreads();
  }

  for (uint32_t idx = threadIdx.x; idx < np * hd; idx += blockDim.x) {
    const uint32_t p = idx / hd;
    const uint32_t d = idx % hd;
    const uint32_t row = rows[(p0 + p) / group];
    const uint32_t head = kvh * group + (p0 + p) % group;
    const size_t slot = ((size_t)row * c.num_heads + head) * c.slots + blockIdx.z;
    pre_acc[slot * hd + d] = sacc[idx];
    if (d == 0) {
      pre_m[slot] = sm[p];
      pre_l[slot] = sl[p];
    }
  }
}

}  // namespace ponder

#define PONDER_CASCADE_PREFIX(NAME, T)                                                        \
  extern "C" __global__ void __launch_bounds__(ponder::C_NWARPS * ponder::WARP) NAME(         \
      const float* q, const T* k, const T* v, const uint32_t* tables,                         \
      const uint32_t* group_table, const uint32_t* group_len, const uint32_t* group_rows,     \
      const uint32_t* member_rows, float* pre_m, float* pre_l, float* pre_acc,                \
      ponder::CascadeArgs c) {                                                                \
    ponder::cascade_prefix<T>(q, k, v, tables, group_table, group_len, group_rows,            \
                              member_rows, pre_m, pre_l, pre_acc, c);                         \
  }

PONDER_CASCADE_PREFIX(cascade_prefix_f32, float)
PONDER_CASCADE_PREFIX(cascade_prefix_f16, __half)
PONDER_CASCADE_PREFIX(cascade_prefix_bf16, __nv_bfloat16)
