// Dequantization of GGML block formats (see gpukit-ops/src/quant.rs for the definitions), one
// thread per value. Products and sums are rounded separately (__fmul_rn, __fadd_rn: never fused)
// so the f32 result is bit-identical to the CPU reference.
#include "common.cuh"

__device__ __forceinline__ float f16_at(const u8* p) {
    unsigned short bits = (unsigned short)p[0] | ((unsigned short)p[1] << 8);
    return __half2float(__ushort_as_half(bits));
}

// format: 0 = Q8_0 (34-byte blocks), 1 = Q4_0 (18), 2 = Q4_1 (20).
__device__ __forceinline__ float dequant_one(const u8* __restrict__ q, int format,
                                             unsigned long long i) {
    const unsigned long long blk = i / 32;
    const unsigned int j = (unsigned int)(i % 32);
    if (format == 0) {
        const u8* b = q + blk * 34;
        return __fmul_rn((float)(signed char)b[2 + j], f16_at(b));
    }
    const unsigned int bb = format == 1 ? 18 : 20;
    const u8* b = q + blk * bb;
    const u8* qs = b + (format == 1 ? 2 : 4);
    const unsigned int byte = qs[j & 15];
    const int v = j < 16 ? (int)(byte & 0x0F) : (int)(byte >> 4);
    if (format == 1) return __fmul_rn((float)(v - 8), f16_at(b));
    return __fadd_rn(__fmul_rn((float)v, f16_at(b)), f16_at(b + 2));
}

#define DEQUANT_KERNELS(T, NAME)                                                                   \
extern "C" __global__ void dequantize_##NAME(const u8* __restrict__ q, T* __restrict__ out,        \
        unsigned long long n, int format) {                                                        \
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;  \
         i += (unsigned long long)gridDim.x * blockDim.x)                                          \
        out[i] = from_f32<T>(dequant_one(q, format, i));                                           \
}

DEQUANT_KERNELS(float, f32)
DEQUANT_KERNELS(f16, f16)
DEQUANT_KERNELS(bf16, bf16)

// Quantized GEMV for one row of x: out[n] = Σ_k dequant(w[n, k]) · x[k], w stored as rows of
// K/32 blocks. One warp per output; lane l takes blocks l, l + 32, …, dequantizes each block as
// dequant_one does and dots it with x in f32; the warp combines in a fixed butterfly order.
#define QGEMV_KERNELS(T, NAME)                                                                     \
extern "C" __global__ void qgemv_##NAME(const u8* __restrict__ w, const T* __restrict__ x,         \
        T* __restrict__ out, unsigned int N, unsigned int K, int format) {                         \
    const unsigned int lane = threadIdx.x & 31;                                                    \
    const unsigned long long n = (blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x) >> 5; \
    if (n >= N) return;                                                                            \
    const unsigned int blocks = K / 32;                                                            \
    const unsigned int bb = format == 0 ? 34 : (format == 1 ? 18 : 20);                            \
    const u8* row = w + n * blocks * bb;                                                           \
    float acc = 0.0f;                                                                              \
    for (unsigned int b = lane; b < blocks; b += 32) {                                             \
        const T* xb = x + b * 32;                                                                  \
        for (unsigned int j = 0; j < 32; ++j)                                                      \
            acc = fmaf(dequant_one(row + (unsigned long long)b * bb, format, j), to_f32(xb[j]), acc); \
    }                                                                                              \
    acc = warp_sum(acc);                                                                           \
    if (lane == 0) out[n] = from_f32<T>(acc);                                                      \
}

QGEMV_KERNELS(float, f32)
QGEMV_KERNELS(f16, f16)
QGEMV_KERNELS(bf16, bf16)
