// Dequantization of GGML block formats (see gpukit-ops/src/quant.rs for the definitions), one
// thread per value. Products and sums are rounded separately (__fmul_rn, __fadd_rn: never fused)
// so the f32 result is bit-identical to the CPU reference.
#include "common.cuh"

__device__ __forceinline__ float f16_at(const u8* p) {
    unsigned short bits = (unsigned short)p[0] | ((unsigned short)p[1] << 8);
    return __half2float(__ushort_as_half(bits));
}

// Q4_K/Q5_K sub-block j's 6-bit scale and min (ggml's get_scale_min_k4).
__device__ __forceinline__ void scale_min_k4(int j, const u8* q, int& sc, int& m) {
    if (j < 4) {
        sc = q[j] & 63;
        m = q[j + 4] & 63;
    } else {
        sc = (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4);
        m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

// Value j of a 256-value K-quant super-block: format 3 = Q4_K (144 bytes), 4 = Q5_K (176),
// 5 = Q6_K (210), computed with the reference's roundings.
__device__ __forceinline__ float dequant_k(const u8* __restrict__ b, int format, unsigned int j) {
    if (format == 5) {
        const unsigned int n = j / 128, quarter = (j % 128) / 32, l = j % 32;
        const u8* ql = b + 64 * n;
        const u8* qh = b + 128 + 32 * n;
        const signed char* sc = reinterpret_cast<const signed char*>(b + 192 + 8 * n);
        const unsigned int low = quarter == 0 ? ql[l] & 0x0F : quarter == 1 ? ql[l + 32] & 0x0F
                               : quarter == 2 ? ql[l] >> 4 : ql[l + 32] >> 4;
        const int q6 = (int)(signed char)(low | (((qh[l] >> (2 * quarter)) & 3) << 4)) - 32;
        return __fmul_rn(__fmul_rn(f16_at(b + 208), (float)sc[l / 16 + 2 * quarter]), (float)q6);
    }
    const unsigned int c = j / 64, half = (j % 64) / 32, l = j % 32, sub = 2 * c + half;
    int sc, m;
    scale_min_k4((int)sub, b + 4, sc, m);
    const u8* qs = b + (format == 3 ? 16 : 48) + 32 * c;
    int v = half == 0 ? qs[l] & 0x0F : qs[l] >> 4;
    if (format == 4 && ((b[16 + l] >> sub) & 1)) v += 16;
    return __fsub_rn(__fmul_rn(__fmul_rn(f16_at(b), (float)sc), (float)v),
                     __fmul_rn(f16_at(b + 2), (float)m));
}

// format: 0 = Q8_0 (34-byte blocks), 1 = Q4_0 (18), 2 = Q4_1 (20), 3-5 = the K-quants.
__device__ __forceinline__ float dequant_one(const u8* __restrict__ q, int format,
                                             unsigned long long i) {
    if (format >= 3) {
        const unsigned int bb = format == 3 ? 144 : (format == 4 ? 176 : 210);
        return dequant_k(q + (i / 256) * bb, format, (unsigned int)(i % 256));
    }
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
// K/32 blocks. One warp per output row; four lanes share a block (8 of its 32 values each), so a
// warp covers 8 consecutive blocks per step and reads them as one contiguous run; each lane
// issues the loads of four steps before using them. Per block: d · Σ q·x (+ m · Σ x for Q4_1) in
// f32; the warp combines in a fixed butterfly order (deterministic).
__device__ __forceinline__ unsigned ld_u16(const u8* p) {
    return *reinterpret_cast<const unsigned short*>(p);
}
__device__ __forceinline__ float f16_bits(unsigned b) {
    return __half2float(__ushort_as_half((unsigned short)b));
}

// Four consecutive values of x as f32 (one 16- or 8-byte load when aligned).
template <typename T> __device__ __forceinline__ void load_x4(const T* p, bool vec, float* o) {
    if (vec && sizeof(T) == 4) {
        const float4 f = *reinterpret_cast<const float4*>(p);
        o[0] = f.x; o[1] = f.y; o[2] = f.z; o[3] = f.w;
    } else if (vec) {
        const uint2 r = *reinterpret_cast<const uint2*>(p);
        const T* h = reinterpret_cast<const T*>(&r);
#pragma unroll
        for (int i = 0; i < 4; ++i) o[i] = to_f32(h[i]);
    } else {
#pragma unroll
        for (int i = 0; i < 4; ++i) o[i] = to_f32(p[i]);
    }
}

// FMT: 0 = Q8_0, 1 = Q4_0, 2 = Q4_1.
template <typename T, int FMT>
__device__ __forceinline__ float qgemv_row(const u8* __restrict__ row, const T* __restrict__ x,
                                           unsigned int blocks, bool xvec) {
    constexpr unsigned int BB = FMT == 0 ? 34 : (FMT == 1 ? 18 : 20);
    constexpr int U = 4;
    const unsigned int lane = threadIdx.x & 31, sub = lane & 3, bl = lane >> 2;
    float acc = 0.0f;
    for (unsigned int base = 0; base < blocks; base += 8 * U) {
        unsigned int q[U][2];
        float d[U], m[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const unsigned int b = base + 8 * u + bl;
            if (b < blocks) {
                const u8* p = row + (unsigned long long)b * BB;
                d[u] = f16_bits(ld_u16(p));
                if (FMT == 0) {
                    const u8* qs = p + 2 + 8 * sub;
                    q[u][0] = ld_u16(qs) | (ld_u16(qs + 2) << 16);
                    q[u][1] = ld_u16(qs + 4) | (ld_u16(qs + 6) << 16);
                } else if (FMT == 1) {
                    const u8* qs = p + 2 + 4 * sub;
                    q[u][0] = ld_u16(qs) | (ld_u16(qs + 2) << 16);
                } else {
                    m[u] = f16_bits(ld_u16(p + 2));
                    q[u][0] = *reinterpret_cast<const unsigned int*>(p + 4 + 4 * sub);
                }
            }
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const unsigned int b = base + 8 * u + bl;
            if (b >= blocks) continue;
            const T* xb = x + (unsigned long long)b * 32;
            float s = 0.0f;
            if (FMT == 0) {
                float xa[4], xc[4];
                load_x4(xb + 8 * sub, xvec, xa);
                load_x4(xb + 8 * sub + 4, xvec, xc);
#pragma unroll
                for (int i = 0; i < 4; ++i) s = fmaf((float)(signed char)(q[u][0] >> (8 * i)), xa[i], s);
#pragma unroll
                for (int i = 0; i < 4; ++i) s = fmaf((float)(signed char)(q[u][1] >> (8 * i)), xc[i], s);
                acc = fmaf(d[u], s, acc);
            } else {
                float xl[4], xh[4], sx = 0.0f;
                load_x4(xb + 4 * sub, xvec, xl);
                load_x4(xb + 16 + 4 * sub, xvec, xh);
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    const unsigned int byte = (q[u][0] >> (8 * i)) & 0xFF;
                    const int off = FMT == 1 ? 8 : 0;
                    s = fmaf((float)((int)(byte & 0x0F) - off), xl[i], s);
                    s = fmaf((float)((int)(byte >> 4) - off), xh[i], s);
                    if (FMT == 2) sx += xl[i] + xh[i];
                }
                acc = fmaf(d[u], s, acc);
                if (FMT == 2) acc = fmaf(m[u], sx, acc);
            }
        }
    }
    return acc;
}

#define QGEMV_KERNELS(T, NAME)                                                                     \
extern "C" __global__ void qgemv_##NAME(const u8* __restrict__ w, const T* __restrict__ x,         \
        T* __restrict__ out, unsigned int N, unsigned int K, int format, int x_vec) {              \
    pdl_enter();                                                                                   \
    const unsigned long long n = (blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x) >> 5; \
    if (n >= N) return;                                                                            \
    if (format >= 3) {                                                                             \
        /* K-quants: value by value (correct, not tuned). */                                       \
        const unsigned int bb = format == 3 ? 144 : (format == 4 ? 176 : 210);                     \
        const u8* krow = w + n * (K / 256) * bb;                                                   \
        float acc = 0.0f;                                                                          \
        for (unsigned int k = threadIdx.x & 31; k < K; k += 32)                                    \
            acc = fmaf(dequant_one(krow, format, k), to_f32(x[k]), acc);                           \
        acc = warp_sum(acc);                                                                       \
        if ((threadIdx.x & 31) == 0) out[n] = from_f32<T>(acc);                                    \
        return;                                                                                    \
    }                                                                                              \
    const unsigned int blocks = K / 32;                                                            \
    const unsigned int bb = format == 0 ? 34 : (format == 1 ? 18 : 20);                            \
    const u8* row = w + n * blocks * bb;                                                           \
    float acc = format == 0 ? qgemv_row<T, 0>(row, x, blocks, x_vec != 0)                          \
              : format == 1 ? qgemv_row<T, 1>(row, x, blocks, x_vec != 0)                          \
                            : qgemv_row<T, 2>(row, x, blocks, x_vec != 0);                         \
    acc = warp_sum(acc);                                                                           \
    if ((threadIdx.x & 31) == 0) out[n] = from_f32<T>(acc);                                        \
}

QGEMV_KERNELS(float, f32)
QGEMV_KERNELS(f16, f16)
QGEMV_KERNELS(bf16, bf16)
