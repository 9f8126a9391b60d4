// Reductions and softmax over one axis of a contiguous tensor viewed as [outer, len, inner].
//
// Deterministic: every thread accumulates its elements in a fixed order and partial results are
// combined in a fixed shared-memory tree (block_reduce, also for softmax's max and sum),
// so results are bitwise reproducible for a given shape. `_rows` kernels (inner == 1) use one
// BLOCK_THREADS-thread block per row; `_cols` kernels use one thread per (outer, inner) pair walking the
// axis sequentially (coalesced across inner).
#include "common.cuh"

// NaN-propagating max/min (like torch.max).
__device__ __forceinline__ float nan_max(float a, float b) { return (a != a || a > b) ? a : b; }
__device__ __forceinline__ float nan_min(float a, float b) { return (a != a || a < b) ? a : b; }

__device__ __forceinline__ float r_init(int op) {
    return op == R_MAX ? -GPUKIT_INF : (op == R_MIN ? GPUKIT_INF : 0.0f);
}
__device__ __forceinline__ float r_step(int op, float acc, float v) {
    return op == R_MAX ? nan_max(acc, v) : (op == R_MIN ? nan_min(acc, v) : acc + v);
}

__device__ __forceinline__ float block_reduce(int op, float v, float* scratch) {
    scratch[threadIdx.x] = v;
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) scratch[threadIdx.x] = r_step(op, scratch[threadIdx.x], scratch[threadIdx.x + s]);
        __syncthreads();
    }
    float r = scratch[0];
    __syncthreads();
    return r;
}

#define REDUCE_KERNELS(T, NAME)                                                                    \
extern "C" __global__ void reduce_##NAME##_rows(int op, const T* __restrict__ x,                   \
        T* __restrict__ out, unsigned int len) {                                                   \
    __shared__ float scratch[BLOCK_THREADS];                                                       \
    const T* row = x + (unsigned long long)blockIdx.x * len;                                       \
    float acc = r_init(op);                                                                        \
    for (unsigned int i = threadIdx.x; i < len; i += blockDim.x) acc = r_step(op, acc, to_f32(row[i])); \
    acc = block_reduce(op, acc, scratch);                                                          \
    if (threadIdx.x == 0) out[blockIdx.x] = from_f32<T>(op == R_MEAN ? acc / (float)len : acc);   \
}                                                                                                  \
extern "C" __global__ void reduce_##NAME##_cols(int op, const T* __restrict__ x,                   \
        T* __restrict__ out, unsigned int outer, unsigned int len, unsigned int inner) {           \
    unsigned long long t = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;              \
    if (t >= (unsigned long long)outer * inner) return;                                            \
    unsigned long long o = t / inner, in = t % inner;                                              \
    const T* base = x + o * len * inner + in;                                                      \
    float acc = r_init(op);                                                                        \
    for (unsigned int i = 0; i < len; ++i) acc = r_step(op, acc, to_f32(base[(unsigned long long)i * inner])); \
    out[t] = from_f32<T>(op == R_MEAN ? acc / (float)len : acc);                                   \
}                                                                                                  \
/* First index of the maximum (NaN counts as the maximum, like torch.argmax). */                   \
extern "C" __global__ void argmax_##NAME##_rows(const T* __restrict__ x, i64* __restrict__ out,    \
        unsigned int len) {                                                                        \
    __shared__ float sv[BLOCK_THREADS];                                                            \
    __shared__ unsigned int si[BLOCK_THREADS];                                                     \
    const T* row = x + (unsigned long long)blockIdx.x * len;                                       \
    float best = -GPUKIT_INF; unsigned int bi = GPUKIT_NO_INDEX;                                     \
    argmax_scan<8>(best, bi, threadIdx.x, blockDim.x, len, [&](unsigned int i) { return to_f32(row[i]); }); \
    sv[threadIdx.x] = best; si[threadIdx.x] = bi;                                                  \
    __syncthreads();                                                                               \
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {                                        \
        if (threadIdx.x < s) {                                                                     \
            argmax_merge(best, bi, sv[threadIdx.x + s], si[threadIdx.x + s]);                      \
            sv[threadIdx.x] = best; si[threadIdx.x] = bi;                                          \
        }                                                                                          \
        __syncthreads();                                                                           \
    }                                                                                              \
    if (threadIdx.x == 0) out[blockIdx.x] = (i64)si[0];                                            \
}                                                                                                  \
extern "C" __global__ void argmax_##NAME##_cols(const T* __restrict__ x, i64* __restrict__ out,    \
        unsigned int outer, unsigned int len, unsigned int inner) {                                \
    unsigned long long t = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;              \
    if (t >= (unsigned long long)outer * inner) return;                                            \
    unsigned long long o = t / inner, in = t % inner;                                              \
    const T* base = x + o * len * inner + in;                                                      \
    float best = to_f32(base[0]); unsigned int bi = 0;                                             \
    for (unsigned int i = 1; i < len; ++i) argmax_merge(best, bi, to_f32(base[(unsigned long long)i * inner]), i); \
    out[t] = (i64)bi;                                                                              \
}                                                                                                  \
/* softmax (or log-softmax with `log`) along the row. */                                           \
extern "C" __global__ void softmax_##NAME##_rows(const T* __restrict__ x, T* __restrict__ out,     \
        unsigned int len, int log) {                                                               \
    __shared__ float scratch[BLOCK_THREADS];                                                       \
    unsigned long long base = (unsigned long long)blockIdx.x * len;                                \
    float m = -GPUKIT_INF;                                                                           \
    for (unsigned int i = threadIdx.x; i < len; i += blockDim.x) m = nan_max(m, to_f32(x[base + i])); \
    m = block_reduce(R_MAX, m, scratch);                                                           \
    float s = 0.0f;                                                                                \
    for (unsigned int i = threadIdx.x; i < len; i += blockDim.x) s += expf(to_f32(x[base + i]) - m); \
    s = block_reduce(R_SUM, s, scratch);                                                           \
    float ls = logf(s), inv = 1.0f / s;                                                            \
    for (unsigned int i = threadIdx.x; i < len; i += blockDim.x) {                                 \
        float v = to_f32(x[base + i]) - m;                                                         \
        out[base + i] = from_f32<T>(log ? v - ls : expf(v) * inv);                                 \
    }                                                                                              \
}                                                                                                  \
extern "C" __global__ void softmax_##NAME##_cols(const T* __restrict__ x, T* __restrict__ out,     \
        unsigned int outer, unsigned int len, unsigned int inner, int log) {                       \
    unsigned long long t = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;              \
    if (t >= (unsigned long long)outer * inner) return;                                            \
    unsigned long long o = t / inner, in = t % inner;                                              \
    unsigned long long b = o * len * inner + in;                                                   \
    float m = -GPUKIT_INF;                                                                           \
    for (unsigned int i = 0; i < len; ++i) m = nan_max(m, to_f32(x[b + (unsigned long long)i * inner])); \
    float s = 0.0f;                                                                                \
    for (unsigned int i = 0; i < len; ++i) s += expf(to_f32(x[b + (unsigned long long)i * inner]) - m); \
    float ls = logf(s), inv = 1.0f / s;                                                            \
    for (unsigned int i = 0; i < len; ++i) {                                                       \
        float v = to_f32(x[b + (unsigned long long)i * inner]) - m;                                \
        out[b + (unsigned long long)i * inner] = from_f32<T>(log ? v - ls : expf(v) * inv);        \
    }                                                                                              \
}

REDUCE_KERNELS(float, f32)
REDUCE_KERNELS(f16, f16)
REDUCE_KERNELS(bf16, bf16)
