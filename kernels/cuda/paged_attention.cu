// Paged decode attention, flash-decoding style (Dao et al. 2023; vLLM's PagedAttention layout,
// Kwon et al. 2023), with the log-sum-exp merge of all partial softmax states fused in: the
// last split of a row to finish merges (the "last block" reduction of CUDA's
// threadFenceReduction sample), so a step is one launch, or two with a cascade prefix.
//
// Layout (as `ponder_kernels::attention::PagedKv`): K and V are `[num_blocks, block_size,
// num_kv_heads, head_dim]` of f32, f16 or bf16; query rows `q` and the output are f32
// `[rows, num_heads, head_dim]`. Row r's `RowMeta` (common.cuh) names its block table and its
// own key range `[begin, end)` (causal decode: `end = pos + 1`; a cascade member's range
// starts at its group's prefix length). Query head h reads KV head
// `h / (num_heads / num_kv_heads)` (GQA).
//
// `paged_partial_<dtype>_d<n>[_v]`: grid (rows, num_kv_heads * head_chunks, slots), 128
// threads. CTA (r, y, s) takes KV head y / head_chunks, up to G_MAX of its query heads (so K/V
// rows are loaded once for the whole GQA group), and split s of the row's range: segment
// `begin / split + s`, where segment j is positions `[j * split, (j + 1) * split)` (fixed by
// position for a given plan). Four warps stride over the split's tokens, two tokens in flight
// per warp when `n <= 4` (both tokens' table lookups and K/V loads issued before either is
// used), each warp keeping an online-softmax state per head with `n` dims per lane
// (head_dim <= 32 n). Lane l holds dims `l + 32 i` (scalar loads), or, in the `_v` kernels
// (head_dim % n == 0), dims `l n .. l n + n` loaded as one vector (8 bytes per lane for bf16
// at head_dim 128). The warps' states are merged in warp order and written, unnormalised, as
// slot s of `part_{m,l,acc}[row, head, slot]`; a split past the row's range writes the empty
// state.
//
// Fused merge: with one slot the CTA merges at once; otherwise it bumps
// `counters[row, y]` after a fence and the CTA that brings it to `slots` merges (and resets
// the counter to 0 for the plan's next launch). The merge reads, per (row, head), the row's
// `pre` prefix states (`pre_*[row, head, 0..pre]`, written by `cascade_prefix_*`, launched
// before on the same stream), then its suffix slots in slot order, and writes `acc / l`. The
// slots are always read in the same order whichever CTA merges, so results are deterministic.
//
// CPU reference: `ponder_kernels::attention::{paged_attention, cascade_attention}`, and
// `attention_reference` (plain softmax over gathered KV) for both.
#include "common.cuh"

namespace ponder {

constexpr int NWARPS = 4;
constexpr int G_MAX = 8;

struct AttnArgs {
  KvGeom g;
  uint32_t num_heads;
  uint32_t split_tokens;
  uint32_t slots;
  float scale;
  uint32_t pre_slots;
};

// Lane `lane`'s `DPL` elements of the head vector at `p`: dims `lane + 32 i`, or with `VEC`
// dims `lane * DPL + i`; 0 past `hd`.
template <typename T, int DPL, bool VEC>
__device__ __forceinline__ void load_lane(const T* __restrict__ p, int lane, uint32_t hd,
                                          float* out) {
  if constexpr (VEC) {
    const uint32_t d0 = (uint32_t)lane * DPL;
    if (d0 < hd) {
      load_vec<T, DPL>(p + d0, out);
    } else {
#pragma unroll
      for (int i = 0; i < DPL; ++i) out[i] = 0.0f;
    }
  } else {
#pragma unroll
    for (int i = 0; i < DPL; ++i) {
      const uint32_t d = lane + WARP * i;
      out[i] = d < hd ? to_f32(p[d]) : 0.0f;
    }
  }
}

// Merges (row, head)'s prefix and suffix states, dims `d`, into `out` (module docs). Reads go
// through L2 (`__ldcg`): other CTAs wrote the suffix slots during this launch.
__device__ __forceinline__ void merge_into_out(const float* pre_m, const float* pre_l,
                                               const float* pre_acc, uint32_t n_pre,
                                               uint32_t pre_slots, const float* suf_m,
                                               const float* suf_l, const float* suf_acc,
                                               uint32_t slots, size_t rh, uint32_t d,
                                               uint32_t hd, float* out) {
  float mx = -INFINITY;
  for (uint32_t s = 0; s < n_pre; ++s) mx = fmaxf(mx, __ldcg(pre_m + rh * pre_slots + s));
  for (uint32_t s = 0; s < slots; ++s) mx = fmaxf(mx, __ldcg(suf_m + rh * slots + s));
  float sum = 0.0f;
  float acc = 0.0f;
  for (uint32_t s = 0; s < n_pre; ++s) {
    const size_t i = rh * pre_slots + s;
    const float m = __ldcg(pre_m + i);
    const float wt = m == -INFINITY ? 0.0f : expf(m - mx);
    sum += __ldcg(pre_l + i) * wt;
    acc += __ldcg(pre_acc + i * hd + d) * wt;
  }
  for (uint32_t s = 0; s < slots; ++s) {
    const size_t i = rh * slots + s;
    const float m = __ldcg(suf_m + i);
    const float wt = m == -INFINITY ? 0.0f : expf(m - mx);
    sum += __ldcg(suf_l + i) * wt;
    acc += __ldcg(suf_acc + i * hd + d) * wt;
  }
  out[rh * hd + d] = acc / sum;
}

template <typename T, int DPL, bool VEC>
__device__ void paged_partial(const float* __restrict__ q, const T* __restrict__ k,
                              const T* __restrict__ v, const uint32_t* __restrict__ tables,
                              const RowMeta* __restrict__ meta, const float* pre_m,
                              const float* pre_l, const float* pre_acc, float* part_m,
                              float* part_l, float* part_acc, uint32_t* counters,
                              float* __restrict__ out, AttnArgs a) {
  // Two tokens in flight per warp when the registers allow (DPL <= 4).
  constexpr int U = DPL <= 4 ? 2 : 1;
  __shared__ float sm_m[NWARPS][G_MAX];
  __shared__ float sm_l[NWARPS][G_MAX];
  __shared__ float sm_acc[NWARPS][G_MAX][DPL * WARP];
  __shared__ int sm_bad;
  __shared__ int sm_last;

  const uint32_t row = blockIdx.x;
  const uint32_t group = a.num_heads / a.g.num_kv_heads;
  const uint32_t chunks = (group + G_MAX - 1) / G_MAX;
  const uint32_t kvh = blockIdx.y / chunks;
  const uint32_t h0 = kvh * group + (blockIdx.y % chunks) * G_MAX;
  const uint32_t nh = min((uint32_t)G_MAX, kvh * group + group - h0);
  const uint32_t hd = a.g.head_dim;
  const RowMeta rm = meta[row];
  const uint32_t seg = rm.begin / a.split_tokens + blockIdx.z;
  const uint32_t lo = max(rm.begin, seg * a.split_tokens);
  const uint32_t hi = min(rm.end, (seg + 1) * a.split_tokens);
  const uint32_t* table = tables + rm.table;
  const int warp = threadIdx.x / WARP;
  const int lane = threadIdx.x % WARP;
  if (threadIdx.x == 0) sm_bad = 0;

  float qr[G_MAX][DPL];
  float acc[G_MAX][DPL];
  float m[G_MAX];
  float l[G_MAX];
#pragma unroll
  for (int g = 0; g < G_MAX; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
#pragma unroll
    for (int i = 0; i < DPL; ++i) acc[g][i] = 0.0f;
    if (g < (int)nh) {
      load_lane<float, DPL, VEC>(q + ((size_t)row * a.num_heads + h0 + g) * hd, lane, hd, qr[g]);
    } else {
#pragma unroll
      for (int i = 0; i < DPL; ++i) qr[g][i] = 0.0f;
    }
  }
  bool bad = false;
  for (uint32_t t0 = lo + warp; t0 < hi; t0 += U * NWARPS) {
    // Issue every load of the U tokens first, then fold them in position order.
    float kr[U][DPL];
    float vr[U][DPL];
    int64_t off[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const uint32_t t = t0 + u * NWARPS;
      off[u] = t < hi ? kv_offset(table, t, kvh, a.g) : -2;
      if (off[u] >= 0) {
        load_lane<T, DPL, VEC>(k + off[u], lane, hd, kr[u]);
        load_lane<T, DPL, VEC>(v + off[u], lane, hd, vr[u]);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (off[u] == -1) bad = true;
      if (off[u] < 0) continue;
#pragma unroll
      for (int g = 0; g < G_MAX; ++g) {
        if (g >= (int)nh) break;
        float s = 0.0f;
#pragma unroll
        for (int i = 0; i < DPL; ++i) s += qr[g][i] * kr[u][i];
        s = warp_sum(s) * a.scale;
        const float m_new = fmaxf(m[g], s);
        const float alpha = expf(m[g] - m_new);
        const float p = expf(s - m_new);
        l[g] = l[g] * alpha + p;
#pragma unroll
        for (int i = 0; i < DPL; ++i) acc[g][i] = acc[g][i] * alpha + p * vr[u][i];
        m[g] = m_new;
      }
    }
  }
  __syncthreads();
  if (bad && lane == 0) atomicOr(&sm_bad, 1);
#pragma unroll
  for (int g = 0; g < G_MAX; ++g) {
    if (lane == 0) {
      sm_m[warp][g] = m[g];
      sm_l[warp][g] = l[g];
    }
#pragma unroll
    for (int i = 0; i < DPL; ++i) {
      const int d = VEC ? lane * DPL + i : lane + WARP * i;
      sm_acc[warp][g][d] = acc[g][i];
    }
  }
  __syncthreads();
  const float nan = __int_as_float(0x7fc00000);
  for (uint32_t idx = threadIdx.x; idx < nh * hd; idx += blockDim.x) {
    const uint32_t g = idx / hd;
    const uint32_t d = idx % hd;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < NWARPS; ++w) mx = fmaxf(mx, sm_m[w][g]);
    float sum = 0.0f;
    float o = 0.0f;
#pragma unroll
    for (int w = 0; w < NWARPS; ++w) {
      const float wt = sm_m[w][g] == -INFINITY ? 0.0f : expf(sm_m[w][g] - mx);
      sum += sm_l[w][g] * wt;
      o += sm_acc[w][g][d] * wt;
    }
    const size_t slot = ((size_t)row * a.num_heads + h0 + g) * a.slots + blockIdx.z;
    part_acc[slot * hd + d] = sm_bad ? nan : o;
    if (d == 0) {
      part_m[slot] = mx;
      part_l[slot] = sm_bad ? nan : sum;
    }
  }

  // Fused merge: the last of the row's `slots` CTAs for these heads merges them all.
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    int last = 1;
    if (a.slots > 1) {
      uint32_t* c = counters + (size_t)row * gridDim.y + blockIdx.y;
      last = atomicAdd(c, 1u) == a.slots - 1;
      if (last) *c = 0;
    }
    sm_last = last;
  }
  __syncthreads();
  if (!sm_last) return;
  __threadfence();
  for (uint32_t idx = threadIdx.x; idx < nh * hd; idx += blockDim.x) {
    const size_t rh = (size_t)row * a.num_heads + h0 + idx / hd;
    merge_into_out(pre_m, pre_l, pre_acc, rm.pre, a.pre_slots, part_m, part_l, part_acc,
                   a.slots, rh, idx % hd, hd, out);
  }
}

}  // namespace ponder

#define PONDER_PAGED_PARTIAL(NAME, T, DPL, VEC)                                              \
  extern "C" __global__ void __launch_bounds__(ponder::NWARPS * ponder::WARP) NAME(          \
      const float* q, const T* k, const T* v, const uint32_t* tables,                        \
      const ponder::RowMeta* meta, const float* pre_m, const float* pre_l,                   \
      const float* pre_acc, float* part_m, float* part_l, float* part_acc,                   \
      uint32_t* counters, float* out, ponder::AttnArgs a) {                                  \
    ponder::paged_partial<T, DPL, VEC>(q, k, v, tables, meta, pre_m, pre_l, pre_acc, part_m, \
                                       part_l, part_acc, counters, out, a);                  \
  }

#define PONDER_PAGED_PARTIAL_ALL(DTYPE, T)                             \
  PONDER_PAGED_PARTIAL(paged_partial_##DTYPE##_d1, T, 1, false)        \
  PONDER_PAGED_PARTIAL(paged_partial_##DTYPE##_d2, T, 2, false)        \
  PONDER_PAGED_PARTIAL(paged_partial_##DTYPE##_d4, T, 4, false)        \
  PONDER_PAGED_PARTIAL(paged_partial_##DTYPE##_d8, T, 8, false)        \
  PONDER_PAGED_PARTIAL(paged_partial_##DTYPE##_d2_v, T, 2, true)       \
  PONDER_PAGED_PARTIAL(paged_partial_##DTYPE##_d4_v, T, 4, true)       \
  PONDER_PAGED_PARTIAL(paged_partial_##DTYPE##_d8_v, T, 8, true)

PONDER_PAGED_PARTIAL_ALL(f32, float)
PONDER_PAGED_PARTIAL_ALL(f16, __half)
PONDER_PAGED_PARTIAL_ALL(bf16, __nv_bfloat16)
