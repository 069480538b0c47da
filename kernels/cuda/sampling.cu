// Fused sampling: one CTA per row of logits picks the next token under temperature, top-k,
// top-p and min-p with a seeded Philox4x32-10 counter (Salmon et al. 2011), and reports in the
// same launch the token's log-probability, the top-n log-probabilities and the entropy of the
// model's raw distribution (before temperature and truncation, as OpenAI's `logprobs` do).
//
// The CPU twin is `ponder_kernels::sampling::sample` (src/sampling/fused.rs); the draw is
// designed so the two pick the same token bit for bit, not merely in distribution:
// - ranking key: `key = ord(logit) << 32 | (0xffffffff - id)`, a total order (larger logit
//   first, lower id on ties; -0 is read as +0), compared as integers;
// - weights: `w = exp_cephes((logit - max) * inv_temp)` with every operation rounded
//   explicitly (`__fmul_rn`, `__fadd_rn`: nothing contracted), so both sides get the same f32;
//   then `W = (u64)(w * 2^44)`, so every mass below is an exact integer sum, the same in any
//   order (vocab <= 2^19 keeps sums below 2^63);
// - top-k keeps keys >= the k-th largest key; top-p keeps keys >= the key at which the mass in
//   key order (within top-k) first reaches `ceil(Z_k * top_p_fixed / 2^32)`; min-p keeps
//   `w >= min_p` (the max has w = 1). Thresholds are found by 8-bit radix select over keys
//   (8 passes each) with integer histograms;
// - the draw: `r` = Philox(counter = (offset, 0, 0), key = seed) words 0 and 1 as a u64,
//   `target = (r * Z_kept) >> 64`, token = the smallest id whose inclusive prefix sum of kept W
//   (in id order) exceeds `target`.
// Temperature 0 (`inv_temp == 0`) is greedy: the largest key. Logprobs and entropy are f32 sums
// (tolerance, not bits). A NaN or +inf logit gives status 1 with the first such id in `token`;
// a row of only -inf gives status 2; neither writes anything else.
#include "common.cuh"

namespace ponder {

constexpr int S_THREADS = 512;
constexpr int S_WARPS = S_THREADS / WARP;

struct SampleRow {
  uint64_t seed;
  uint64_t offset;
  uint64_t top_p_fixed;  // round(top_p * 2^32); >= 2^32 disables
  uint32_t top_k;        // 0 disables
  float inv_temp;        // 1 / temperature; 0 is greedy
  float min_p;           // 0 disables
  uint32_t pad;
};

struct SampleOut {
  uint32_t token;
  uint32_t status;
  float logprob;
  float entropy;
};

__device__ __forceinline__ float bits(uint32_t b) { return __uint_as_float(b); }

// Cephes expf with explicit rounding: bitwise the CPU twin's `exp_cephes`.
__device__ __forceinline__ float exp_cephes(float x) {
  x = x < bits(0xc2ae0000u) ? bits(0xc2ae0000u) : x;  // -87
  x = x > bits(0x42b00000u) ? bits(0x42b00000u) : x;  // 88
  const float shifter = bits(0x4b400000u);
  const float t = __fadd_rn(__fmul_rn(x, bits(0x3fb8aa3bu)), shifter);
  const float n = __fsub_rn(t, shifter);
  const float r = __fsub_rn(__fsub_rn(x, __fmul_rn(n, bits(0x3f318000u))),
                            __fmul_rn(n, bits(0xb95e8083u)));
  float p = bits(0x39506968u);
  p = __fadd_rn(__fmul_rn(p, r), bits(0x3ab743ceu));
  p = __fadd_rn(__fmul_rn(p, r), bits(0x3c088908u));
  p = __fadd_rn(__fmul_rn(p, r), bits(0x3d2aa9c1u));
  p = __fadd_rn(__fmul_rn(p, r), bits(0x3e2aaaaau));
  p = __fadd_rn(__fmul_rn(p, r), bits(0x3f000000u));
  const float y = __fadd_rn(__fadd_rn(__fmul_rn(p, __fmul_rn(r, r)), r), 1.0f);
  const uint32_t n_int = __float_as_uint(t) - __float_as_uint(shifter);
  return __fmul_rn(y, __uint_as_float((n_int + 127u) << 23));
}

__device__ __forceinline__ uint64_t rank_key(float l, uint32_t id) {
  if (l == 0.0f) l = 0.0f;
  const uint32_t b = __float_as_uint(l);
  const uint32_t ord = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
  return ((uint64_t)ord << 32) | (0xffffffffu - id);
}

__device__ __forceinline__ float key_logit(uint64_t key) {
  const uint32_t ord = (uint32_t)(key >> 32);
  return __uint_as_float((ord & 0x80000000u) ? (ord & 0x7fffffffu) : ~ord);
}

__device__ __forceinline__ uint64_t weight(float l, float max, float inv_temp) {
  const float w = exp_cephes(__fmul_rn(__fsub_rn(l, max), inv_temp));
  return __float2ull_rz(__fmul_rn(w, bits(0x55800000u)));  // 2^44
}

// Philox4x32-10: Random123's philox4x32 with 10 rounds.
__device__ __forceinline__ void philox(uint32_t c[4], uint32_t k0, uint32_t k1) {
#pragma unroll
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    const uint32_t hi0 = __umulhi(0xD2511F53u, c[0]);
    const uint32_t lo0 = 0xD2511F53u * c[0];
    const uint32_t hi1 = __umulhi(0xCD9E8D57u, c[2]);
    const uint32_t lo1 = 0xCD9E8D57u * c[2];
    const uint32_t n0 = hi1 ^ c[1] ^ k0;
    const uint32_t n2 = hi0 ^ c[3] ^ k1;
    c[0] = n0;
    c[1] = lo1;
    c[2] = n2;
    c[3] = lo0;
  }
}

// Block-wide reductions over S_THREADS threads, in a fixed order (deterministic), result to
// every thread. `red` is shared scratch of S_WARPS elements.
template <typename U, typename Op>
__device__ __forceinline__ U block_reduce(U x, U* red, Op op) {
#pragma unroll
  for (int o = WARP / 2; o > 0; o >>= 1) x = op(x, __shfl_xor_sync(FULL_MASK, x, o));
  const int warp = threadIdx.x / WARP;
  __syncthreads();
  if (threadIdx.x % WARP == 0) red[warp] = x;
  __syncthreads();
  U acc = red[0];
  for (int w = 1; w < S_WARPS; ++w) acc = op(acc, red[w]);
  return acc;
}

struct Scratch {
  uint64_t hist[256];
  uint64_t red64[S_WARPS];
  float redf[S_WARPS];
  uint32_t red32[S_WARPS];
  uint64_t prefix;
  uint64_t above;
  uint64_t chunk[S_THREADS];
  uint32_t found;
};

// The largest key K with  sum_{i : key_i >= K, key_i >= floor} weight_i >= target, by 8-bit
// radix select from the top digit (weight 1 for `by_mass == false`, else W). Requires the
// total weight above `floor` to reach `target`.
__device__ uint64_t radix_select(const float* x, uint32_t vocab, float max, float inv_temp,
                                 bool by_mass, uint64_t floor, uint64_t target, Scratch& s) {
  uint64_t prefix = 0;
  uint64_t above = 0;
  for (int shift = 56; shift >= 0; shift -= 8) {
    const uint64_t mask = shift == 56 ? 0 : ~((1ull << (shift + 8)) - 1);
    for (int i = threadIdx.x; i < 256; i += blockDim.x) s.hist[i] = 0;
    __syncthreads();
    for (uint32_t i = threadIdx.x; i < vocab; i += blockDim.x) {
      const uint64_t key = rank_key(x[i], i);
      if (key < floor || (key & mask) != prefix) continue;
      const uint64_t w = by_mass ? weight(x[i], max, inv_temp) : 1;
      if (w != 0) atomicAdd((unsigned long long*)&s.hist[(key >> shift) & 255], (unsigned long long)w);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int d = 255; d >= 0; --d) {
        if (above + s.hist[d] >= target) {
          prefix |= (uint64_t)d << shift;
          break;
        }
        above += s.hist[d];
      }
      s.prefix = prefix;
      s.above = above;
    }
    __syncthreads();
    prefix = s.prefix;
    above = s.above;
  }
  return prefix;
}

// ceil(z * p / 2^32) exactly, for z < 2^63 and p <= 2^32, in 64-bit arithmetic.
__device__ __forceinline__ uint64_t scale_ceil(uint64_t z, uint64_t p) {
  const uint64_t lo = (z & 0xffffffffull) * p;
  return (z >> 32) * p + (lo >> 32) + ((lo & 0xffffffffull) != 0);
}

__device__ void fused_sample_row(const float* __restrict__ x, uint32_t vocab, SampleRow p,
                                 uint32_t n_top, SampleOut* out, uint32_t* top_ids,
                                 float* top_lp, Scratch& s) {
  const uint32_t tid = threadIdx.x;
  auto max64 = [](uint64_t a, uint64_t b) { return a > b ? a : b; };
  auto min32 = [](uint32_t a, uint32_t b) { return a < b ? a : b; };
  auto add64 = [](uint64_t a, uint64_t b) { return a + b; };
  auto addf = [](float a, float b) { return a + b; };

  uint32_t bad = 0xffffffffu;
  uint64_t best = 0;
  for (uint32_t i = tid; i < vocab; i += blockDim.x) {
    const float l = x[i];
    if (isnan(l) || l == INFINITY) {
      bad = min(bad, i);
    } else {
      best = max64(best, rank_key(l, i));
    }
  }
  bad = block_reduce<uint32_t>(bad, s.red32, min32);
  best = block_reduce<uint64_t>(best, s.red64, max64);
  const float max = key_logit(best);
  if (bad != 0xffffffffu || max == -INFINITY) {
    if (tid == 0) *out = SampleOut{bad != 0xffffffffu ? bad : 0u, bad != 0xffffffffu ? 1u : 2u, 0.0f, 0.0f};
    return;
  }

  // The model's own distribution: Z = sum e^(l - max), E = sum e^(l - max) (l - max).
  float z = 0.0f;
  float e = 0.0f;
  for (uint32_t i = tid; i < vocab; i += blockDim.x) {
    const float d = x[i] - max;
    if (d == -INFINITY) continue;
    const float w = expf(d);
    z += w;
    e += w * d;
  }
  z = block_reduce<float>(z, s.redf, addf);
  e = block_reduce<float>(e, s.redf, addf);
  const float log_z = logf(z);
  const float entropy = log_z - e / z;

  uint64_t prev = best;
  for (uint32_t j = 0; j < n_top; ++j) {
    uint64_t key = 0;
    if (j == 0) {
      key = best;
    } else if (prev != 0) {
      for (uint32_t i = tid; i < vocab; i += blockDim.x) {
        const uint64_t k = rank_key(x[i], i);
        if (k < prev) key = max64(key, k);
      }
      key = block_reduce<uint64_t>(key, s.red64, max64);
    }
    if (tid == 0) {
      const uint32_t id = key == 0 ? 0xffffffffu : 0xffffffffu - (uint32_t)key;
      top_ids[j] = id;
      top_lp[j] = key == 0 ? -INFINITY : (x[id] - max) - log_z;
    }
    prev = key;
  }

  uint32_t token = 0xffffffffu - (uint32_t)best;
  if (p.inv_temp != 0.0f) {
    uint64_t floor = 0;
    if (p.top_k > 0 && p.top_k < vocab) {
      floor = radix_select(x, vocab, max, p.inv_temp, false, 0, p.top_k, s);
    }
    if (p.top_p_fixed < (1ull << 32)) {
      uint64_t zk = 0;
      for (uint32_t i = tid; i < vocab; i += blockDim.x) {
        if (rank_key(x[i], i) >= floor) zk += weight(x[i], max, p.inv_temp);
      }
      zk = block_reduce<uint64_t>(zk, s.red64, add64);
      uint64_t target = scale_ceil(zk, p.top_p_fixed);
      if (target == 0) target = 1;
      const uint64_t kp = radix_select(x, vocab, max, p.inv_temp, true, floor, target, s);
      floor = max64(floor, kp);
    }
    // Kept tokens: key >= floor and w >= min_p. Each thread owns a contiguous run of ids.
    const uint32_t per = (vocab + blockDim.x - 1) / blockDim.x;
    const uint32_t lo = min(vocab, tid * per);
    const uint32_t hi = min(vocab, lo + per);
    auto kept_weight = [&](uint32_t i) -> uint64_t {
      if (rank_key(x[i], i) < floor) return 0;
      const float w = exp_cephes(__fmul_rn(__fsub_rn(x[i], max), p.inv_temp));
      if (w < p.min_p) return 0;
      return __float2ull_rz(__fmul_rn(w, bits(0x55800000u)));
    };
    uint64_t mine = 0;
    for (uint32_t i = lo; i < hi; ++i) mine += kept_weight(i);
    s.chunk[tid] = mine;
    if (tid == 0) s.found = 0xffffffffu;
    __syncthreads();
    if (tid == 0) {
      uint64_t run = 0;
      for (uint32_t t = 0; t < blockDim.x; ++t) {
        const uint64_t c = s.chunk[t];
        s.chunk[t] = run;
        run += c;
      }
      uint32_t c[4] = {(uint32_t)p.offset, (uint32_t)(p.offset >> 32), 0u, 0u};
      philox(c, (uint32_t)p.seed, (uint32_t)(p.seed >> 32));
      const uint64_t r = ((uint64_t)c[0] << 32) | c[1];
      s.prefix = __umul64hi(r, run);
    }
    __syncthreads();
    const uint64_t target = s.prefix;
    uint64_t acc = s.chunk[tid];
    if (acc <= target && target < acc + mine) {
      for (uint32_t i = lo; i < hi; ++i) {
        acc += kept_weight(i);
        if (target < acc) {
          s.found = i;
          break;
        }
      }
    }
    __syncthreads();
    // Some thread always finds it (target < total); the guard keeps a bug from reading past x.
    if (s.found < vocab) token = s.found;
  }
  if (tid == 0) *out = SampleOut{token, 0u, (x[token] - max) - log_z, entropy};
}

}  // namespace ponder

// One CTA of 512 threads per row: `logits` `[rows, vocab]`, `rows_p[row]` its parameters;
// writes `out[row]` and `n_top` entries of `top_ids` / `top_lp` at `row * n_top` (id
// 0xffffffff and -inf past the vocabulary).
extern "C" __global__ void __launch_bounds__(ponder::S_THREADS)
    fused_sample(const float* __restrict__ logits, uint32_t vocab,
                 const ponder::SampleRow* __restrict__ rows_p, uint32_t n_top,
                 ponder::SampleOut* __restrict__ out, uint32_t* __restrict__ top_ids,
                 float* __restrict__ top_lp) {
  __shared__ ponder::Scratch s;
  const uint32_t row = blockIdx.x;
  ponder::fused_sample_row(logits + (size_t)row * vocab, vocab, rows_p[row], n_top, out + row,
                           top_ids + (size_t)row * n_top, top_lp + (size_t)row * n_top, s);
}
