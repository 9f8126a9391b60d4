// GEMV for the decode path: out[m, n] = sum_k x[m, k] * w[n, k] (+ bias[n]) for M <= 8 rows of
// x, weights stored [N, K] (a linear layer's natural layout).
//
// Memory-bound: every weight byte is read once. One warp per output column n: each lane reads
// VEC consecutive weights per step as one 16-byte load (8 bf16/f16 or 4 f32), the warp covers
// 32 * VEC weights per step, and the loop is unrolled so several loads are in flight. x (M x K,
// small) is read through L1/L2. Partial sums are combined with a fixed butterfly (warp_sum), so
// the result is deterministic. `_vec` needs K % VEC == 0 and 16-byte aligned rows; the plain
// variant handles any K.
#include "common.cuh"

#define GEMV_MAX_M 8
// 16-byte weight loads each lane issues before using any of them (memory-level parallelism).
#define GEMV_UNROLL 4

template <typename T, bool VEC>
__device__ __forceinline__ void gemv_impl(const T* __restrict__ x, const T* __restrict__ w,
                                          const T* __restrict__ bias, T* __restrict__ out,
                                          unsigned int M, unsigned int N, unsigned int K) {
    const unsigned int lane = threadIdx.x & 31;
    const unsigned long long n = (blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x) >> 5;
    if (n >= N) return;
    const T* wr = w + n * K;
    float acc[GEMV_MAX_M];
#pragma unroll
    for (int m = 0; m < GEMV_MAX_M; ++m) acc[m] = 0.0f;
    if (VEC) {
        const int V = Vec16<T>::N;
        const unsigned int step = 32 * V;
        for (unsigned int k0 = lane * V; k0 < K; k0 += step * GEMV_UNROLL) {
            Pack<T> wv[GEMV_UNROLL];
#pragma unroll
            for (int u = 0; u < GEMV_UNROLL; ++u) {
                const unsigned int k = k0 + u * step;
                if (k < K) wv[u] = load16(wr + k);
            }
#pragma unroll
            for (int u = 0; u < GEMV_UNROLL; ++u) {
                const unsigned int k = k0 + u * step;
                if (k < K) {
#pragma unroll
                    for (int m = 0; m < GEMV_MAX_M; ++m) {
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
        for (unsigned int k = lane; k < K; k += 32) {
            float wk = to_f32(wr[k]);
#pragma unroll
            for (int m = 0; m < GEMV_MAX_M; ++m)
                if (m < (int)M) acc[m] = fmaf(to_f32(x[(unsigned long long)m * K + k]), wk, acc[m]);
        }
    }
#pragma unroll
    for (int m = 0; m < GEMV_MAX_M; ++m) {
        if (m < (int)M) {
            float s = warp_sum(acc[m]);
            if (lane == 0) {
                if (bias) s += to_f32(bias[n]);
                out[(unsigned long long)m * N + n] = from_f32<T>(s);
            }
        }
    }
}

#define GEMV_KERNELS(T, NAME)                                                                      \
extern "C" __global__ void gemv_##NAME(const T* __restrict__ x, const T* __restrict__ w,           \
        const T* __restrict__ bias, T* __restrict__ out, unsigned int M, unsigned int N,           \
        unsigned int K) {                                                                          \
    gemv_impl<T, false>(x, w, bias, out, M, N, K);                                                 \
}                                                                                                  \
extern "C" __global__ void gemv_##NAME##_vec(const T* __restrict__ x, const T* __restrict__ w,     \
        const T* __restrict__ bias, T* __restrict__ out, unsigned int M, unsigned int N,           \
        unsigned int K) {                                                                          \
    gemv_impl<T, true>(x, w, bias, out, M, N, K);                                                  \
}

GEMV_KERNELS(float, f32)
GEMV_KERNELS(f16, f16)
GEMV_KERNELS(bf16, bf16)
