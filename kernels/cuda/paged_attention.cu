// Paged decode attention, flash-decoding style (Dao et al. 2023; vLLM's PagedAttention layout,
// Kwon et al. 2023), and the log-sum-exp merge of partial softmax states.
//
// Layout (as `ponder_kernels::attention::PagedKv`): K and V are `[num_blocks, block_size,
// num_kv_heads, head_dim]` of f32, f16 or bf16; query rows `q` are f32 `[rows, num_heads,
// head_dim]`. Row r reads its sequence's block table at `tables + row_table[r]` and attends to
// key positions `[row_begin[r], row_end[r])` (causal decode: `row_end = pos + 1`; a cascade
// member's suffix starts at its group's prefix length). Query head h reads KV head
// `h / (num_heads / num_kv_heads)` (GQA).
//
// `paged_partial_<dtype>_d<n>`: grid (rows, num_kv_heads * head_chunks, slots). CTA (r, y, s)
// takes KV head y / head_chunks, up to G_MAX of its query heads (so K/V rows are loaded once
// for the whole GQA group), and split s of the row's range: segment `begin / split + s`, where
// segment j is positions `[j * split, (j + 1) * split)` (fixed by position, so a row's
// partials never depend on the batch). Four warps stride over the split's tokens, each keeping
// an online-softmax state per head with `n` dims per lane (head_dim <= 32 n); the warps' states
// are merged in warp order and written, unnormalised, as slot s of
// `part_{m,l,acc}[row, head, slot]`. A split past the row's range writes the empty state.
//
// `attention_merge`: one CTA per (row, head) merges the row's prefix slots (cascade; see
// cascade_attention.cu) and then its suffix slots in slot order, and writes `acc / l`.
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
};

template <typename T, int DPL>
__device__ void paged_partial(const float* __restrict__ q, const T* __restrict__ k,
                              const T* __restrict__ v, const uint32_t* __restrict__ tables,
                              const uint32_t* __restrict__ row_table,
                              const uint32_t* __restrict__ row_begin,
                              const uint32_t* __restrict__ row_end, float* __restrict__ part_m,
                              float* __restrict__ part_l, float* __restrict__ part_acc,
                              AttnArgs a) {
  __shared__ float sm_m[NWARPS][G_MAX];
  __shared__ float sm_l[NWARPS][G_MAX];
  __shared__ float sm_acc[NWARPS][G_MAX][DPL * WARP];
  __shared__ int sm_bad;

  const uint32_t row = blockIdx.x;
  const uint32_t group = a.num_heads / a.g.num_kv_heads;
  const uint32_t chunks = (group + G_MAX - 1) / G_MAX;
  const uint32_t kvh = blockIdx.y / chunks;
  const uint32_t h0 = kvh * group + (blockIdx.y % chunks) * G_MAX;
  const uint32_t nh = min((uint32_t)G_MAX, kvh * group + group - h0);
  const uint32_t hd = a.g.head_dim;
  const uint32_t begin = row_begin[row];
  const uint32_t end = row_end[row];
  const uint32_t seg = begin / a.split_tokens + blockIdx.z;
  const uint32_t lo = max(begin, seg * a.split_tokens);
  const uint32_t hi = min(end, (seg + 1) * a.split_tokens);
  const uint32_t* table = tables + row_table[row];
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
    for (int i = 0; i < DPL; ++i) {
      const uint32_t d = lane + WARP * i;
      const bool live = g < (int)nh && d < hd;
      qr[g][i] = live ? q[((size_t)row * a.num_heads + h0 + g) * hd + d] : 0.0f;
      acc[g][i] = 0.0f;
    }
  }
  bool bad = false;
  for (uint32_t t = lo + warp; t < hi; t += NWARPS) {
    const int64_t off = kv_offset(table, t, kvh, a.g);
    if (off < 0) {
      bad = true;
      continue;
    }
    float kr[DPL];
    float vr[DPL];
#pragma unroll
    for (int i = 0; i < DPL; ++i) {
      const uint32_t d = lane + WARP * i;
      kr[i] = d < hd ? to_f32(k[off + d]) : 0.0f;
      vr[i] = d < hd ? to_f32(v[off + d]) : 0.0f;
    }
#pragma unroll
    for (int g = 0; g < G_MAX; ++g) {
      if (g >= (int)nh) break;
      float s = 0.0f;
#pragma unroll
      for (int i = 0; i < DPL; ++i) s += qr[g][i] * kr[i];
      s = warp_sum(s) * a.scale;
      const float m_new = fmaxf(m[g], s);
      const float alpha = expf(m[g] - m_new);
      const float p = expf(s - m_new);
      l[g] = l[g] * alpha + p;
#pragma unroll
      for (int i = 0; i < DPL; ++i) acc[g][i] = acc[g][i] * alpha + p * vr[i];
      m[g] = m_new;
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
    for (int i = 0; i < DPL; ++i) sm_acc[warp][g][lane + WARP * i] = acc[g][i];
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
    float out = 0.0f;
#pragma unroll
    for (int w = 0; w < NWARPS; ++w) {
      const float wt = sm_m[w][g] == -INFINITY ? 0.0f : expf(sm_m[w][g] - mx);
      sum += sm_l[w][g] * wt;
      out += sm_acc[w][g][d] * wt;
    }
    const size_t slot = ((size_t)row * a.num_heads + h0 + g) * a.slots + blockIdx.z;
    part_acc[slot * hd + d] = sm_bad ? nan : out;
    if (d == 0) {
      part_m[slot] = mx;
      part_l[slot] = sm_bad ? nan : sum;
    }
  }
}

}  // namespace ponder

#define PONDER_PAGED_PARTIAL(NAME, T, DPL)                                                   \
  extern "C" __global__ void __launch_bounds__(ponder::NWARPS * ponder::WARP) NAME(          \
      const float* q, const T* k, const T* v, const uint32_t* tables,                        \
      const uint32_t* row_table, const uint32_t* row_begin, const uint32_t* row_end,         \
      float* part_m, float* part_l, float* part_acc, ponder::AttnArgs a) {                    \
    ponder::paged_partial<T, DPL>(q, k, v, tables, row_table, row_begin, row_end, part_m,    \
                                  part_l, part_acc, a);                                      \
  }

#define PONDER_PAGED_PARTIAL_ALL(DTYPE, T)                 \
  PONDER_PAGED_PARTIAL(paged_partial_##DTYPE##_d1, T, 1)   \
  PONDER_PAGED_PARTIAL(paged_partial_##DTYPE##_d2, T, 2)   \
  PONDER_PAGED_PARTIAL(paged_partial_##DTYPE##_d4, T, 4)   \
  PONDER_PAGED_PARTIAL(paged_partial_##DTYPE##_d8, T, 8)

PONDER_PAGED_PARTIAL_ALL(f32, float)
PONDER_PAGED_PARTIAL_ALL(f16, __half)
PONDER_PAGED_PARTIAL_ALL(bf16, __nv_bfloat16)

// Merges, per (row, head), the row's prefix slots (`row_pre[row]` says whether it has any;
// `pre_slots` of them) and then its `suf_slots` suffix slots, in slot order, and writes the
// normalised output `[rows, num_heads, head_dim]`. Grid (rows, num_heads).
extern "C" __global__ void attention_merge(const float* __restrict__ pre_m,
                                           const float* __restrict__ pre_l,
                                           const float* __restrict__ pre_acc,
                                           const uint32_t* __restrict__ row_pre,
                                           uint32_t pre_slots, const float* __restrict__ suf_m,
                                           const float* __restrict__ suf_l,
                                           const float* __restrict__ suf_acc, uint32_t suf_slots,
                                           float* __restrict__ out, uint32_t num_heads,
                                           uint32_t head_dim) {
  const uint32_t row = blockIdx.x;
  const uint32_t head = blockIdx.y;
  const size_t rh = (size_t)row * num_heads + head;
  const uint32_t n_pre = row_pre[row] ? pre_slots : 0;
  float mx = -INFINITY;
  for (uint32_t s = 0; s < n_pre; ++s) mx = fmaxf(mx, pre_m[rh * pre_slots + s]);
  for (uint32_t s = 0; s < suf_slots; ++s) mx = fmaxf(mx, suf_m[rh * suf_slots + s]);
  for (uint32_t d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float sum = 0.0f;
    float acc = 0.0f;
    for (uint32_t s = 0; s < n_pre; ++s) {
      const size_t i = rh * pre_slots + s;
      const float wt = pre_m[i] == -INFINITY ? 0.0f : expf(pre_m[i] - mx);
      sum += pre_l[i] * wt;
      acc += pre_acc[i * head_dim + d] * wt;
    }
    for (uint32_t s = 0; s < suf_slots; ++s) {
      const size_t i = rh * suf_slots + s;
      const float wt = suf_m[i] == -INFINITY ? 0.0f : expf(suf_m[i] - mx);
      sum += suf_l[i] * wt;
      acc += suf_acc[i * head_dim + d] * wt;
    }
    out[rh * head_dim + d] = acc / sum;
  }
}
