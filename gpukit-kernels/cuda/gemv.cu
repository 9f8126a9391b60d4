// GEMV for the decode path: out[m, n] = sum_k x[m, k] * w[n, k] (+ bias[n]) for M <= 8 rows of
// x, weights stored [N, K] (a linear layer's natural layout).
//
// Memory-bound: every weight byte is read once. A 256-thread block computes R output columns,
// each by W = 8 / R warps that split K between them (R is chosen on the host so every SM is
// full). Each lane issues UNROLL = 4 16-byte weight loads (8 bf16/f16 or 4 f32) before using
// any, so many loads are in flight. x (M x K, small) is read through L1. Per-warp partial sums
// are combined with a fixed butterfly (warp_sum) and then across the row's warps in a fixed
// order, so the result is deterministic for a given R. `_vec` needs K % VEC == 0 and 16-byte
// aligned rows; the plain variant handles any K. `gemv_swiglu` fuses SwiGLU's gate and up
// projections with silu(gate)·up. `gemv_norm` / `gemv_swiglu_norm` / `gemv_norm_argmax` (the
// decode step's pre-norm projections) first compute the residual add and RMSNorm of their input
// row themselves, then stream the weights one warp per row; the argmax variant also reduces the
// LM head's logits to one first maximum per block for greedy sampling. Every kernel here
// supports programmatic dependent launch: it prefetches its weights into L2, then waits for the
// previous kernel.
#include "common.cuh"

#define GEMV_MAX_M 8

// A 16-byte weight load marked streaming (evict-first): weights are read once per step.
template <typename T> __device__ __forceinline__ Pack<T> load16_stream(const T* p) {
    uint4 r;
    asm("ld.global.cs.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
    return *reinterpret_cast<Pack<T>*>(&r);
}

// One weight row's dot products with the M rows of x, this warp's share of it: warp `wi` of the
// W warps splitting the row. MAXM: rows of x handled (1 for the decode fast path, GEMV_MAX_M
// otherwise); UNROLL: 16-byte weight loads each lane issues before using any of them. Measured
// on an H100 (docs/RESULTS.md): 4 loads at ~53 registers (4 blocks per SM) stream faster than 8
// loads at 80+ registers (2-3 blocks per SM) — occupancy hides latency better than per-thread
// depth here.
template <typename T, bool VEC, int MAXM, int UNROLL>
__device__ __forceinline__ void row_dot(const T* __restrict__ x, const T* __restrict__ wr,
                                        unsigned int M, unsigned int K, unsigned int W,
                                        unsigned int wi, unsigned int lane, float* acc) {
    if (VEC) {
        const int V = Vec16<T>::N;
        const unsigned int step = W * 32 * V;
        for (unsigned int k0 = (wi * 32 + lane) * V; k0 < K; k0 += step * UNROLL) {
            Pack<T> wv[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                const unsigned int k = k0 + u * step;
                if (k < K) wv[u] = load16_stream(wr + k);
            }
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                const unsigned int k = k0 + u * step;
                if (k < K) {
#pragma unroll
                    for (int m = 0; m < MAXM; ++m) {
                        if (m < (int)M) {
                            Pack<T> xv = load16(x + (unsigned long long)m * K + k);
                            float s = 0.0f;
#pragma unroll
                            for (int j = 0; j < V; ++j) s = fmaf(to_f32(xv.v[j]), to_f32(wv[u].v[j]), s);
                            acc[m] += s;
                        }
                    }
                }
            }
        }
    } else {
        for (unsigned int k = wi * 32 + lane; k < K; k += W * 32) {
            float wk = to_f32(wr[k]);
#pragma unroll
            for (int m = 0; m < MAXM; ++m)
                if (m < (int)M) acc[m] = fmaf(to_f32(x[(unsigned long long)m * K + k]), wk, acc[m]);
        }
    }
}

// One warp's dot products of x with two whole weight rows at once (SwiGLU's gate and up rows):
// 2 × UNROLL 16-byte loads in flight per lane, so a warp owning a few outputs waits on memory
// half as many times as two row_dot calls would. Sums per 16-byte pack, as row_dot.
template <typename T, int UNROLL>
__device__ __forceinline__ void row_dot2(const T* __restrict__ x, const T* __restrict__ wa,
                                         const T* __restrict__ wb, unsigned int K,
                                         unsigned int lane, float& a, float& b) {
    const int V = Vec16<T>::N;
    const unsigned int step = 32 * V;
    for (unsigned int k0 = lane * V; k0 < K; k0 += step * UNROLL) {
        Pack<T> va[UNROLL], vb[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const unsigned int k = k0 + u * step;
            if (k < K) {
                va[u] = load16_stream(wa + k);
                vb[u] = load16_stream(wb + k);
            }
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const unsigned int k = k0 + u * step;
            if (k < K) {
                const Pack<T> xv = load16(x + k);
                float sa = 0.0f, sb = 0.0f;
#pragma unroll
                for (int j = 0; j < V; ++j) {
                    sa = fmaf(to_f32(xv.v[j]), to_f32(va[u].v[j]), sa);
                    sb = fmaf(to_f32(xv.v[j]), to_f32(vb[u].v[j]), sb);
                }
                a += sa;
                b += sb;
            }
        }
    }
}

// Before waiting on the previous kernel (programmatic dependent launch), a block asks L2 for the
// weights its warps will read: they do not depend on that kernel, so streaming them overlaps
// its tail. The main loop then finds them in L2.
template <typename T>
__device__ __forceinline__ void row_prefetch(const T* __restrict__ wr, unsigned int K,
                                             unsigned int W, unsigned int wi, unsigned int lane) {
    const int V = Vec16<T>::N;
    for (unsigned int k = (wi * 32 + lane) * V; k < K; k += W * 32 * V) prefetch_l2(wr + k);
}

template <typename T, bool VEC, int MAXM, int UNROLL>
__device__ __forceinline__ void gemv_impl(const T* __restrict__ x, const T* __restrict__ w,
                                          const T* __restrict__ bias, T* __restrict__ out,
                                          unsigned int M, unsigned int N, unsigned int K,
                                          unsigned int R) {
    __shared__ float part[8][GEMV_MAX_M];
    const unsigned int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const unsigned int W = 8 / R;
    const unsigned int r = warp / W, wi = warp % W;
    const unsigned long long n = (unsigned long long)blockIdx.x * R + r;
    if (VEC && n < N) row_prefetch(w + n * K, K, W, wi, lane);
    pdl_enter();
    float acc[MAXM];
#pragma unroll
    for (int m = 0; m < MAXM; ++m) acc[m] = 0.0f;
    if (n < N) row_dot<T, VEC, MAXM, UNROLL>(x, w + n * K, M, K, W, wi, lane, acc);
#pragma unroll
    for (int m = 0; m < MAXM; ++m) {
        if (m < (int)M) {
            float s = warp_sum(acc[m]);
            if (lane == 0) part[warp][m] = s;
        }
    }
    __syncthreads();
    if (wi == 0 && lane < M && n < N) {
        float s = 0.0f;
        for (unsigned int j = 0; j < W; ++j) s += part[r * W + j][lane];
        if (bias) s += to_f32(bias[n]);
        out[(unsigned long long)lane * N + n] = from_f32<T>(s);
    }
}

// SwiGLU's gate/up projection for one row of x (the decode step): w is [2N, K], the gate's N rows
// then the up projection's; out[n] = silu(x·w[n]) · (x·w[N + n]) (Shazeer 2020, "GLU Variants
// Improve Transformer"), in f32 and rounded once. A block computes R outputs from 2R weight
// rows, 8 / (2R) warps per row; the sums combine in a fixed order (deterministic for a given R).
template <typename T>
__device__ __forceinline__ void gemv_swiglu_impl(const T* __restrict__ x, const T* __restrict__ w,
                                                 T* __restrict__ out, unsigned int N,
                                                 unsigned int K, unsigned int R) {
    __shared__ float part[8];
    const unsigned int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const unsigned int W = 8 / (2 * R);
    const unsigned int vr = warp / W, wi = warp % W;
    const unsigned long long n = (unsigned long long)blockIdx.x * R + vr / 2;
    const T* wr = w + ((vr & 1) ? N + n : n) * K;
    if (n < N) row_prefetch(wr, K, W, wi, lane);
    pdl_enter();
    float acc[1] = {0.0f};
    if (n < N) row_dot<T, true, 1, 4>(x, wr, 1, K, W, wi, lane, acc);
    const float s = warp_sum(acc[0]);
    if (lane == 0) part[warp] = s;
    __syncthreads();
    if (threadIdx.x < R) {
        const unsigned long long c = (unsigned long long)blockIdx.x * R + threadIdx.x;
        if (c < N) {
            float g = 0.0f, u = 0.0f;
            for (unsigned int j = 0; j < W; ++j) {
                g += part[2 * threadIdx.x * W + j];
                u += part[(2 * threadIdx.x + 1) * W + j];
            }
            out[c] = from_f32<T>(g / (1.0f + expf(-g)) * u);
        }
    }
}

// x = rms_norm(residual + pending) · g (Zhang & Sennrich 2019) into shared memory `xs` (K
// elements in 16-byte vectors; no pending: residual alone), with add_rms_norm's arithmetic
// (norm.cu: the sum rounded to the dtype, f32 sum of squares in the same order, rounded once).
// Block 0 also stores residual + pending to residual_out (the next residual stream). Every block
// computes the norm itself: K is a hidden size, a few KiB read from L2, so the step needs no
// separate norm kernel and no grid-wide barrier.
template <typename T>
__device__ __forceinline__ void rms_norm_prologue(const T* __restrict__ pending,
        const T* __restrict__ residual, const T* __restrict__ g, T* __restrict__ residual_out,
        float eps, unsigned int K, T* xs, float* scratch) {
    const int V = Vec16<T>::N;
    const unsigned int nvec = K / V;
    float ss = 0.0f;
    for (unsigned int i = threadIdx.x; i < nvec; i += blockDim.x) {
        Pack<T> p = load16(residual + i * V);
        if (pending) {
            const Pack<T> y = load16(pending + i * V);
#pragma unroll
            for (int j = 0; j < V; ++j) p.v[j] = from_f32<T>(to_f32(y.v[j]) + to_f32(p.v[j]));
            if (blockIdx.x == 0) store16(residual_out + i * V, p);
        }
#pragma unroll
        for (int j = 0; j < V; ++j) { const float f = to_f32(p.v[j]); ss += f * f; }
        store16(xs + i * V, p);
    }
    const float inv = rsqrtf(block_sum(ss, scratch) / (float)K + eps);
    for (unsigned int i = threadIdx.x; i < nvec; i += blockDim.x) {
        Pack<T> p = load16(xs + i * V);
        const Pack<T> wv = load16(g + i * V);
#pragma unroll
        for (int j = 0; j < V; ++j) p.v[j] = from_f32<T>(to_f32(p.v[j]) * inv * to_f32(wv.v[j]));
        store16(xs + i * V, p);
    }
    __syncthreads();
}

// The pre-norm decode GEMVs: out[n] = rms_norm(residual + pending)·g · w[n] (+ bias[n]) for one
// row (K a multiple of 16 bytes, rows 16-byte aligned); SWIGLU: w is [2N, K] (gate rows, then
// up rows) and out[n] = silu(x·w[n]) · (x·w[N + n]). A persistent grid (one wave, sized on the
// host from the occupancy) whose warps each own whole outputs, striding over them: no barrier
// after the prologue, so a warp streams its next rows while others still reduce. Each output is
// one warp's sum in a fixed order, whatever the grid size (deterministic on any device).
// ARGMAX (the LM head with greedy sampling): each block also writes the first maximum of its
// outputs, as rounded to the dtype, to parts[blockIdx.x] for sample_argmax_parts.
template <typename T, bool SWIGLU, bool ARGMAX>
__device__ __forceinline__ void gemv_norm_impl(const T* __restrict__ pending,
        const T* __restrict__ residual, const T* __restrict__ g, T* __restrict__ residual_out,
        float eps, const T* __restrict__ w, const T* __restrict__ bias, T* __restrict__ out,
        unsigned int N, unsigned int K, ArgmaxPart* __restrict__ parts) {
    extern __shared__ __align__(16) unsigned char gemv_smem[];
    T* xs = reinterpret_cast<T*>(gemv_smem);
    __shared__ float scratch[32];
    __shared__ ArgmaxPart best[8];
    const unsigned int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const unsigned long long warps = (unsigned long long)gridDim.x * (blockDim.x >> 5);
    unsigned long long n = (unsigned long long)blockIdx.x * (blockDim.x >> 5) + warp;
    if (n < N) {
        row_prefetch(w + n * K, K, 1, 0, lane);
        if (SWIGLU) row_prefetch(w + (N + n) * K, K, 1, 0, lane);
    }
    pdl_wait();
    rms_norm_prologue(pending, residual, g, residual_out, eps, K, xs, scratch);
    pdl_launch_dependents();
    float bv = -GPUKIT_INF;
    unsigned int bi = GPUKIT_NO_INDEX;
    for (; n < N; n += warps) {
        float y;
        if (SWIGLU) {
            float gate = 0.0f, up = 0.0f;
            row_dot2<T, 4>(xs, w + n * K, w + (N + n) * K, K, lane, gate, up);
            gate = warp_sum(gate);
            y = gate / (1.0f + expf(-gate)) * warp_sum(up);
        } else {
            float acc[1] = {0.0f};
            row_dot<T, true, 1, 4>(xs, w + n * K, 1, K, 1, 0, lane, acc);
            const float s = warp_sum(acc[0]);
            y = bias ? s + to_f32(bias[n]) : s;
        }
        if (lane == 0) {
            const T o = from_f32<T>(y);
            out[n] = o;
            if (ARGMAX) argmax_merge(bv, bi, to_f32(o), (unsigned int)n);
        }
    }
    if (ARGMAX) {
        if (lane == 0) best[warp] = ArgmaxPart{bv, bi};
        __syncthreads();
        if (threadIdx.x == 0) {
            float b = best[0].value;
            unsigned int at = best[0].index;
            for (unsigned int i = 1; i < (blockDim.x >> 5); ++i) argmax_merge(b, at, best[i].value, best[i].index);
            parts[blockIdx.x] = ArgmaxPart{b, at};
        }
    }
}

#define GEMV_KERNELS(T, NAME)                                                                      \
extern "C" __global__ void gemv_##NAME(const T* __restrict__ x, const T* __restrict__ w,           \
        const T* __restrict__ bias, T* __restrict__ out, unsigned int M, unsigned int N,           \
        unsigned int K, unsigned int R) {                                                          \
    gemv_impl<T, false, GEMV_MAX_M, 1>(x, w, bias, out, M, N, K, R);                               \
}                                                                                                  \
extern "C" __global__ void gemv_##NAME##_vec(const T* __restrict__ x, const T* __restrict__ w,     \
        const T* __restrict__ bias, T* __restrict__ out, unsigned int M, unsigned int N,           \
        unsigned int K, unsigned int R) {                                                          \
    gemv_impl<T, true, GEMV_MAX_M, 4>(x, w, bias, out, M, N, K, R);                                \
}                                                                                                  \
/* M = 1 (decode): one accumulator.                               */                             \
extern "C" __global__ void gemv_##NAME##_vec_m1(const T* __restrict__ x, const T* __restrict__ w,  \
        const T* __restrict__ bias, T* __restrict__ out, unsigned int M, unsigned int N,           \
        unsigned int K, unsigned int R) {                                                          \
    gemv_impl<T, true, 1, 4>(x, w, bias, out, M, N, K, R);                                         \
}                                                                                                  \
/* x [1, K] (16-byte aligned, K a multiple of 16 bytes), w [2N, K]: out [1, N].   */             \
extern "C" __global__ void gemv_swiglu_##NAME(const T* __restrict__ x, const T* __restrict__ w,    \
        T* __restrict__ out, unsigned int N, unsigned int K, unsigned int R) {                     \
    gemv_swiglu_impl<T>(x, w, out, N, K, R);                                                       \
}                                                                                                  \
/* Pre-norm variants (dynamic shared memory: K elements). pending may be null.        */           \
extern "C" __global__ void gemv_norm_##NAME(const T* pending, const T* residual, const T* g,       \
        T* residual_out, float eps, const T* w, const T* bias, T* out, unsigned int N,             \
        unsigned int K) {                                                                          \
    gemv_norm_impl<T, false, false>(pending, residual, g, residual_out, eps, w, bias, out, N, K,   \
                                    nullptr);                                                      \
}                                                                                                  \
extern "C" __global__ void gemv_norm_argmax_##NAME(const T* pending, const T* residual,            \
        const T* g, T* residual_out, float eps, const T* w, const T* bias, T* out,                 \
        unsigned int N, unsigned int K, ArgmaxPart* parts) {                                       \
    gemv_norm_impl<T, false, true>(pending, residual, g, residual_out, eps, w, bias, out, N, K,    \
                                   parts);                                                         \
}                                                                                                  \
extern "C" __global__ void gemv_swiglu_norm_##NAME(const T* pending, const T* residual,            \
        const T* g, T* residual_out, float eps, const T* w, T* out, unsigned int N,                \
        unsigned int K) {                                                                          \
    gemv_norm_impl<T, true, false>(pending, residual, g, residual_out, eps, w, nullptr, out, N, K, \
                                   nullptr);                                                       \
}

GEMV_KERNELS(float, f32)
GEMV_KERNELS(f16, f16)
GEMV_KERNELS(bf16, bf16)
