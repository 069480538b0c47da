// The decoder layer's small kernels around the matmuls and attention, as the engine's CUDA
// forward pass launches them (`engine/src/cuda/forward.rs`): row gathers (the embedding lookup
// and the rows the head reads), RMSNorm, RoPE, the SiLU gate, the bias add, the f32 -> bf16/f16
// narrowing of a matmul's input, and the deterministic random fill of a benchmark model.
//
// Activations are f32 `[rows, width]` row-major; tables are f32, f16 or bf16 (`<dtype>`).
// Launchers: `ponder_kernels::cuda` (`src/cuda/decoder_ops.rs`), which check every length on
// the host; the device still skips a row or position index past its table (so a bad index can
// leave a row unwritten, never read or write outside a buffer).
//
// CPU references (`ponder_kernels::decoder_ops`): `gather_rows`, `rms_norm`, `rope`,
// `math::silu_mul`, `add_bias`, `KvElem::from_f32`, `random_uniform`. Products and sums are
// written with `__fmul_rn` / `__fadd_rn` where the CPU's bits are the contract (RoPE, the random
// fill): nvcc contracts `a * b + c` into one fused multiply-add by default, the CPU never does.
// RMSNorm sums in a tree and `expf` is CUDA's, so those two agree with the CPU within float
// tolerance, not bitwise.
#include "common.cuh"

namespace ponder {

// Threads per CTA of `rms_norm` (the size of its reduction array).
constexpr unsigned NORM_THREADS = 256;

// out[r, :] = table[rows[r], :] widened to f32; a row index >= table_rows is skipped.
template <typename T>
__device__ void gather_rows(const T* __restrict__ table, const uint32_t* __restrict__ rows,
                            float* __restrict__ out, uint32_t n, uint32_t width,
                            uint32_t table_rows) {
  const uint32_t r = blockIdx.x;
  if (r >= n) return;
  const uint32_t src = rows[r];
  if (src >= table_rows) return;
  const T* row = table + (uint64_t)src * width;
  float* dst = out + (uint64_t)r * width;
  for (uint32_t i = threadIdx.x; i < width; i += blockDim.x) dst[i] = to_f32(row[i]);
}

// out[i] = x[i] narrowed to T (round to nearest, ties to even).
template <typename T>
__device__ void from_f32_n(const float* __restrict__ x, T* __restrict__ out, uint64_t n) {
  const uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = from_f32<T>(x[i]);
}

// A uniform value in [-1, 1) from (seed, i): splitmix64's finaliser over `seed * golden + i`,
// its top 24 bits as a fraction. CPU twin: `decoder_ops::random_uniform`.
__device__ __forceinline__ float random_uniform(uint64_t seed, uint64_t i) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + i + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  const float unit = __fmul_rn((float)(z >> 40), 1.0f / 16777216.0f);
  return __fsub_rn(__fmul_rn(unit, 2.0f), 1.0f);
}

// out[i] = random_uniform(seed, i) * scale, narrowed to T.
template <typename T>
__device__ void fill_random(T* __restrict__ out, uint64_t n, uint64_t seed, float scale) {
  const uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = from_f32<T>(__fmul_rn(random_uniform(seed, i), scale));
}

}  // namespace ponder

#define PONDER_DECODER_OPS(DTYPE, T)                                                         \
  extern "C" __global__ void gather_rows_##DTYPE(const T* table, const uint32_t* rows,      \
                                                  float* out, uint32_t n, uint32_t width,   \
                                                  uint32_t table_rows) {                    \
    ponder::gather_rows<T>(table, rows, out, n, width, table_rows);                          \
  }                                                                                          \
  extern "C" __global__ void from_f32_##DTYPE(const float* x, T* out, uint64_t n) {          \
    ponder::from_f32_n<T>(x, out, n);                                                        \
  }                                                                                          \
  extern "C" __global__ void fill_random_##DTYPE(T* out, uint64_t n, uint64_t seed,          \
                                                  float scale) {                            \
    ponder::fill_random<T>(out, n, seed, scale);                                             \
  }

PONDER_DECODER_OPS(f32, float)
PONDER_DECODER_OPS(f16, __half)
PONDER_DECODER_OPS(bf16, __nv_bfloat16)

// RMSNorm of each row, as candle computes it: x / sqrt(mean(x^2) + eps) * w. One CTA of
// NORM_THREADS per row; the sum of squares is a tree over the CTA's threads.
extern "C" __global__ void __launch_bounds__(ponder::NORM_THREADS)
    rms_norm(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ out,
             uint32_t rows, uint32_t width, float eps) {
  __shared__ float partial[ponder::NORM_THREADS];
  const uint32_t r = blockIdx.x;
  if (r >= rows || blockDim.x != ponder::NORM_THREADS) return;
  const float* row = x + (uint64_t)r * width;
  float sum = 0.f;
  for (uint32_t i = threadIdx.x; i < width; i += blockDim.x)
    sum = __fadd_rn(sum, __fmul_rn(row[i], row[i]));
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (uint32_t s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  const float scale = 1.f / sqrtf(partial[0] / (float)width + eps);
  float* dst = out + (uint64_t)r * width;
  for (uint32_t i = threadIdx.x; i < width; i += blockDim.x) dst[i] = row[i] * scale * w[i];
}

// Rotary embedding in place on token-major rows [tokens, heads, 2 * half], token t at position
// pos[t]; cos/sin are [context, half]. Pairs (2i, 2i+1) when `interleaved`, else (i, i + half).
// A position >= context leaves its token unrotated. Bitwise the CPU's `decoder_ops::rope`.
extern "C" __global__ void rope(float* __restrict__ x, const uint32_t* __restrict__ pos,
                                const float* __restrict__ cos_t, const float* __restrict__ sin_t,
                                uint32_t tokens, uint32_t heads, uint32_t half,
                                uint32_t interleaved, uint32_t context) {
  const uint64_t idx = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const uint64_t total = (uint64_t)tokens * heads * half;
  if (idx >= total) return;
  const uint32_t i = (uint32_t)(idx % half);
  const uint64_t th = idx / half;  // token * heads + head
  const uint32_t p = pos[th / heads];
  if (p >= context) return;
  float* head = x + th * 2 * half;
  const uint32_t a = interleaved ? 2 * i : i;
  const uint32_t b = interleaved ? 2 * i + 1 : i + half;
  const float c = cos_t[(uint64_t)p * half + i];
  const float s = sin_t[(uint64_t)p * half + i];
  const float x0 = head[a], x1 = head[b];
  head[a] = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
  head[b] = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
}

// g = silu(g) * u, with candle's silu: x / (1 + exp(-x)).
extern "C" __global__ void silu_mul(float* __restrict__ g, const float* __restrict__ u,
                                    uint64_t n) {
  const uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float x = g[i];
  g[i] = x / (1.f + expf(-x)) * u[i];
}

// y[r, c] += b[c].
extern "C" __global__ void add_bias(float* __restrict__ y, const float* __restrict__ b,
                                    uint32_t rows, uint32_t cols) {
  const uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= (uint64_t)rows * cols) return;
  y[i] += b[i % cols];
}
