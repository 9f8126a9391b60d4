// The batch-invariant linear: y[M, N] = x[M, K] · W[N, K]ᵀ + bias, f16/bf16 on the tensor cores
// (mma.sync m16n8k16, f32 accumulation), for any M.
//
// A serving engine runs a sequence's rows beside other sequences' rows; for its results to be
// the same alone and in any batch, each output element must be summed in an order that does not
// depend on M (He et al. 2025, "Defeating Nondeterminism in LLM Inference"). Every kernel here
// sums an output element the same way: K is cut into segments of LINEAR_KSEG; a segment's sum is
// an f32 accumulator from zero taking one mma.sync m16n8k16 per 16-deep chunk of K, the chunks
// in order (none past K); the element is 0 + the segments' sums in segment order, then the bias,
// then one rounding. A block either walks all segments itself (fused) or computes one segment
// (split, blockIdx.z) and writes its sum to the `partial` workspace, which `linear_reduce` adds
// up in segment order: the same sum, with more blocks for few rows or a deep K. How rows and
// outputs are tiled, how deep a pipeline stage is and whether segments run split do not change
// that sum, so the variants — `linear_tiled` for many rows, `linear_skinny` for at most 16 —
// give the same bits for a row, whatever the number of rows, the row's place among them or the
// block computing it (tested).
//
// linear_tiled: LINEAR_TILE_M rows × LINEAR_TILE_N outputs, four warps in a 2 × 2 grid (warp tile 32 ×
// 64: 2 × 8 mma tiles), LINEAR_STAGES cp.async stages of x and W tiles in shared memory (rows
// padded by 8 elements, so that ldmatrix is free of bank conflicts). Rows past M, outputs past N
// and K past its end are zero-filled on load and not stored. K must be a multiple of 8 and x and
// W 16-byte aligned (16-byte loads).
#include "common.cuh"

static_assert(LINEAR_KSEG % LINEAR_TILE_K == 0 && LINEAR_KSEG % LINEAR_SKINNY_K == 0,
              "a K segment is whole pipeline stages of either kernel");

#define LT_PAD 8
#define LT_ROW (LINEAR_TILE_K + LT_PAD)

template <typename T>
__device__ __forceinline__ void linear_load_stage(T (*xs)[LT_ROW], T (*ws)[LT_ROW], const T* __restrict__ x,
                                                  const T* __restrict__ w, unsigned int M, unsigned int N,
                                                  unsigned int K, unsigned int m0, unsigned int n0,
                                                  unsigned int k0) {
    constexpr int V = 8;  // elements per 16-byte chunk
    constexpr int CHUNKS_ROW = LINEAR_TILE_K / V;
    for (int c = threadIdx.x; c < LINEAR_TILE_M * CHUNKS_ROW; c += LINEAR_THREADS) {
        const int r = c / CHUNKS_ROW, kc = (c % CHUNKS_ROW) * V;
        const unsigned int row = m0 + r, k = k0 + kc;
        const bool ok = row < M && k < K;
        cp_async16(&xs[r][kc], ok ? x + (unsigned long long)row * K + k : x, ok);
    }
    for (int c = threadIdx.x; c < LINEAR_TILE_N * CHUNKS_ROW; c += LINEAR_THREADS) {
        const int r = c / CHUNKS_ROW, kc = (c % CHUNKS_ROW) * V;
        const unsigned int n = n0 + r, k = k0 + kc;
        const bool ok = n < N && k < K;
        cp_async16(&ws[r][kc], ok ? w + (unsigned long long)n * K + k : w, ok);
    }
}

// The K tiles a block walks: all of them (fused), or segment blockIdx.z's (split: `partial` set).
struct KRange {
    unsigned int begin, end, per_seg;
};

__device__ __forceinline__ KRange k_range(unsigned int K, unsigned int tile_k, bool split) {
    const unsigned int count = (K + tile_k - 1) / tile_k, per_seg = LINEAR_KSEG / tile_k;
    if (!split) return {0u, count, per_seg};
    const unsigned int begin = blockIdx.z * per_seg;
    return {begin, min(count, begin + per_seg), per_seg};
}

// One output element's end: written with the bias (fused, or a single segment), or its
// segment's sum written to the workspace.
template <typename T>
__device__ __forceinline__ void linear_store(T* __restrict__ y, float* __restrict__ partial,
                                             const T* __restrict__ bias, unsigned int M, unsigned int N,
                                             unsigned int row, unsigned int n, float total) {
    if (partial && gridDim.z > 1) {
        partial[((unsigned long long)blockIdx.z * M + row) * N + n] = total;
        return;
    }
    float v = total;
    if (bias) v += to_f32(bias[n]);
    y[(unsigned long long)row * N + n] = from_f32<T>(v);
}

template <typename T>
__device__ __forceinline__ void linear_tiled_impl(const T* __restrict__ x, const T* __restrict__ w,
                                                  const T* __restrict__ bias, T* __restrict__ y,
                                                  float* __restrict__ partial, unsigned int M,
                                                  unsigned int N, unsigned int K) {
    __shared__ __align__(16) T xs[LINEAR_STAGES][LINEAR_TILE_M][LT_ROW];
    __shared__ __align__(16) T ws[LINEAR_STAGES][LINEAR_TILE_N][LT_ROW];
    const unsigned int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const unsigned int wm = warp / 2, wn = warp % 2;  // the warp's 32 × 64 quarter of the tile
    const unsigned int m0 = blockIdx.y * LINEAR_TILE_M, n0 = blockIdx.x * LINEAR_TILE_N;
    const KRange kr = k_range(K, LINEAR_TILE_K, partial != nullptr);
    float acc[2][8][4], total[2][8][4];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = total[i][j][e] = 0.0f;
    pdl_enter();
#pragma unroll
    for (int s = 0; s < LINEAR_STAGES - 1; ++s) {
        if (kr.begin + s < kr.end)
            linear_load_stage<T>(xs[s], ws[s], x, w, M, N, K, m0, n0, (kr.begin + s) * LINEAR_TILE_K);
        cp_async_commit();
    }
    for (unsigned int kt = kr.begin; kt < kr.end; ++kt) {
        if (kt != kr.begin && kt % kr.per_seg == 0) {
            // A segment ends: its sum joins the total and the next starts from zero.
#pragma unroll
            for (int i = 0; i < 2; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j)
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        total[i][j][e] += acc[i][j][e];
                        acc[i][j][e] = 0.0f;
                    }
        }
        cp_async_wait<LINEAR_STAGES - 2>();
        __syncthreads();
        const unsigned int next = kt + LINEAR_STAGES - 1;
        if (next < kr.end) {
            const int s = (next - kr.begin) % LINEAR_STAGES;
            linear_load_stage<T>(xs[s], ws[s], x, w, M, N, K, m0, n0, next * LINEAR_TILE_K);
        }
        cp_async_commit();
        const int s = (kt - kr.begin) % LINEAR_STAGES;
#pragma unroll
        for (int ks = 0; ks < LINEAR_TILE_K; ks += 16) {
            // A chunk wholly past K adds nothing (and is skipped in every variant, so that no
            // variant adds zeros another does not: -0 + 0 is +0).
            if (kt * LINEAR_TILE_K + ks >= K) break;
            unsigned a[2][4];
#pragma unroll
            for (int i = 0; i < 2; ++i) {
                // Lanes 0-15: rows 0-15 at k lo; lanes 16-31: the same rows at k hi.
                const T* p = &xs[s][wm * 32 + i * 16 + (lane & 15)][ks + (lane >> 4) * 8];
                ldsm_x4(a[i][0], a[i][1], a[i][2], a[i][3], p);
            }
#pragma unroll
            for (int j = 0; j < 8; j += 2) {
                // Matrices: (n 0-7, k lo), (n 0-7, k hi), (n 8-15, k lo), (n 8-15, k hi).
                const unsigned int n = wn * 64 + j * 8 + (lane & 7) + ((lane >> 4) << 3);
                const T* p = &ws[s][n][ks + ((lane >> 3) & 1) * 8];
                unsigned b0, b1, b2, b3;
                ldsm_x4(b0, b1, b2, b3, p);
#pragma unroll
                for (int i = 0; i < 2; ++i) {
                    mma16816<T>(acc[i][j], a[i], b0, b1);
                    mma16816<T>(acc[i][j + 1], a[i], b2, b3);
                }
            }
        }
    }
    cp_async_wait<0>();
    // Accumulator (i, j): rows wm·32 + 16i + lane/4 (+8), columns wn·64 + 8j + 2·(lane%4) (+1).
#pragma unroll
    for (int i = 0; i < 2; ++i) {
#pragma unroll
        for (int j = 0; j < 8; ++j) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const unsigned int row = m0 + wm * 32 + i * 16 + (lane >> 2) + (e >> 1) * 8;
                const unsigned int n = n0 + wn * 64 + j * 8 + (lane & 3) * 2 + (e & 1);
                if (row < M && n < N) linear_store(y, partial, bias, M, N, row, n, total[i][j][e] + acc[i][j][e]);
            }
        }
    }
}

// linear_skinny: at most 16 rows (one mma row tile), LINEAR_SKINNY_N outputs per block (four
// warps, one 8-wide mma column tile each) and LINEAR_SKINNY_K-deep stages: many blocks and
// many bytes in flight per block, for the memory-bound shapes of decode batches.
#define LS_ROW (LINEAR_SKINNY_K + LT_PAD)

template <typename T>
__device__ __forceinline__ void linear_skinny_impl(const T* __restrict__ x, const T* __restrict__ w,
                                                   const T* __restrict__ bias, T* __restrict__ y,
                                                   float* __restrict__ partial, unsigned int M,
                                                   unsigned int N, unsigned int K) {
    __shared__ __align__(16) T xs[LINEAR_SKINNY_STAGES][16][LS_ROW];
    __shared__ __align__(16) T ws[LINEAR_SKINNY_STAGES][LINEAR_SKINNY_N][LS_ROW];
    const unsigned int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const unsigned int n0 = blockIdx.x * LINEAR_SKINNY_N;
    const KRange kr = k_range(K, LINEAR_SKINNY_K, partial != nullptr);
    constexpr int CH = LINEAR_SKINNY_K / 8;  // 16-byte chunks per row and stage
    auto load = [&](int s, unsigned int k0) {
        for (int c = threadIdx.x; c < 16 * CH; c += LINEAR_THREADS) {
            const int r = c / CH, kc = (c % CH) * 8;
            const unsigned int k = k0 + kc;
            const bool ok = (unsigned int)r < M && k < K;
            cp_async16(&xs[s][r][kc], ok ? x + (unsigned long long)r * K + k : x, ok);
        }
        for (int c = threadIdx.x; c < LINEAR_SKINNY_N * CH; c += LINEAR_THREADS) {
            const int r = c / CH, kc = (c % CH) * 8;
            const unsigned int n = n0 + r, k = k0 + kc;
            const bool ok = n < N && k < K;
            cp_async16(&ws[s][r][kc], ok ? w + (unsigned long long)n * K + k : w, ok);
        }
    };
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f}, total[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    pdl_enter();
#pragma unroll
    for (int s = 0; s < LINEAR_SKINNY_STAGES - 1; ++s) {
        if (kr.begin + s < kr.end) load(s, (kr.begin + s) * LINEAR_SKINNY_K);
        cp_async_commit();
    }
    for (unsigned int kt = kr.begin; kt < kr.end; ++kt) {
        if (kt != kr.begin && kt % kr.per_seg == 0) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                total[e] += acc[e];
                acc[e] = 0.0f;
            }
        }
        cp_async_wait<LINEAR_SKINNY_STAGES - 2>();
        __syncthreads();
        const unsigned int next = kt + LINEAR_SKINNY_STAGES - 1;
        if (next < kr.end) load((next - kr.begin) % LINEAR_SKINNY_STAGES, next * LINEAR_SKINNY_K);
        cp_async_commit();
        const int s = (kt - kr.begin) % LINEAR_SKINNY_STAGES;
#pragma unroll
        for (int ks = 0; ks < LINEAR_SKINNY_K; ks += 32) {
            // Two chunks: this warp's 8 weight rows at k ks, ks + 8, ks + 16, ks + 24.
            unsigned b0, b1, b2, b3;
            ldsm_x4(b0, b1, b2, b3, &ws[s][warp * 8 + (lane & 7)][ks + (lane >> 3) * 8]);
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                const unsigned int k = kt * LINEAR_SKINNY_K + ks + half * 16;
                if (k >= K) break;
                unsigned a[4];
                ldsm_x4(a[0], a[1], a[2], a[3], &xs[s][lane & 15][ks + half * 16 + (lane >> 4) * 8]);
                if (half == 0) mma16816<T>(acc, a, b0, b1);
                else mma16816<T>(acc, a, b2, b3);
            }
        }
    }
    cp_async_wait<0>();
#pragma unroll
    for (int e = 0; e < 4; ++e) {
        const unsigned int row = (lane >> 2) + (e >> 1) * 8;
        const unsigned int n = n0 + warp * 8 + (lane & 3) * 2 + (e & 1);
        if (row < M && n < N) linear_store(y, partial, bias, M, N, row, n, total[e] + acc[e]);
    }
}

// The split variants' sums: each element 0 + the segments' sums in segment order, then the
// bias and one rounding.
template <typename T>
__device__ __forceinline__ void linear_reduce_impl(const float* __restrict__ partial, const T* __restrict__ bias,
                                                   T* __restrict__ y, unsigned int M, unsigned int N,
                                                   unsigned int segments) {
    pdl_enter();
    const unsigned long long count = (unsigned long long)M * N;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < count;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        float total = 0.0f;
        for (unsigned int s = 0; s < segments; ++s) total += partial[s * count + i];
        float v = total;
        if (bias) v += to_f32(bias[i % N]);
        y[i] = from_f32<T>(v);
    }
}

#define LINEAR_KERNELS(T, NAME)                                                                    \
extern "C" __global__ void __launch_bounds__(LINEAR_THREADS) linear_tiled_##NAME(                  \
        const T* x, const T* w, const T* bias, T* y, float* partial, unsigned int M,              \
        unsigned int N, unsigned int K) {                                                         \
    linear_tiled_impl<T>(x, w, bias, y, partial, M, N, K);                                        \
}                                                                                                 \
extern "C" __global__ void __launch_bounds__(LINEAR_THREADS) linear_skinny_##NAME(                 \
        const T* x, const T* w, const T* bias, T* y, float* partial, unsigned int M,              \
        unsigned int N, unsigned int K) {                                                         \
    linear_skinny_impl<T>(x, w, bias, y, partial, M, N, K);                                       \
}                                                                                                 \
extern "C" __global__ void linear_reduce_##NAME(const float* partial, const T* bias, T* y,        \
        unsigned int M, unsigned int N, unsigned int segments) {                                  \
    linear_reduce_impl<T>(partial, bias, y, M, N, segments);                                      \
}

LINEAR_KERNELS(f16, f16)
LINEAR_KERNELS(bf16, bf16)
