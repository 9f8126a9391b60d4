// Normalisations over the last axis of [rows, hidden], f32 accumulation, deterministic
// reductions.
//
// rms_norm:   out = x / sqrt(mean(x^2) + eps) * w                (Zhang & Sennrich 2019)
// layer_norm: out = (x - mean) / sqrt(var + eps) * w + b         (Ba et al. 2016; biased var)
// add_rms_norm: h = x + residual (rounded to the dtype, as a model stores it); residual_out = h;
//               out = rms_norm(h) * w  — the fused residual step of a pre-norm transformer.
//
// rms_norm and add_rms_norm split a block into groups of `group` threads (a power of two, 32 to
// blockDim), one row per group, each lane holding NORM_VEC 16-byte vectors of its row. Two
// vectors per lane keep the kernels at 32 registers (full occupancy: 2048 threads, 64 KiB of
// loads in flight per SM); a sweep on an H200 put one vector at
// 73-77% of copy and four (55 registers) at or below two. layer_norm runs one block per row.
#include "common.cuh"

// NORM_VEC: 16-byte vectors each lane keeps in registers on the fast path, so the row is read
// from memory exactly once. The host (gpukit_kernels::norm::rows) picks `group` so that a row
// needs at most this many per lane.

// The sum of v over each group of `group` threads (a power of two, 32 to blockDim.x, uniform
// across the block), in every thread of the group: warp_sum, or warps_sum over the group's warps
// (with group == blockDim.x exactly block_sum). Every thread of the block must call it.
__device__ __forceinline__ float group_sum(float v, unsigned int group, float* scratch) {
    if (group <= 32) return warp_sum(v);
    return warps_sum(v, (threadIdx.x & ~(group - 1)) >> 5, group >> 5, scratch);
}

// rms_norm of the rows of this block (RES: with the residual add), one per group of `group`
// threads; rows past `rows` are skipped (their threads still join the group sums). Fast path:
// 16-byte vectors, each lane's part of the row loaded at once and kept in registers between the
// sum of squares and the scaling. Otherwise: a scalar loop reading the row twice.
template <typename T, bool RES>
__device__ __forceinline__ void rms_norm_rows(const T* __restrict__ x, const T* __restrict__ res,
        const T* __restrict__ w, T* __restrict__ out, T* __restrict__ res_out, unsigned int rows,
        unsigned int hidden, unsigned int group, float eps, float* scratch) {
    const int V = Vec16<T>::N;
    const unsigned int nvec = hidden / V;
    // Uniform across the block: only the base pointers' alignment and hidden decide it.
    const bool fast = hidden % V == 0 && nvec <= group * NORM_VEC && aligned16(x) && aligned16(w) &&
                      aligned16(out) && (!RES || (aligned16(res) && aligned16(res_out)));
    const unsigned int t = threadIdx.x & (group - 1);
    const unsigned long long row = (unsigned long long)blockIdx.x * (blockDim.x / group) + threadIdx.x / group;
    const bool valid = row < rows;
    const unsigned long long base = valid ? row * hidden : 0;
    x += base;
    out += base;
    if (RES) {
        res += base;
        res_out += base;
    }
    if (fast) {
        Pack<T> cache[NORM_VEC];
#pragma unroll
        for (int c = 0; c < NORM_VEC; ++c) {
            const unsigned int idx = t + c * group;
            if (valid && idx < nvec) cache[c] = load16(x + idx * V);
        }
        if (RES) {
#pragma unroll
            for (int c = 0; c < NORM_VEC; ++c) {
                const unsigned int idx = t + c * group;
                if (valid && idx < nvec) {
                    const Pack<T> r = load16(res + idx * V);
#pragma unroll
                    for (int j = 0; j < V; ++j) cache[c].v[j] = from_f32<T>(to_f32(cache[c].v[j]) + to_f32(r.v[j]));
                    store16(res_out + idx * V, cache[c]);
                }
            }
        }
        float ss = 0.0f;
#pragma unroll
        for (int c = 0; c < NORM_VEC; ++c) {
            const unsigned int idx = t + c * group;
            if (valid && idx < nvec) {
#pragma unroll
                for (int j = 0; j < V; ++j) { const float f = to_f32(cache[c].v[j]); ss += f * f; }
            }
        }
        const float inv = rsqrtf(group_sum(ss, group, scratch) / (float)hidden + eps);
#pragma unroll
        for (int c = 0; c < NORM_VEC; ++c) {
            const unsigned int idx = t + c * group;
            if (valid && idx < nvec) {
                const Pack<T> wv = load16(w + idx * V);
                Pack<T> o;
#pragma unroll
                for (int j = 0; j < V; ++j) o.v[j] = from_f32<T>(to_f32(cache[c].v[j]) * inv * to_f32(wv.v[j]));
                store16(out + idx * V, o);
            }
        }
        return;
    }
    float ss = 0.0f;
    for (unsigned int i = t; valid && i < hidden; i += group) {
        float v;
        if (RES) {
            const T h = from_f32<T>(to_f32(x[i]) + to_f32(res[i]));
            res_out[i] = h;
            v = to_f32(h);
        } else {
            v = to_f32(x[i]);
        }
        ss += v * v;
    }
    const float inv = rsqrtf(group_sum(ss, group, scratch) / (float)hidden + eps);
    for (unsigned int i = t; valid && i < hidden; i += group) {
        const float v = RES ? to_f32(res_out[i]) : to_f32(x[i]);
        out[i] = from_f32<T>(v * inv * to_f32(w[i]));
    }
}

#define NORM_KERNELS(T, NAME)                                                                      \
extern "C" __global__ void __launch_bounds__(1024, 2)                                              \
rms_norm_##NAME(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ out,             \
        unsigned int rows, unsigned int hidden, unsigned int group, float eps) {                   \
    pdl_enter();                                                                                   \
    __shared__ float scratch[32];                                                                  \
    rms_norm_rows<T, false>(x, nullptr, w, out, nullptr, rows, hidden, group, eps, scratch);       \
}                                                                                                  \
extern "C" __global__ void __launch_bounds__(1024, 2)                                              \
add_rms_norm_##NAME(const T* __restrict__ x, const T* __restrict__ residual,                       \
        const T* __restrict__ w, T* __restrict__ out, T* __restrict__ residual_out,                \
        unsigned int rows, unsigned int hidden, unsigned int group, float eps) {                   \
    pdl_enter();                                                                                   \
    __shared__ float scratch[32];                                                                  \
    rms_norm_rows<T, true>(x, residual, w, out, residual_out, rows, hidden, group, eps, scratch);  \
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
