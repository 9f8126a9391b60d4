// Normalisations over the last axis of [rows, hidden], one 256-thread block per row, f32
// accumulation, deterministic block reductions.
//
// rms_norm:   out = x / sqrt(mean(x^2) + eps) * w                (Zhang & Sennrich 2019)
// layer_norm: out = (x - mean) / sqrt(var + eps) * w + b         (Ba et al. 2016; biased var)
// add_rms_norm: h = x + residual (rounded to the dtype, as a model stores it); residual_out = h;
//               out = rms_norm(h) * w  — the fused residual step of a pre-norm transformer.
#include "common.cuh"

// 16-byte vectors each thread keeps in registers on the fast path (256 threads: hidden up to
// 8192 bf16/f16 or 4096 f32 per row is read from memory exactly once).
#define NORM_MAX_VEC 4

__device__ __forceinline__ bool aligned16(const void* p) {
    return ((unsigned long long)p & 15ull) == 0;
}

// One row of rms_norm (RES: with the residual add). Fast path: vector loads, the row cached in
// registers between the sum of squares and the scaling. Otherwise: a scalar loop reading twice.
template <typename T, bool RES>
__device__ __forceinline__ void rms_norm_row(const T* __restrict__ x, const T* __restrict__ res,
        const T* __restrict__ w, T* __restrict__ out, T* __restrict__ res_out,
        unsigned int hidden, float eps, float* scratch) {
    const int V = Vec16<T>::N;
    const unsigned int nvec = hidden / V;
    const bool fast = hidden % V == 0 && nvec <= blockDim.x * NORM_MAX_VEC && aligned16(x) &&
                      aligned16(w) && aligned16(out) && (!RES || (aligned16(res) && aligned16(res_out)));
    if (fast) {
        Pack<T> cache[NORM_MAX_VEC];
        float ss = 0.0f;
#pragma unroll
        for (int c = 0; c < NORM_MAX_VEC; ++c) {
            const unsigned int idx = threadIdx.x + c * blockDim.x;
            if (idx < nvec) {
                Pack<T> p = load16(x + idx * V);
                if (RES) {
                    Pack<T> r = load16(res + idx * V);
#pragma unroll
                    for (int j = 0; j < V; ++j) p.v[j] = from_f32<T>(to_f32(p.v[j]) + to_f32(r.v[j]));
                    store16(res_out + idx * V, p);
                }
                cache[c] = p;
#pragma unroll
                for (int j = 0; j < V; ++j) { float f = to_f32(p.v[j]); ss += f * f; }
            }
        }
        const float inv = rsqrtf(block_sum(ss, scratch) / (float)hidden + eps);
#pragma unroll
        for (int c = 0; c < NORM_MAX_VEC; ++c) {
            const unsigned int idx = threadIdx.x + c * blockDim.x;
            if (idx < nvec) {
                Pack<T> wv = load16(w + idx * V), o;
#pragma unroll
                for (int j = 0; j < V; ++j) o.v[j] = from_f32<T>(to_f32(cache[c].v[j]) * inv * to_f32(wv.v[j]));
                store16(out + idx * V, o);
            }
        }
        return;
    }
    float ss = 0.0f;
    for (unsigned int i = threadIdx.x; i < hidden; i += blockDim.x) {
        float v;
        if (RES) {
            T h = from_f32<T>(to_f32(x[i]) + to_f32(res[i]));
            res_out[i] = h;
            v = to_f32(h);
        } else {
            v = to_f32(x[i]);
        }
        ss += v * v;
    }
    const float inv = rsqrtf(block_sum(ss, scratch) / (float)hidden + eps);
    for (unsigned int i = threadIdx.x; i < hidden; i += blockDim.x) {
        const float v = RES ? to_f32(res_out[i]) : to_f32(x[i]);
        out[i] = from_f32<T>(v * inv * to_f32(w[i]));
    }
}

#define NORM_KERNELS(T, NAME)                                                                      \
extern "C" __global__ void rms_norm_##NAME(const T* __restrict__ x, const T* __restrict__ w,        \
        T* __restrict__ out, unsigned int hidden, float eps) {                                     \
    pdl_enter();                                                                                   \
    __shared__ float scratch[32];                                                                  \
    unsigned long long base = (unsigned long long)blockIdx.x * hidden;                             \
    rms_norm_row<T, false>(x + base, nullptr, w, out + base, nullptr, hidden, eps, scratch);       \
}                                                                                                  \
extern "C" __global__ void add_rms_norm_##NAME(const T* __restrict__ x,                            \
        const T* __restrict__ residual, const T* __restrict__ w, T* __restrict__ out,              \
        T* __restrict__ residual_out, unsigned int hidden, float eps) {                            \
    pdl_enter();                                                                                   \
    __shared__ float scratch[32];                                                                  \
    unsigned long long base = (unsigned long long)blockIdx.x * hidden;                             \
    rms_norm_row<T, true>(x + base, residual + base, w, out + base, residual_out + base, hidden,   \
                          eps, scratch);                                                           \
}                                                                                                  \
extern "C" __global__ void layer_norm_##NAME(const T* __restrict__ x, const T* __restrict__ w,      \
        const T* __restrict__ b, T* __restrict__ out, unsigned int hidden, float eps, int has_bias) { \
    pdl_enter();                                                                                      \
    __shared__ float scratch[32];                                                                  \
    unsigned long long base = (unsigned long long)blockIdx.x * hidden;                             \
    float s = 0.0f;                                                                                \
    for (unsigned int i = threadIdx.x; i < hidden; i += blockDim.x) s += to_f32(x[base + i]);     \
    float mean = block_sum(s, scratch) / (float)hidden;                                            \
    float v2 = 0.0f;                                                                               \
    for (unsigned int i = threadIdx.x; i < hidden; i += blockDim.x) {                              \
        float d = to_f32(x[base + i]) - mean; v2 += d * d;                                         \
    }                                                                                              \
    float inv = rsqrtf(block_sum(v2, scratch) / (float)hidden + eps);                              \
    for (unsigned int i = threadIdx.x; i < hidden; i += blockDim.x) {                              \
        float y = (to_f32(x[base + i]) - mean) * inv * to_f32(w[i]);                               \
        if (has_bias) y += to_f32(b[i]);                                                           \
        out[base + i] = from_f32<T>(y);                                                            \
    }                                                                                              \
}

NORM_KERNELS(float, f32)
NORM_KERNELS(f16, f16)
NORM_KERNELS(bf16, bf16)
