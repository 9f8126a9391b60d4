// index_select and gather along an axis. index_select: x viewed as [outer, len, inner], ids[n] → out [outer, n, inner].
// An embedding lookup is index_select with outer = 1, len = vocab, inner = hidden.
// Ids outside [0, len) are never read from: the output row is filled with zeros and bit 0 of
// *err is set, which the host reports as an error at its next synchronising call.
#include "common.cuh"

#define GATHER_KERNELS(T, NAME, I, INAME)                                                          \
extern "C" __global__ void index_select_##NAME##_##INAME(const T* __restrict__ x,                 \
        const I* __restrict__ ids, T* __restrict__ out, unsigned int outer, unsigned int len,       \
        unsigned int inner, unsigned int n, unsigned int* __restrict__ err) {                      \
    pdl_enter();                                                                                   \
    unsigned long long total = (unsigned long long)outer * n * inner;                              \
    for (unsigned long long t = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;         \
         t < total; t += (unsigned long long)gridDim.x * blockDim.x) {                             \
        unsigned long long in = t % inner, r = t / inner, j = r % n, o = r / n;                    \
        long long id = (long long)ids[j];                                                          \
        if (id < 0 || id >= (long long)len) {                                                      \
            out[t] = T();                                                                          \
            atomicOr(err, 1u);                                                                     \
        } else {                                                                                   \
            out[t] = x[(o * len + (unsigned long long)id) * inner + in];                           \
        }                                                                                          \
    }                                                                                              \
}

GATHER_KERNELS(float, f32, i32, i32)
GATHER_KERNELS(float, f32, i64, i64)
GATHER_KERNELS(f16, f16, i32, i32)
GATHER_KERNELS(f16, f16, i64, i64)
GATHER_KERNELS(bf16, bf16, i32, i32)
GATHER_KERNELS(bf16, bf16, i64, i64)
GATHER_KERNELS(i32, i32, i32, i32)
GATHER_KERNELS(i32, i32, i64, i64)
GATHER_KERNELS(i64, i64, i32, i32)
GATHER_KERNELS(i64, i64, i64, i64)

// gather along an axis (torch.gather): x viewed as [outer, len, inner], idx and out as
// [outer, n, inner]; out[o, j, i] = x[o, idx[o, j, i], i]. Out-of-range ids: zero, err bit 0.
#define GATHER_AXIS_KERNELS(T, NAME, I, INAME)                                                     \
extern "C" __global__ void gather_##NAME##_##INAME(const T* __restrict__ x,                       \
        const I* __restrict__ idx, T* __restrict__ out, unsigned int outer, unsigned int len,      \
        unsigned int inner, unsigned int n, unsigned int* __restrict__ err) {                      \
    unsigned long long total = (unsigned long long)outer * n * inner;                              \
    for (unsigned long long t = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;         \
         t < total; t += (unsigned long long)gridDim.x * blockDim.x) {                             \
        unsigned long long in = t % inner, o = t / inner / n;                                      \
        long long id = (long long)idx[t];                                                          \
        if (id < 0 || id >= (long long)len) {                                                      \
            out[t] = T();                                                                          \
            atomicOr(err, 1u);                                                                     \
        } else {                                                                                   \
            out[t] = x[(o * len + (unsigned long long)id) * inner + in];                           \
        }                                                                                          \
    }                                                                                              \
}

GATHER_AXIS_KERNELS(float, f32, i32, i32)
GATHER_AXIS_KERNELS(float, f32, i64, i64)
GATHER_AXIS_KERNELS(f16, f16, i32, i32)
GATHER_AXIS_KERNELS(f16, f16, i64, i64)
GATHER_AXIS_KERNELS(bf16, bf16, i32, i32)
GATHER_AXIS_KERNELS(bf16, bf16, i64, i64)
GATHER_AXIS_KERNELS(i32, i32, i32, i32)
GATHER_AXIS_KERNELS(i32, i32, i64, i64)
GATHER_AXIS_KERNELS(i64, i64, i32, i32)
GATHER_AXIS_KERNELS(i64, i64, i64, i64)
