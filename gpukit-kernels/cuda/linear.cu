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
// that sum, so the tilings of LINEAR_TILES (one kernel each, `linear_t<i>_<dtype>`, the host
// picking one by the number of rows) give the same bits for a row, whatever the number of rows,
// the row's place among them or the block computing it (tested).
#include "common.cuh"

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

// A tiling's kernel: TM rows × TN outputs a block, TK-deep pipeline stages, ST cp.async stages
// of x and W tiles in dynamic shared memory (rows padded by 8 elements, so that ldmatrix is free
// of bank conflicts), warps of WM × WN outputs each (WM a multiple of 16, WN of 8). Row tiles
// are blockIdx.x, so the blocks reading one weight tile run together and share it through L2.
// FUSED: a block walks every K segment, keeping the finished segments' sum beside the running
// one; otherwise a block sums the one segment blockIdx.z (the host makes the grid's z the number
// of segments and, past one, passes the workspace), which halves the accumulator registers.
// Rows past M, outputs past N and K past its end are zero-filled on load and not stored. K must
// be a multiple of 8 and x and W 16-byte aligned (16-byte loads).
template <typename T, int TM, int TN, int TK, int ST, int WM, int WN, bool FUSED>
__device__ __forceinline__ void linear_tile_impl(const T* __restrict__ x, const T* __restrict__ w,
                                                 const T* __restrict__ bias, T* __restrict__ y,
                                                 float* __restrict__ partial, unsigned int M,
                                                 unsigned int N, unsigned int K) {
    static_assert(LINEAR_KSEG % TK == 0, "a K segment is whole pipeline stages");
    static_assert(TM % WM == 0 && TN % WN == 0 && WM % 16 == 0 && WN % 8 == 0, "warp tiling");
    static_assert(WN == 8 || WN % 16 == 0, "mma column tiles in pairs, or one");
    constexpr int ROW = TK + 8, WARPS_N = TN / WN, THREADS = (TM / WM) * WARPS_N * 32;
    constexpr int FI = WM / 16, FJ = WN / 8, CH = TK / 8;  // mma tiles; 16-byte chunks a row
    constexpr int TI = FUSED ? FI : 1, TJ = FUSED ? FJ : 1;
    extern __shared__ __align__(16) unsigned char linear_smem[];
    T(*xs)[TM][ROW] = reinterpret_cast<T(*)[TM][ROW]>(linear_smem);
    T(*ws)[TN][ROW] = reinterpret_cast<T(*)[TN][ROW]>(linear_smem + sizeof(T) * ST * TM * ROW);
    const unsigned int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const unsigned int wm = warp / WARPS_N, wn = warp % WARPS_N;
    const unsigned int m0 = blockIdx.x * TM, n0 = blockIdx.y * TN;
    const unsigned int count = (K + TK - 1) / TK, per_seg = LINEAR_KSEG / TK;
    const unsigned int kb = FUSED ? 0u : blockIdx.z * per_seg;
    const unsigned int ke = FUSED ? count : min(count, kb + per_seg);
    auto load = [&](int s, unsigned int k0) {
        for (int c = threadIdx.x; c < TM * CH; c += THREADS) {
            const int r = c / CH, kc = (c % CH) * 8;
            const unsigned int row = m0 + r, k = k0 + kc;
            const bool ok = row < M && k < K;
            cp_async16(&xs[s][r][kc], ok ? x + (unsigned long long)row * K + k : x, ok);
        }
        for (int c = threadIdx.x; c < TN * CH; c += THREADS) {
            const int r = c / CH, kc = (c % CH) * 8;
            const unsigned int n = n0 + r, k = k0 + kc;
            const bool ok = n < N && k < K;
            cp_async16(&ws[s][r][kc], ok ? w + (unsigned long long)n * K + k : w, ok);
        }
    };
    // total: the finished segments' sum (fused tilings; a placeholder otherwise).
    float acc[FI][FJ][4], total[TI][TJ][4];
#pragma unroll
    for (int i = 0; i < FI; ++i)
#pragma unroll
        for (int j = 0; j < FJ; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
#pragma unroll
    for (int i = 0; i < TI; ++i)
#pragma unroll
        for (int j = 0; j < TJ; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) total[i][j][e] = 0.0f;
    pdl_enter();
#pragma unroll
    for (int s = 0; s < ST - 1; ++s) {
        if (kb + s < ke) load(s, (kb + s) * TK);
        cp_async_commit();
    }
    for (unsigned int kt = kb; kt < ke; ++kt) {
        if constexpr (FUSED) {
            if (kt != kb && kt % per_seg == 0) {
                // A segment ends: its sum joins the total and the next starts from zero.
#pragma unroll
                for (int i = 0; i < FI; ++i)
#pragma unroll
                    for (int j = 0; j < FJ; ++j)
#pragma unroll
                        for (int e = 0; e < 4; ++e) {
                            total[i][j][e] += acc[i][j][e];
                            acc[i][j][e] = 0.0f;
                        }
            }
        }
        cp_async_wait<ST - 2>();
        __syncthreads();
        const unsigned int next = kt + ST - 1;
        if (next < ke) load((next - kb) % ST, next * TK);
        cp_async_commit();
        const int s = (kt - kb) % ST;
#pragma unroll
        for (int ks = 0; ks < TK; ks += 16) {
            // A chunk wholly past K adds nothing (and is skipped in every tiling, so that none
            // adds zeros another does not: -0 + 0 is +0).
            if (kt * TK + ks >= K) break;
            unsigned a[FI][4];
#pragma unroll
            for (int i = 0; i < FI; ++i) {
                // Lanes 0-15: rows 0-15 at k lo; lanes 16-31: the same rows at k hi.
                ldsm_x4(a[i][0], a[i][1], a[i][2], a[i][3],
                        &xs[s][wm * WM + i * 16 + (lane & 15)][ks + (lane >> 4) * 8]);
            }
            if constexpr (FJ == 1) {
                // Matrices: (n 0-7, k lo), (n 0-7, k hi).
                unsigned b0, b1;
                ldsm_x2(b0, b1, &ws[s][wn * WN + (lane & 7)][ks + ((lane >> 3) & 1) * 8]);
#pragma unroll
                for (int i = 0; i < FI; ++i) mma16816<T>(acc[i][0], a[i], b0, b1);
            } else {
#pragma unroll
                for (int j = 0; j < FJ; j += 2) {
                    // Matrices: (n 0-7, k lo), (n 0-7, k hi), (n 8-15, k lo), (n 8-15, k hi).
                    const unsigned int n = wn * WN + j * 8 + (lane & 7) + ((lane >> 4) << 3);
                    unsigned b0, b1, b2, b3;
                    ldsm_x4(b0, b1, b2, b3, &ws[s][n][ks + ((lane >> 3) & 1) * 8]);
#pragma unroll
                    for (int i = 0; i < FI; ++i) {
                        mma16816<T>(acc[i][j], a[i], b0, b1);
                        mma16816<T>(acc[i][j + 1], a[i], b2, b3);
                    }
                }
            }
        }
    }
    cp_async_wait<0>();
    // Accumulator (i, j): rows wm·WM + 16i + lane/4 (+8), columns wn·WN + 8j + 2·(lane%4) (+1).
#pragma unroll
    for (int i = 0; i < FI; ++i) {
#pragma unroll
        for (int j = 0; j < FJ; ++j) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const unsigned int row = m0 + wm * WM + i * 16 + (lane >> 2) + (e >> 1) * 8;
                const unsigned int n = n0 + wn * WN + j * 8 + (lane & 3) * 2 + (e & 1);
                const float t = (FUSED ? total[i % TI][j % TJ][e] : 0.0f) + acc[i][j][e];
                if (row < M && n < N) linear_store(y, partial, bias, M, N, row, n, t);
            }
        }
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

// One kernel per tiling of LINEAR_TILES (generated from the Rust side's table) and dtype.
#define LINEAR_TILE_KERNEL(I, TM, TN, TK, ST, WM, WN, FUSED, T, NAME)                              \
extern "C" __global__ void __launch_bounds__((TM / WM) * (TN / WN) * 32) linear_t##I##_##NAME(    \
        const T* x, const T* w, const T* bias, T* y, float* partial, unsigned int M,              \
        unsigned int N, unsigned int K) {                                                         \
    linear_tile_impl<T, TM, TN, TK, ST, WM, WN, FUSED>(x, w, bias, y, partial, M, N, K);          \
}
#define LINEAR_TILE_KERNELS(I, TM, TN, TK, ST, WM, WN, FUSED)                                     \
    LINEAR_TILE_KERNEL(I, TM, TN, TK, ST, WM, WN, FUSED, f16, f16)                                \
    LINEAR_TILE_KERNEL(I, TM, TN, TK, ST, WM, WN, FUSED, bf16, bf16)
LINEAR_TILES(LINEAR_TILE_KERNELS)

#define LINEAR_REDUCE_KERNEL(T, NAME)                                                             \
extern "C" __global__ void linear_reduce_##NAME(const float* partial, const T* bias, T* y,        \
        unsigned int M, unsigned int N, unsigned int segments) {                                  \
    linear_reduce_impl<T>(partial, bias, y, M, N, segments);                                      \
}
LINEAR_REDUCE_KERNEL(f16, f16)
LINEAR_REDUCE_KERNEL(bf16, bf16)
