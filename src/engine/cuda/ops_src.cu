// Elementwise and row kernels of the engine's CUDA forward pass (src/engine/cuda/ops.rs),
// compiled at run time by NVRTC: no headers, bf16 handled as raw 16-bit patterns.
// Activations are f32; weights and embeddings are f32 or bf16 (`unsigned short`).

__device__ __forceinline__ float bf16_to_f32(unsigned short x) {
    return __uint_as_float(((unsigned int)x) << 16);
}

__device__ __forceinline__ unsigned short f32_to_bf16(float f) {
    unsigned int u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);  // NaN
    u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even
    return (unsigned short)(u >> 16);
}

// out[t, :] = table[ids[t], :] as f32.
extern "C" __global__ void embed_f32(const float* table, const unsigned int* ids, float* out,
                                     unsigned int tokens, unsigned int hidden) {
    unsigned int t = blockIdx.x;
    if (t >= tokens) return;
    const float* row = table + (unsigned long long)ids[t] * hidden;
    for (unsigned int i = threadIdx.x; i < hidden; i += blockDim.x) out[(unsigned long long)t * hidden + i] = row[i];
}

extern "C" __global__ void embed_bf16(const unsigned short* table, const unsigned int* ids, float* out,
                                      unsigned int tokens, unsigned int hidden) {
    unsigned int t = blockIdx.x;
    if (t >= tokens) return;
    const unsigned short* row = table + (unsigned long long)ids[t] * hidden;
    for (unsigned int i = threadIdx.x; i < hidden; i += blockDim.x)
        out[(unsigned long long)t * hidden + i] = bf16_to_f32(row[i]);
}

// out[r, :] = x[rows[r], :] (rows of the residual stream read by the head).
extern "C" __global__ void gather_rows(const float* x, const unsigned int* rows, float* out,
                                       unsigned int n, unsigned int hidden) {
    unsigned int r = blockIdx.x;
    if (r >= n) return;
    const float* src = x + (unsigned long long)rows[r] * hidden;
    for (unsigned int i = threadIdx.x; i < hidden; i += blockDim.x) out[(unsigned long long)r * hidden + i] = src[i];
}

// RMSNorm of each row, as candle's: x / sqrt(mean(x^2) + eps) * w. One CTA of 256 per row.
extern "C" __global__ void rms_norm(const float* x, const float* w, float* out, unsigned int rows,
                                    unsigned int hidden, float eps) {
    __shared__ float partial[256];
    unsigned int r = blockIdx.x;
    if (r >= rows) return;
    const float* row = x + (unsigned long long)r * hidden;
    float sum = 0.f;
    for (unsigned int i = threadIdx.x; i < hidden; i += blockDim.x) sum += row[i] * row[i];
    partial[threadIdx.x] = sum;
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
        __syncthreads();
    }
    float scale = 1.f / sqrtf(partial[0] / (float)hidden + eps);
    for (unsigned int i = threadIdx.x; i < hidden; i += blockDim.x)
        out[(unsigned long long)r * hidden + i] = row[i] * scale * w[i];
}

// Rotary embedding in place on token-major rows [tokens, heads, 2 * half], token t at position
// pos[t]; cos/sin are [context, half]. Interleaved pairs (2i, 2i+1) or halves (i, i + half).
extern "C" __global__ void rope(float* x, const unsigned int* pos, const float* cos_t, const float* sin_t,
                                unsigned int tokens, unsigned int heads, unsigned int half,
                                unsigned int interleaved) {
    unsigned long long idx = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned long long total = (unsigned long long)tokens * heads * half;
    if (idx >= total) return;
    unsigned int i = (unsigned int)(idx % half);
    unsigned long long th = idx / half;  // token * heads + head
    unsigned int t = (unsigned int)(th / heads);
    float* head = x + th * 2 * half;
    unsigned int a = interleaved ? 2 * i : i;
    unsigned int b = interleaved ? 2 * i + 1 : i + half;
    float c = cos_t[(unsigned long long)pos[t] * half + i];
    float s = sin_t[(unsigned long long)pos[t] * half + i];
    float x0 = head[a], x1 = head[b];
    head[a] = x0 * c - x1 * s;
    head[b] = x0 * s + x1 * c;
}

// g = silu(g) * u, as candle's silu: x / (1 + exp(-x)).
extern "C" __global__ void silu_mul(float* g, const float* u, unsigned long long n) {
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = g[i];
    g[i] = x / (1.f + expf(-x)) * u[i];
}

// y[r, c] += b[c].
extern "C" __global__ void add_bias(float* y, const float* b, unsigned int rows, unsigned int cols) {
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (unsigned long long)rows * cols) return;
    y[i] += b[i % cols];
}

extern "C" __global__ void cast_f32_bf16(const float* x, unsigned short* out, unsigned long long n) {
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[i] = f32_to_bf16(x[i]);
}

// Deterministic uniform values in [-scale, scale) from a hash of (seed, index): a random model
// generated on the device for benchmarks.
__device__ __forceinline__ float hash_uniform(unsigned long long seed, unsigned long long i) {
    unsigned long long z = seed * 0x9E3779B97F4A7C15ull + i + 0x632BE59BD9B4E019ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (float)(z >> 40) * (1.0f / 16777216.0f) * 2.f - 1.f;
}

extern "C" __global__ void fill_random_bf16(unsigned short* out, unsigned long long n, unsigned long long seed,
                                            float scale) {
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[i] = f32_to_bf16(hash_uniform(seed, i) * scale);
}

extern "C" __global__ void fill_random_f32(float* out, unsigned long long n, unsigned long long seed, float scale) {
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[i] = hash_uniform(seed, i) * scale;
}
