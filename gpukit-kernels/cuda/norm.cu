// Normalisations over the last axis of [rows, hidden], one 256-thread block per row, f32
// accumulation, deterministic block reductions.
//
// rms_norm:   out = x / sqrt(mean(x^2) + eps) * w                (Zhang & Sennrich 2019)
// layer_norm: out = (x - mean) / sqrt(var + eps) * w + b         (Ba et al. 2016; biased var)
// add_rms_norm: h = x + residual (rounded to the dtype, as a model stores it); residual_out = h;
//               out = rms_norm(h) * w  — the fused residual step of a pre-norm transformer.
#include "common.cuh"

#define NORM_KERNELS(T, NAME)                                                                      \
extern "C" __global__ void rms_norm_##NAME(const T* __restrict__ x, const T* __restrict__ w,        \
        T* __restrict__ out, unsigned int hidden, float eps) {                                     \
    __shared__ float scratch[256];                                                                 \
    unsigned long long base = (unsigned long long)blockIdx.x * hidden;                             \
    float ss = 0.0f;                                                                               \
    for (unsigned int i = threadIdx.x; i < hidden; i += blockDim.x) {                              \
        float v = to_f32(x[base + i]); ss += v * v;                                                \
    }                                                                                              \
    ss = block_sum(ss, scratch);                                                                   \
    float inv = rsqrtf(ss / (float)hidden + eps);                                                  \
    for (unsigned int i = threadIdx.x; i < hidden; i += blockDim.x)                                \
        out[base + i] = from_f32<T>(to_f32(x[base + i]) * inv * to_f32(w[i]));                     \
}                                                                                                  \
extern "C" __global__ void add_rms_norm_##NAME(const T* __restrict__ x,                            \
        const T* __restrict__ residual, const T* __restrict__ w, T* __restrict__ out,              \
        T* __restrict__ residual_out, unsigned int hidden, float eps) {                            \
    __shared__ float scratch[256];                                                                 \
    unsigned long long base = (unsigned long long)blockIdx.x * hidden;                             \
    float ss = 0.0f;                                                                               \
    for (unsigned int i = threadIdx.x; i < hidden; i += blockDim.x) {                              \
        T h = from_f32<T>(to_f32(x[base + i]) + to_f32(residual[base + i]));                       \
        residual_out[base + i] = h;                                                                \
        float v = to_f32(h); ss += v * v;                                                          \
    }                                                                                              \
    ss = block_sum(ss, scratch);                                                                   \
    float inv = rsqrtf(ss / (float)hidden + eps);                                                  \
    for (unsigned int i = threadIdx.x; i < hidden; i += blockDim.x)                                \
        out[base + i] = from_f32<T>(to_f32(residual_out[base + i]) * inv * to_f32(w[i]));          \
}                                                                                                  \
extern "C" __global__ void layer_norm_##NAME(const T* __restrict__ x, const T* __restrict__ w,      \
        const T* __restrict__ b, T* __restrict__ out, unsigned int hidden, float eps, int has_bias) { \
    __shared__ float scratch[256];                                                                 \
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
