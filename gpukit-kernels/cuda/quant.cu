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
    if (format == QFMT_Q6_K) {
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
    const u8* qs = b + (format == QFMT_Q4_K ? 16 : 48) + 32 * c;
    int v = half == 0 ? qs[l] & 0x0F : qs[l] >> 4;
    if (format == QFMT_Q5_K && ((b[16 + l] >> sub) & 1)) v += 16;
    return __fsub_rn(__fmul_rn(__fmul_rn(f16_at(b), (float)sc), (float)v),
                     __fmul_rn(f16_at(b + 2), (float)m));
}

// format: a QFMT_* code (Q8_0: 34-byte blocks, Q4_0: 18, Q4_1: 20, and the K-quants).
__device__ __forceinline__ float dequant_one(const u8* __restrict__ q, int format,
                                             unsigned long long i) {
    if (format >= QFMT_Q4_K) {
        const unsigned int bb = format == QFMT_Q4_K ? 144 : (format == QFMT_Q5_K ? 176 : 210);
        return dequant_k(q + (i / 256) * bb, format, (unsigned int)(i % 256));
    }
    const unsigned long long blk = i / 32;
    const unsigned int j = (unsigned int)(i % 32);
    if (format == QFMT_Q8_0) {
        const u8* b = q + blk * 34;
        return __fmul_rn((float)(signed char)b[2 + j], f16_at(b));
    }
    const unsigned int bb = format == QFMT_Q4_0 ? 18 : 20;
    const u8* b = q + blk * bb;
    const u8* qs = b + (format == QFMT_Q4_0 ? 2 : 4);
    const unsigned int byte = qs[j & 15];
    const int v = j < 16 ? (int)(byte & 0x0F) : (int)(byte >> 4);
    if (format == QFMT_Q4_0) return __fmul_rn((float)(v - 8), f16_at(b));
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

// Quantized GEMV for up to 8 rows of x: out[r, n] = Σ_k dequant(w[n, k]) · x[r, k], w stored as
// rows of K/32 blocks. One warp per output column n; four lanes share a block (8 of its 32 values
// each), so a warp covers 8 consecutive blocks per step and reads them as one contiguous run;
// each lane issues the loads of four steps before using them, and decodes each block's values
// once for every row of x. Per block and row: d · Σ q·x (+ m · Σ x for Q4_1) in f32; the warp
// combines in a fixed butterfly order (deterministic), and row r's sum is the same, bit for bit,
// whatever the other rows (so a batch of rows equals that many one-row calls).
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

// FMT: QFMT_Q8_0, QFMT_Q4_0 or QFMT_Q4_1. acc[r] += row · x[r] for the nr ≤ MR rows of x (row r at
// x + r · K).
template <typename T, int FMT, int MR>
__device__ __forceinline__ void qgemv_row(const u8* __restrict__ row, const T* __restrict__ x,
                                          unsigned int K, unsigned int nr, unsigned int blocks,
                                          bool xvec, float (&acc)[MR]) {
    constexpr unsigned int BB = FMT == QFMT_Q8_0 ? 34 : (FMT == QFMT_Q4_0 ? 18 : 20);
    constexpr int U = 4;
    const unsigned int lane = threadIdx.x & 31, sub = lane & 3, bl = lane >> 2;
    for (unsigned int base = 0; base < blocks; base += 8 * U) {
        unsigned int q[U][2];
        float d[U], m[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const unsigned int b = base + 8 * u + bl;
            if (b < blocks) {
                const u8* p = row + (unsigned long long)b * BB;
                d[u] = f16_bits(ld_u16(p));
                if (FMT == QFMT_Q8_0) {
                    const u8* qs = p + 2 + 8 * sub;
                    q[u][0] = ld_u16(qs) | (ld_u16(qs + 2) << 16);
                    q[u][1] = ld_u16(qs + 4) | (ld_u16(qs + 6) << 16);
                } else if (FMT == QFMT_Q4_0) {
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
            // The lane's 8 values: Q8_0 positions 8 sub … 8 sub + 7; Q4_0 / Q4_1 positions
            // 4 sub … 4 sub + 3 (wl, low nibbles) and 16 + 4 sub … (wh, high nibbles).
            float wl[4], wh[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                if (FMT == QFMT_Q8_0) {
                    wl[i] = (float)(signed char)(q[u][0] >> (8 * i));
                    wh[i] = (float)(signed char)(q[u][1] >> (8 * i));
                } else {
                    const unsigned int byte = (q[u][0] >> (8 * i)) & 0xFF;
                    const int off = FMT == QFMT_Q4_0 ? 8 : 0;
                    wl[i] = (float)((int)(byte & 0x0F) - off);
                    wh[i] = (float)((int)(byte >> 4) - off);
                }
            }
#pragma unroll
            for (int r = 0; r < MR; ++r) {
                if (r >= (int)nr) break;
                const T* xb = x + (unsigned long long)r * K + (unsigned long long)b * 32;
                float s = 0.0f;
                if (FMT == QFMT_Q8_0) {
                    float xa[4], xc[4];
                    load_x4(xb + 8 * sub, xvec, xa);
                    load_x4(xb + 8 * sub + 4, xvec, xc);
#pragma unroll
                    for (int i = 0; i < 4; ++i) s = fmaf(wl[i], xa[i], s);
#pragma unroll
                    for (int i = 0; i < 4; ++i) s = fmaf(wh[i], xc[i], s);
                    acc[r] = fmaf(d[u], s, acc[r]);
                } else {
                    float xl[4], xh[4], sx = 0.0f;
                    load_x4(xb + 4 * sub, xvec, xl);
                    load_x4(xb + 16 + 4 * sub, xvec, xh);
#pragma unroll
                    for (int i = 0; i < 4; ++i) {
                        s = fmaf(wl[i], xl[i], s);
                        s = fmaf(wh[i], xh[i], s);
                        if (FMT == QFMT_Q4_1) sx += xl[i] + xh[i];
                    }
                    acc[r] = fmaf(d[u], s, acc[r]);
                    if (FMT == QFMT_Q4_1) acc[r] = fmaf(m[u], sx, acc[r]);
                }
            }
        }
    }
}

// A K-quant row (FMT QFMT_Q4_K, QFMT_Q5_K or QFMT_Q6_K) dotted with x: each half-warp takes a
// 256-value super-block (the two halves take consecutive ones), each lane 16 of its values, so
// a lane decodes the super-block's scales for 16 values and reads its quants as whole words.
// Q4_K / Q5_K: lane (c, j) = ((lane / 4) mod 4, lane mod 4) takes positions 8j … 8j + 7 of
// sub-blocks 2c (the low nibbles of quant bytes 32c + 8j …) and 2c + 1 (the high nibbles), and
// adds d · (sc₂c · Σ q·x + sc₂c₊₁ · Σ q·x) − dmin · (m₂c · Σ x + m₂c₊₁ · Σ x). Q6_K: lane
// (h, l) = ((lane / 8) mod 2, lane mod 8) takes positions 4l … 4l + 3 of the four 32-value
// quarters of 128-value half h, and adds d · Σ sc · Σ q·x per quarter. Quants become floats
// exactly through a magic exponent (2²³ + q, then one subtraction), once for every row of x.
// K-quant rows are only 2-byte aligned (Q6_K blocks are 210 bytes): words are read as two
// halves.
__device__ __forceinline__ unsigned ld_u32_2(const u8* p) {
    return ld_u16(p) | (ld_u16(p + 2) << 16);
}
// 2²³ + v for v < 2²³, as a float (v exactly, after subtracting 2²³).
__device__ __forceinline__ float magic_f(unsigned v) { return __int_as_float(0x4B000000u | v); }

template <typename T, int FMT, int MR>
__device__ __forceinline__ void qgemv_row_k(const u8* __restrict__ row, const T* __restrict__ x,
                                            unsigned int K, unsigned int nr,
                                            unsigned int superblocks, bool xvec,
                                            float (&acc)[MR]) {
    constexpr unsigned int BB = FMT == QFMT_Q4_K ? 144 : (FMT == QFMT_Q5_K ? 176 : 210);
    const unsigned int lane = threadIdx.x & 31, half = lane >> 4;
    // One row of x: two super-blocks a step, so that their loads overlap (without it the
    // one-row Q6_K GEMV at (4096, 14336) took 29.7 µs instead of 28.4 on an H200).
#pragma unroll(MR == 1 ? 2 : 1)
    for (unsigned int sb = half; sb < superblocks; sb += 2) {
        const u8* b = row + (size_t)sb * BB;
        if (FMT == QFMT_Q6_K) {
            const unsigned int h = (lane >> 3) & 1, l = lane & 7;
            const unsigned ql0 = ld_u32_2(b + 64 * h + 4 * l);
            const unsigned ql1 = ld_u32_2(b + 64 * h + 32 + 4 * l);
            const unsigned qh = ld_u32_2(b + 128 + 32 * h + 4 * l);
            const signed char* sc = reinterpret_cast<const signed char*>(b + 192 + 8 * h + l / 4);
            const float d = f16_bits(ld_u16(b + 208));
            float wq[4][4];
#pragma unroll
            for (int r = 0; r < MR; ++r) {
                if (r >= (int)nr) break;
                const T* xs = x + (size_t)r * K + (size_t)sb * 256;
                float xv[4][4];
#pragma unroll
                for (int q = 0; q < 4; ++q) load_x4(xs + 128 * h + 32 * q + 4 * l, xvec, xv[q]);
                // Decoded once, with the first row's loads of x in flight.
                if (r == 0) {
#pragma unroll
                    for (int q = 0; q < 4; ++q) {
                        const unsigned lw =
                            q == 0 ? ql0 : (q == 1 ? ql1 : (q == 2 ? ql0 >> 4 : ql1 >> 4));
#pragma unroll
                        for (int i = 0; i < 4; ++i) {
                            const unsigned v =
                                ((lw >> (8 * i)) & 0x0Fu) | (((qh >> (8 * i + 2 * q)) & 3u) << 4);
                            wq[q][i] = magic_f(v) - 8388640.0f;  // 2²³ + 32: q − 32
                        }
                    }
                }
                float total = 0.0f;
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                    float s = 0.0f;
#pragma unroll
                    for (int i = 0; i < 4; ++i) s = fmaf(wq[q][i], xv[q][i], s);
                    total = fmaf((float)sc[2 * q], s, total);
                }
                acc[r] = fmaf(d, total, acc[r]);
            }
        } else {
            const unsigned int c = (lane >> 2) & 3, j = lane & 3;
            const unsigned int qoff = (FMT == QFMT_Q4_K ? 16 : 48) + 32 * c + 8 * j;
            const unsigned q[2] = {ld_u32_2(b + qoff), ld_u32_2(b + qoff + 4)};
            unsigned qh[2] = {0u, 0u};
            if (FMT == QFMT_Q5_K) {
                qh[0] = ld_u32_2(b + 16 + 8 * j);
                qh[1] = ld_u32_2(b + 20 + 8 * j);
            }
            int sc0, m0, sc1, m1;
            scale_min_k4((int)(2 * c), b + 4, sc0, m0);
            scale_min_k4((int)(2 * c + 1), b + 4, sc1, m1);
            const float d = f16_bits(ld_u16(b)), dmin = f16_bits(ld_u16(b + 2));
            float wlo[2][4], whi[2][4];
#pragma unroll
            for (int r = 0; r < MR; ++r) {
                if (r >= (int)nr) break;
                const T* xs = x + (size_t)r * K + (size_t)sb * 256;
                float xa[2][4], xb[2][4];
#pragma unroll
                for (int w = 0; w < 2; ++w) {
                    load_x4(xs + 64 * c + 8 * j + 4 * w, xvec, xa[w]);
                    load_x4(xs + 64 * c + 32 + 8 * j + 4 * w, xvec, xb[w]);
                }
                // Decoded once, with the first row's loads of x in flight.
                if (r == 0) {
#pragma unroll
                    for (int w = 0; w < 2; ++w) {
#pragma unroll
                        for (int i = 0; i < 4; ++i) {
                            unsigned lo = (q[w] >> (8 * i)) & 0x0Fu,
                                     hi = (q[w] >> (8 * i + 4)) & 0x0Fu;
                            if (FMT == QFMT_Q5_K) {
                                lo |= ((qh[w] >> (8 * i + 2 * c)) & 1u) << 4;
                                hi |= ((qh[w] >> (8 * i + 2 * c + 1)) & 1u) << 4;
                            }
                            wlo[w][i] = magic_f(lo) - 8388608.0f;
                            whi[w][i] = magic_f(hi) - 8388608.0f;
                        }
                    }
                }
                float slo = 0.0f, shi = 0.0f, xlo = 0.0f, xhi = 0.0f;
#pragma unroll
                for (int w = 0; w < 2; ++w) {
#pragma unroll
                    for (int i = 0; i < 4; ++i) {
                        slo = fmaf(wlo[w][i], xa[w][i], slo);
                        shi = fmaf(whi[w][i], xb[w][i], shi);
                        xlo += xa[w][i];
                        xhi += xb[w][i];
                    }
                }
                acc[r] = fmaf(d, fmaf((float)sc0, slo, (float)sc1 * shi), acc[r]);
                acc[r] = fmaf(-dmin, fmaf((float)m0, xlo, (float)m1 * xhi), acc[r]);
            }
        }
    }
}

// One warp per output column: the 32-value formats (KQ false) or the K-quants (KQ
// KQ true), MR accumulators for the nr rows of x; out[r · N + n].
template <typename T, int MR, bool KQ>
__device__ __forceinline__ void qgemv_body(const u8* __restrict__ w, const T* __restrict__ x,
                                           T* __restrict__ out, unsigned int N, unsigned int K,
                                           int format, bool xvec, unsigned int nr) {
    const unsigned long long n = (blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x) >> 5;
    if (n >= N) return;
    float acc[MR];
#pragma unroll
    for (int r = 0; r < MR; ++r) acc[r] = 0.0f;
    if (!KQ) {
        const unsigned int blocks = K / 32;
        const unsigned int bb = format == QFMT_Q8_0 ? 34 : (format == QFMT_Q4_0 ? 18 : 20);
        const u8* row = w + n * blocks * bb;
        if (format == QFMT_Q8_0)
            qgemv_row<T, QFMT_Q8_0, MR>(row, x, K, nr, blocks, xvec, acc);
        else if (format == QFMT_Q4_0)
            qgemv_row<T, QFMT_Q4_0, MR>(row, x, K, nr, blocks, xvec, acc);
        else
            qgemv_row<T, QFMT_Q4_1, MR>(row, x, K, nr, blocks, xvec, acc);
    } else {
        const unsigned int sbs = K / 256;
        const unsigned int bb = format == QFMT_Q4_K ? 144 : (format == QFMT_Q5_K ? 176 : 210);
        const u8* krow = w + n * sbs * bb;
        if (format == QFMT_Q4_K)
            qgemv_row_k<T, QFMT_Q4_K, MR>(krow, x, K, nr, sbs, xvec, acc);
        else if (format == QFMT_Q5_K)
            qgemv_row_k<T, QFMT_Q5_K, MR>(krow, x, K, nr, sbs, xvec, acc);
        else
            qgemv_row_k<T, QFMT_Q6_K, MR>(krow, x, K, nr, sbs, xvec, acc);
    }
#pragma unroll
    for (int r = 0; r < MR; ++r) {
        if (r >= (int)nr) break;
        const float a = warp_sum(acc[r]);
        if ((threadIdx.x & 31) == 0) out[(unsigned long long)r * N + n] = from_f32<T>(a);
    }
}

// qgemv_<dt> is built for 5 blocks of 256 per SM (47 registers): without the bound, ptxas gave
// it 40 and the Q8_0 GEMV at (4096, 14336) went 24.0 → 32.5 µs.
// The K-quants have their own kernels, so that the 32-value formats' one keeps
// the register allocation its bound gives it; so do several rows of x (`_rows_`, up to
// QGEMV_MAX_ROWS, their count `M` an argument).
#define QGEMV_KERNELS(T, NAME)                                                                     \
extern "C" __global__ void __launch_bounds__(256, 5) qgemv_##NAME(                                 \
        const u8* __restrict__ w, const T* __restrict__ x, T* __restrict__ out, unsigned int N,    \
        unsigned int K, int format, int x_vec) {                                                   \
    pdl_enter();                                                                                   \
    qgemv_body<T, 1, false>(w, x, out, N, K, format, x_vec != 0, 1);                               \
}                                                                                                  \
extern "C" __global__ void qgemv_k_##NAME(const u8* __restrict__ w, const T* __restrict__ x,       \
        T* __restrict__ out, unsigned int N, unsigned int K, int format, int x_vec) {              \
    pdl_enter();                                                                                   \
    qgemv_body<T, 1, true>(w, x, out, N, K, format, x_vec != 0, 1);                                \
}                                                                                                  \
extern "C" __global__ void qgemv_rows_##NAME(const u8* __restrict__ w, const T* __restrict__ x,    \
        T* __restrict__ out, unsigned int N, unsigned int K, int format, int x_vec,                \
        unsigned int M) {                                                                          \
    pdl_enter();                                                                                   \
    qgemv_body<T, QGEMV_MAX_ROWS, false>(w, x, out, N, K, format, x_vec != 0, M);                  \
}                                                                                                  \
extern "C" __global__ void qgemv_k_rows_##NAME(const u8* __restrict__ w,                           \
        const T* __restrict__ x, T* __restrict__ out, unsigned int N, unsigned int K, int format,  \
        int x_vec, unsigned int M) {                                                               \
    pdl_enter();                                                                                   \
    qgemv_body<T, QGEMV_MAX_ROWS, true>(w, x, out, N, K, format, x_vec != 0, M);                   \
}

QGEMV_KERNELS(float, f32)
QGEMV_KERNELS(f16, f16)
QGEMV_KERNELS(bf16, bf16)

// Quantized GEMV on a bulk-copy ring with block sums on the tensor cores (sm_90+;
// `qgemv_ring_<dt>` for Q4_0 weights, `qgemv_ring_q4k_<dt>` / `qgemv_ring_q5k_<dt>` for Q4_K /
// Q5_K, dt f16 or bf16): one block per multiprocessor, as the bf16 ring GEMV in gemv.cu. A block
// takes tiles of QGEMV_RING_ROWS = 16 rows (tile i, i + grid, …); each tile streams through the
// ring as stages of `chunk` blocks of those 16 rows, one bulk copy per row into a slot of `pitch`
// bytes (the row stride in shared memory: an odd multiple of 16, so that the 8 rows one load of
// a warp reads, 0 … 7 or 8 … 15, fall in different banks). The producer warp's lanes copy a
// stage's rows; the QGEMV_RING_WARPS consumer warps split each stage's blocks in pairs (pair p
// to warp p mod QGEMV_RING_WARPS: two Q4_0 blocks are 36 bytes, so a pair starts 4-byte
// aligned).
//
// Per block a consumer lane (group g = lane / 4, t = lane % 4) reads 4 bytes of quants of rows g
// and g + 8 and turns their 8 nibbles q into 4 packed pairs of M + q in T, exact (the nibble
// placed under a magic exponent: M = 128 in bf16, 1024 in f16); two m16n8k16 MMAs (f32
// accumulation) with x in every column of B, started from C = −(M + 8) · Σ x over the block,
// give the block's Σ (q − 8) · x for the 16 rows in every lane of the rows, and the lane adds
// d · sum in f32. Before the first stage the consumers lay x out in shared memory as the MMAs
// read it (one 16-byte load per lane per block) and sum each block of it. At a tile's end the
// warps' partial sums meet in shared memory and warp 0 adds them in warp order: the result
// depends on the shape only (deterministic). It differs from the CPU reference (dequantize,
// then an f32 dot product) by rounding only.
//
// Q4_K: the chunks count 144-byte super-blocks, split among the warps whole; a lane decodes the
// eight d · sc and dmin · m of its two rows' super-block, and per 32-value sub-block (the low or
// the high nibbles of a 64-value chunk's quant bytes, of which lane t holds 8t … 8t + 7) two MMAs
// from C = −M · Σ x give Σ q · x, and the lane adds d · sc · sum − dmin · m · Σ x. Q5_K: the same,
// with each value's fifth bit OR-ed into its nibble's byte before the permute (q < 32 < 128).
#define QGEMV_RING_THREADS (QGEMV_RING_WARPS * 32 + 32)

// The ring's static shared memory (the ring, 128-byte aligned, starts after it, at the offset
// the launcher assumes): full and empty barriers per stage, x's barrier, the tiles' partial sums
// (two tiles' worth, so one barrier per tile suffices).
struct QGemvRingShared {
    unsigned long long full[QGEMV_RING_MAX_STAGES], empty[QGEMV_RING_MAX_STAGES], x_full;
    float part[2][QGEMV_RING_WARPS][QGEMV_RING_ROWS];
};

// M + q for the 8 nibbles q of the word q4 (bytes b0..b3), as packed pairs of T, the lower k in
// the low half: r[0] = low nibbles of (b0, b2), r[1] = their high nibbles, r[2] = low nibbles of
// (b1, b3), r[3] = their high nibbles. Each is one byte permute of the nibbles with M's high byte.
template <typename T> struct Q4Magic;
template <> struct Q4Magic<bf16> {
    static const unsigned bytes = 0x43434343u;  // 0x43nn = 128 + nn in bf16
    static constexpr float magic = 128.0f;      // M
    static constexpr float offset = 136.0f;     // M + 8
};
template <> struct Q4Magic<f16> {
    static const unsigned bytes = 0x64646464u;  // 0x64nn = 1024 + nn in f16
    static constexpr float magic = 1024.0f;
    static constexpr float offset = 1032.0f;
};
// The same from the four low-nibble and four high-nibble values already in bytes (each < 128).
template <typename T>
__device__ __forceinline__ void q_pairs(unsigned lo, unsigned hi, unsigned (&r)[4]) {
    r[0] = __byte_perm(lo, Q4Magic<T>::bytes, 0x4240);
    r[1] = __byte_perm(hi, Q4Magic<T>::bytes, 0x4240);
    r[2] = __byte_perm(lo, Q4Magic<T>::bytes, 0x4341);
    r[3] = __byte_perm(hi, Q4Magic<T>::bytes, 0x4341);
}
template <typename T> __device__ __forceinline__ void q4_pairs(unsigned q, unsigned (&r)[4]) {
    q_pairs<T>(q & 0x0F0F0F0Fu, (q >> 4) & 0x0F0F0F0Fu, r);
}
// Q5_K's: the nibbles of q with the fifth bits of qh (bit `sh` of each byte for the low ones,
// `sh` + 1 for the high ones).
template <typename T>
__device__ __forceinline__ void q5_pairs(unsigned q, unsigned qh, unsigned sh, unsigned (&r)[4]) {
    q_pairs<T>((q & 0x0F0F0F0Fu) | (((qh >> sh) & 0x01010101u) << 4),
               ((q >> 4) & 0x0F0F0F0Fu) | (((qh >> (sh + 1)) & 0x01010101u) << 4), r);
}

// The 32 values of one block of rows g and g + 8 as two MMAs from C = (c0, c1) in columns 2t and
// 2t + 1 of both rows: c[0], c[1] end as row g's sums with B's columns 2t and 2t + 1, c[2], c[3]
// as row g + 8's (with x in every column of B, c[0] and c[2] are the rows' sums). The first MMA
// takes pairs i and 2 + i of ra/rb (as q_pairs makes them) against B operands (xb.x, xb.y), the
// second pairs j and 2 + j of ra2/rb2 against (xb.z, xb.w).
template <typename T>
__device__ __forceinline__ void block_mma(const unsigned (&ra)[4], const unsigned (&rb)[4], int i,
                                          const unsigned (&ra2)[4], const unsigned (&rb2)[4],
                                          int j, uint4 xb, float c0, float c1, float (&c)[4]) {
    c[0] = c0;
    c[1] = c1;
    c[2] = c0;
    c[3] = c1;
    const unsigned a0[4] = {ra[i], rb[i], ra[2 + i], rb[2 + i]};
    mma16816<T>(c, a0, xb.x, xb.y);
    const unsigned a1[4] = {ra2[j], rb2[j], ra2[2 + j], rb2[2 + j]};
    mma16816<T>(c, a1, xb.z, xb.w);
}

// One Q4_0 block of rows g and g + 8 (quants qa, qb: bytes 4t … 4t + 3 of each row's 16) against
// x's block laid out for lane t (xb: the B operands of the low and the high nibbles' MMAs) with
// C starting at −(M + 8) · Σ x of each column's x (c0, c1): the two rows' Σ (q − 8) · x.
template <typename T>
__device__ __forceinline__ void q4_block_mma(unsigned qa, unsigned qb, uint4 xb, float c0,
                                             float c1, float (&c)[4]) {
    unsigned ra[4], rb[4];
    q4_pairs<T>(qa, ra);
    q4_pairs<T>(qb, rb);
    block_mma<T>(ra, rb, 0, ra, rb, 1, xb, c0, c1, c);
}

// A Q4_K super-block's eight d · sc and dmin · m from its first four words (d and dmin, then
// the 12 bytes of 6-bit scales and mins, unpacked as ggml's get_scale_min_k4), the small integers
// made floats exactly through a magic exponent.
__device__ __forceinline__ void q4k_scales(const unsigned* w, float (&ds)[8], float (&dm)[8]) {
    const unsigned h = w[0], s0 = w[1], s1 = w[2], s2 = w[3];
    const float d = f16_bits(h & 0xFFFFu), dmin = f16_bits(h >> 16);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
        const int i = 8 * (j % 4);
        const unsigned sc =
            j < 4 ? (s0 >> i) & 63u : ((s2 >> i) & 0x0Fu) | (((s0 >> i) >> 6 & 3u) << 4);
        const unsigned m =
            j < 4 ? (s1 >> i) & 63u : ((s2 >> (i + 4)) & 0x0Fu) | (((s1 >> i) >> 6 & 3u) << 4);
        ds[j] = d * (magic_f(sc) - 8388608.0f);
        dm[j] = dmin * (magic_f(m) - 8388608.0f);
    }
}

// acc += (fa · c[0], fb · c[2]) for rows g and g + 8, and with several rows of x the same for
// their second column (c[1], c[3]).
template <int MR>
__device__ __forceinline__ void q4_accumulate(float fa, float fb, const float (&c)[4],
                                              float (&acc)[4]) {
    acc[0] = fmaf(fa, c[0], acc[0]);
    acc[2] = fmaf(fb, c[2], acc[2]);
    if (MR > 1) {
        acc[1] = fmaf(fa, c[1], acc[1]);
        acc[3] = fmaf(fb, c[3], acc[3]);
    }
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// FMT QFMT_Q4_0 (units of one 18-byte block), QFMT_Q4_K or QFMT_Q5_K (units of one 144- or
// 176-byte super-block). MR 1: one row of x, in every column of the MMAs' B; MR 8: nx ≤ 8 rows
// of x, row r in column r (columns past nx zero), each output row summed in the one-row order
// (so bitwise a one-row call's: the MMA's columns are independent).
template <typename T, int FMT, int MR>
__device__ __forceinline__ void qgemv_ring_impl(const u8* __restrict__ w, const T* __restrict__ x,
        T* __restrict__ out, unsigned int N, unsigned int K, unsigned int chunk, unsigned int pitch,
        unsigned int nst, unsigned int npre, unsigned int nx, QGemvRingShared& sh) {
    extern __shared__ __align__(128) unsigned char ring[];
    constexpr unsigned int BB = FMT == QFMT_Q4_0 ? 18 : (FMT == QFMT_Q4_K ? 144 : 176);
    constexpr unsigned int UV = FMT == QFMT_Q4_0 ? 32 : 256;
    const unsigned int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const unsigned int blocks = K / UV, row_bytes = blocks * BB;
    const unsigned int chunks = (blocks + chunk - 1) / chunk;
    const unsigned int stage_bytes = QGEMV_RING_ROWS * pitch;
    const unsigned int tiles = (N + QGEMV_RING_ROWS - 1) / QGEMV_RING_ROWS;
    const unsigned int mine = blockIdx.x < tiles ? (tiles - 1 - blockIdx.x) / gridDim.x + 1 : 0;
    const unsigned int total = mine * chunks;
    // After the ring, for each of the nx rows of x (one after the other): x as copied, x laid
    // out for the MMAs (16 bytes per lane and 32 values), and per 32 values −(M + 8) · Σ x
    // (Q4_0) or (−M · Σ x, Σ x) (Q4_K); with several rows, then the tiles' partial sums.
    T* xs = reinterpret_cast<T*>(ring + nst * stage_bytes);
    uint4* xp = reinterpret_cast<uint4*>(xs + nx * K);
    float* xsum = reinterpret_cast<float*>(xp + nx * K / 8);
    float2* xsum2 = reinterpret_cast<float2*>(xsum);
    // [2][QGEMV_RING_WARPS][MR][QGEMV_RING_ROWS] (MR > 1 only).
    float* part_rows = xsum + nx * (K / 32) * (FMT == QFMT_Q4_0 ? 1 : 2);
    if (threadIdx.x == 0) {
        for (unsigned int i = 0; i < nst; ++i) {
            mbar_init(&sh.full[i], 1);
            mbar_init(&sh.empty[i], QGEMV_RING_WARPS);
        }
        mbar_init(&sh.x_full, 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    if (warp == QGEMV_RING_WARPS) {
        // The producer: lane r copies row r of each stage; stage t = (tile t / chunks, chunk
        // t mod chunks) into slot t mod nst once its previous use was released. Before the PDL
        // wait only L2 prefetches of the first npre stages (they cannot read what the previous
        // kernel may still write).
        const unsigned int r = lane;
        for (unsigned int t = 0; t < total && t < npre; ++t) {
            const unsigned int tile = blockIdx.x + (t / chunks) * gridDim.x, c = t % chunks;
            const unsigned int row = tile * QGEMV_RING_ROWS + r;
            const unsigned int cb = min(chunk, blocks - c * chunk);
            if (r < QGEMV_RING_ROWS && row < N)
                bulk_prefetch_l2(w + (size_t)row * row_bytes + (size_t)c * chunk * BB, cb * BB);
        }
        pdl_wait();
        if (lane == 0) bulk_load(xs, x, nx * K * sizeof(T), &sh.x_full);
        unsigned int s = 0, phase = 0;
        for (unsigned int t = 0; t < total; ++t) {
            const unsigned int tile = blockIdx.x + (t / chunks) * gridDim.x, c = t % chunks;
            const unsigned int row0 = tile * QGEMV_RING_ROWS, cb = min(chunk, blocks - c * chunk);
            const unsigned int nr = min(QGEMV_RING_ROWS, N - row0);
            if (t >= nst) mbar_wait(&sh.empty[s], phase ^ 1);
            if (lane == 0) mbar_expect_tx(&sh.full[s], nr * cb * BB);
            __syncwarp();
            if (r < nr)
                bulk_copy(ring + s * stage_bytes + r * pitch,
                          w + (size_t)(row0 + r) * row_bytes + (size_t)c * chunk * BB, cb * BB,
                          &sh.full[s]);
            ring_next(s, phase, nst);
        }
        return;
    }
    pdl_wait();
    mbar_wait(&sh.x_full, 0);
    pdl_launch_dependents();
    if (FMT == QFMT_Q4_0) {
        // x for the MMAs: lane t's B operands for a block are (x[4t], x[4t + 2]), (x[4t + 1],
        // x[4t + 3]) (the low nibbles' MMA: values 4t, 4t + 2 sit at k = 2t, 2t + 1 of A, values
        // 4t + 1, 4t + 3 at k = 2t + 8, 2t + 9), then the same 16 further on (the high nibbles').
        // Thread i reads x[4i … 4i + 3] and writes the half of entry (block, t) they make: both
        // conflict-free in shared memory.
        uint2* xp2 = reinterpret_cast<uint2*>(xp);
        // (The rows of x follow one another: K / 4 is a multiple of 8, so row r's entries
        // start at r · K / 8.)
        for (unsigned int i = threadIdx.x; i < nx * K / 4; i += QGEMV_RING_WARPS * 32) {
            const uint2 v = *reinterpret_cast<const uint2*>(xs + 4 * i);
            const unsigned int b = i / 8, t = i % 4, h = (i / 4) % 2;
            xp2[(4 * b + t) * 2 + h] =
                make_uint2(__byte_perm(v.x, v.y, 0x5410), __byte_perm(v.x, v.y, 0x7632));
        }
    } else {
        // Q4_K: lane t holds quant bytes 8t … 8t + 7 of a 64-value chunk, whose low nibbles
        // are values 8t … 8t + 7 of one 32-value sub-block and whose high nibbles the same of
        // the next: its B operands for a sub-block are (x[8t], x[8t + 2]), (x[8t + 1], x[8t + 3])
        // and then the same 4 further on, one 16-byte load and store per entry.
        for (unsigned int i = threadIdx.x; i < nx * K / 8; i += QGEMV_RING_WARPS * 32) {
            const uint4 v = *reinterpret_cast<const uint4*>(xs + 8 * i);
            xp[i] = make_uint4(__byte_perm(v.x, v.y, 0x5410), __byte_perm(v.x, v.y, 0x7632),
                               __byte_perm(v.z, v.w, 0x5410), __byte_perm(v.z, v.w, 0x7632));
        }
    }
    // Σ x per 32 values b by one thread, starting at value bl mod 32, bl = b's index within its
    // row of x (so a warp's 32 blocks read 32 different banks at each step — value 0 first in
    // every thread made them 16-way conflicts and cost 1–3 µs — and a row's sums do not depend
    // on the rows before it): a fixed order per block.
    for (unsigned int b = threadIdx.x; b < nx * K / 32; b += QGEMV_RING_WARPS * 32) {
        const unsigned int bl = MR == 1 ? b : b % (K / 32);
        float v = 0.0f;
#pragma unroll 8
        for (unsigned int j = 0; j < 32; ++j) v += to_f32(xs[32 * b + ((j + bl) & 31)]);
        if (FMT == QFMT_Q4_0)
            xsum[b] = -Q4Magic<T>::offset * v;
        else
            xsum2[b] = make_float2(-Q4Magic<T>::magic * v, v);
    }
    named_barrier(1, QGEMV_RING_WARPS * 32);
    const unsigned int g = lane >> 2, t4 = lane & 3;
    // With several rows of x: lane (g, t) gives B column g (x row g, zero past nx) and keeps
    // columns 2t and 2t + 1 of C (x rows 2t, 2t + 1; their Σ x start them). xo: where row g's
    // MMA layout starts (in 16-byte entries); c0o / c1o: rows 2t's and 2t + 1's sums.
    const bool xg = MR == 1 || g < nx, x0 = MR == 1 || 2 * t4 < nx, x1 = MR > 1 && 2 * t4 + 1 < nx;
    const unsigned int xo = MR == 1 ? 0 : g * (K / 8), blocks32 = K / 32;
    const unsigned int c0o = MR == 1 ? 0 : 2 * t4 * blocks32, c1o = c0o + blocks32;
    unsigned int s = 0, phase = 0;
    for (unsigned int j = 0; j < mine; ++j) {
        const unsigned int row0 = (blockIdx.x + j * gridDim.x) * QGEMV_RING_ROWS;
        // Row g's sums with x rows 2t, 2t + 1, then row g + 8's (MR 1: [0] and [2]).
        float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (unsigned int c = 0; c < chunks; ++c) {
            const unsigned int cb = min(chunk, blocks - c * chunk);
            mbar_wait(&sh.full[s], phase);
            const u8* ra = ring + s * stage_bytes + g * pitch;
            // Rows past N in a last tile hold stale bytes (the producer copies only the rows
            // that exist): their MMA rows are independent of the others and never written out.
            const u8* rb = ra + 8 * pitch;
            const unsigned int b0 = c * chunk;
            if (FMT == QFMT_Q4_0) {
                for (unsigned int p = warp; p < cb / 2; p += QGEMV_RING_WARPS) {
                    // Pair p: [d0 | 16 quants | d1 | 16 quants], 9 words.
                    const unsigned* wa = reinterpret_cast<const unsigned*>(ra + 36 * p);
                    const unsigned* wb = reinterpret_cast<const unsigned*>(rb + 36 * p);
                    const unsigned da = __byte_perm(wa[0], wa[4], 0x7610);  // d0 low, d1 high
                    const unsigned db = __byte_perm(wb[0], wb[4], 0x7610);
                    const unsigned qa0 = __funnelshift_r(wa[t4], wa[t4 + 1], 16);
                    const unsigned qb0 = __funnelshift_r(wb[t4], wb[t4 + 1], 16);
                    const unsigned qa1 = wa[5 + t4], qb1 = wb[5 + t4];
                    const unsigned int b = b0 + 2 * p;
                    const uint4 z = make_uint4(0, 0, 0, 0);
                    float c[4];
                    q4_block_mma<T>(qa0, qb0, xg ? xp[xo + 4 * b + t4] : z,
                                    x0 ? xsum[c0o + b] : 0.0f, x1 ? xsum[c1o + b] : 0.0f, c);
                    q4_accumulate<MR>(f16_bits(da & 0xFFFFu), f16_bits(db & 0xFFFFu), c, acc);
                    q4_block_mma<T>(qa1, qb1, xg ? xp[xo + 4 * b + 4 + t4] : z,
                                    x0 ? xsum[c0o + b + 1] : 0.0f, x1 ? xsum[c1o + b + 1] : 0.0f,
                                    c);
                    q4_accumulate<MR>(f16_bits(da >> 16), f16_bits(db >> 16), c, acc);
                }
            } else {
                // Super-block u: [d, dmin | 12 bytes of scales and mins | (Q5_K: 32 bytes of
                // fifth bits) | 128 quant bytes]; 64-value chunk c's quant bytes 8t … 8t + 7 are
                // words Q + 8c + 2t and the next (Q = 4, or 12 after Q5_K's fifth bits, whose
                // bytes 8t … 8t + 7 are words 4 + 2t and the next: bits 2c and 2c + 1).
                constexpr unsigned int Q = FMT == QFMT_Q4_K ? 4 : 12;
                for (unsigned int u = warp; u < cb; u += QGEMV_RING_WARPS) {
                    const unsigned* wa = reinterpret_cast<const unsigned*>(ra + BB * u);
                    const unsigned* wb = reinterpret_cast<const unsigned*>(rb + BB * u);
                    float dsa[8], dma[8], dsb[8], dmb[8];
                    q4k_scales(wa, dsa, dma);
                    q4k_scales(wb, dsb, dmb);
                    unsigned ha[2] = {0u, 0u}, hb[2] = {0u, 0u};
                    if (FMT == QFMT_Q5_K) {
                        ha[0] = wa[4 + 2 * t4];
                        ha[1] = wa[5 + 2 * t4];
                        hb[0] = wb[4 + 2 * t4];
                        hb[1] = wb[5 + 2 * t4];
                    }
                    const unsigned int sb0 = (b0 + u) * 8;  // its first 32-value sub-block
#pragma unroll
                    for (int cc = 0; cc < 4; ++cc) {
                        unsigned ra0[4], ra1[4], rb0[4], rb1[4];
                        if (FMT == QFMT_Q4_K) {
                            q4_pairs<T>(wa[Q + 8 * cc + 2 * t4], ra0);
                            q4_pairs<T>(wa[Q + 1 + 8 * cc + 2 * t4], ra1);
                            q4_pairs<T>(wb[Q + 8 * cc + 2 * t4], rb0);
                            q4_pairs<T>(wb[Q + 1 + 8 * cc + 2 * t4], rb1);
                        } else {
                            q5_pairs<T>(wa[Q + 8 * cc + 2 * t4], ha[0], 2 * cc, ra0);
                            q5_pairs<T>(wa[Q + 1 + 8 * cc + 2 * t4], ha[1], 2 * cc, ra1);
                            q5_pairs<T>(wb[Q + 8 * cc + 2 * t4], hb[0], 2 * cc, rb0);
                            q5_pairs<T>(wb[Q + 1 + 8 * cc + 2 * t4], hb[1], 2 * cc, rb1);
                        }
#pragma unroll
                        for (int h = 0; h < 2; ++h) {
                            // Sub-block 2cc + h: the low (h = 0) or high nibbles.
                            const unsigned int sub = sb0 + 2 * cc + h;
                            const float2 sx0 = x0 ? xsum2[c0o + sub] : make_float2(0.0f, 0.0f);
                            const float2 sx1 = x1 ? xsum2[c1o + sub] : make_float2(0.0f, 0.0f);
                            const uint4 xb = xg ? xp[xo + 4 * sub + t4] : make_uint4(0, 0, 0, 0);
                            float c[4];
                            block_mma<T>(ra0, rb0, h, ra1, rb1, h, xb, sx0.x, sx1.x, c);
                            acc[0] = fmaf(dsa[2 * cc + h], c[0], acc[0]);
                            acc[0] = fmaf(-dma[2 * cc + h], sx0.y, acc[0]);
                            acc[2] = fmaf(dsb[2 * cc + h], c[2], acc[2]);
                            acc[2] = fmaf(-dmb[2 * cc + h], sx0.y, acc[2]);
                            if (MR > 1) {
                                acc[1] = fmaf(dsa[2 * cc + h], c[1], acc[1]);
                                acc[1] = fmaf(-dma[2 * cc + h], sx1.y, acc[1]);
                                acc[3] = fmaf(dsb[2 * cc + h], c[3], acc[3]);
                                acc[3] = fmaf(-dmb[2 * cc + h], sx1.y, acc[3]);
                            }
                        }
                    }
                }
            }
            // The warp's reads of the slot are done (ordered by __syncwarp) before lane 0's
            // release of it.
            __syncwarp();
            if (lane == 0) mbar_arrive(&sh.empty[s]);
            ring_next(s, phase, nst);
        }
        if (MR == 1) {
            float (&part)[QGEMV_RING_WARPS][QGEMV_RING_ROWS] = sh.part[j & 1];
            if (t4 == 0) {
                part[warp][g] = acc[0];
                part[warp][g + 8] = acc[2];
            }
            named_barrier(1, QGEMV_RING_WARPS * 32);
            if (warp == 0 && lane < QGEMV_RING_ROWS && row0 + lane < N) {
                float v = 0.0f;
#pragma unroll
                for (int i = 0; i < QGEMV_RING_WARPS; ++i) v += part[i][lane];
                out[row0 + lane] = from_f32<T>(v);
            }
        } else {
            // part_rows[j mod 2][warp][x row][tile row]; then thread i sums output (x row
            // i / 16, tile row i mod 16) over the warps in order, as the one-row case does.
            float* part = part_rows + (j & 1) * (QGEMV_RING_WARPS * MR * QGEMV_RING_ROWS);
            float* pw = part + warp * (MR * QGEMV_RING_ROWS);
            if (x0) {
                pw[2 * t4 * QGEMV_RING_ROWS + g] = acc[0];
                pw[2 * t4 * QGEMV_RING_ROWS + g + 8] = acc[2];
            }
            if (x1) {
                pw[(2 * t4 + 1) * QGEMV_RING_ROWS + g] = acc[1];
                pw[(2 * t4 + 1) * QGEMV_RING_ROWS + g + 8] = acc[3];
            }
            named_barrier(1, QGEMV_RING_WARPS * 32);
            const unsigned int i = threadIdx.x, xr = i / QGEMV_RING_ROWS, tr = i % QGEMV_RING_ROWS;
            if (xr < nx && row0 + tr < N) {
                float v = 0.0f;
#pragma unroll
                for (int k = 0; k < QGEMV_RING_WARPS; ++k)
                    v += part[(k * MR + xr) * QGEMV_RING_ROWS + tr];
                out[(unsigned long long)xr * N + row0 + tr] = from_f32<T>(v);
            }
        }
    }
}
#define QGEMV_RING_BODY(T, FMT, MR, NX)                                                            \
    __shared__ __align__(8) QGemvRingShared sh;                                                    \
    qgemv_ring_impl<T, FMT, MR>(w, x, out, N, K, chunk, pitch, nst, npre, NX, sh);
#else
// Entry points exist in every image; only sm_90+ ones have a body (the launcher picks them only
// there).
#define QGEMV_RING_BODY(T, FMT, MR, NX) __trap();
#endif

// qgemv_ring_<dt>: Q4_0; qgemv_ring_q4k_<dt> / _q5k_: Q4_K / Q5_K (`chunk` counts super-blocks);
// qgemv_ring_rows_<dt>, qgemv_ring_rows_q4k_<dt>, _q5k_: the same for M ≤ QGEMV_MAX_ROWS rows of
// x (M the last argument).
#define QGEMV_RING_ENTRY(ENTRY, T, FMT)                                                            \
extern "C" __global__ void __launch_bounds__(QGEMV_RING_THREADS, 1) ENTRY(                         \
        const u8* __restrict__ w, const T* __restrict__ x, T* __restrict__ out, unsigned int N,    \
        unsigned int K, unsigned int chunk, unsigned int pitch, unsigned int nst,                  \
        unsigned int npre) {                                                                       \
    QGEMV_RING_BODY(T, FMT, 1, 1)                                                                  \
}
#define QGEMV_RING_ROWS_ENTRY(ENTRY, T, FMT)                                                       \
extern "C" __global__ void __launch_bounds__(QGEMV_RING_THREADS, 1) ENTRY(                         \
        const u8* __restrict__ w, const T* __restrict__ x, T* __restrict__ out, unsigned int N,    \
        unsigned int K, unsigned int chunk, unsigned int pitch, unsigned int nst,                  \
        unsigned int npre, unsigned int M) {                                                       \
    QGEMV_RING_BODY(T, FMT, QGEMV_MAX_ROWS, M)                                                     \
}
#define QGEMV_RING_KERNELS(T, NAME)                                                                \
    QGEMV_RING_ENTRY(qgemv_ring_##NAME, T, QFMT_Q4_0)                                              \
    QGEMV_RING_ENTRY(qgemv_ring_q4k_##NAME, T, QFMT_Q4_K)                                          \
    QGEMV_RING_ENTRY(qgemv_ring_q5k_##NAME, T, QFMT_Q5_K)                                          \
    QGEMV_RING_ROWS_ENTRY(qgemv_ring_rows_##NAME, T, QFMT_Q4_0)                                    \
    QGEMV_RING_ROWS_ENTRY(qgemv_ring_rows_q4k_##NAME, T, QFMT_Q4_K)                                \
    QGEMV_RING_ROWS_ENTRY(qgemv_ring_rows_q5k_##NAME, T, QFMT_Q5_K)

QGEMV_RING_KERNELS(f16, f16)
QGEMV_RING_KERNELS(bf16, bf16)
