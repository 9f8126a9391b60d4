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
