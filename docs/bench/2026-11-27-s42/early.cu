// Session 42: a single-row GEMV shaped like session 19's unsafe floor read (every weight load
// of a thread issued before the PDL wait, the next launch let in at entry, blocks small enough
// that two launches fit an SM), beside the same kernel with its loads after the wait, in
// session 19's harness; every output checked against a host reference.
//
// gemv_early<U, L, BT, MINB, EARLY>: teams of L lanes, one weight row ([N, K] bf16) a team, lane l
// holding the row's 16-byte packs l, l + L, …, l + (U − 1) L in registers (K = 8 U L); x copied to shared
// memory after the wait; each lane's dot product in pack order, then a butterfly over the team.
// EARLY: launch_dependents, weight loads, wait (legal only for weights nothing writes while the
// GEMV may run); else wait, launch_dependents, weight loads.
//
// Build: nvcc -O3 -std=c++17 -arch=sm_90a -I gpukit-kernels/cuda early.cu -o early
// Usage: early K,N,U,L,BT,MINB,EARLY […]   (U,L,BT,MINB ∈ {7,16,320,4}, {7,16,256,4}, {8,16,256,4},
// {8,32,256,4}: BT threads a block, at least MINB blocks an SM)
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "../2026-11-24-h200-s19/harness.cuh"
#include "common.cuh"

__device__ __forceinline__ uint4 ld_stream(const void* p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

template <int U, int L, int BT, int MINB, bool EARLY>
__global__ void __launch_bounds__(BT, MINB) gemv_early(const bf16* __restrict__ x,
        const bf16* __restrict__ w, bf16* __restrict__ out, unsigned N, unsigned K) {
    __shared__ __align__(16) uint4 xs[256];  // K ≤ 2048
    const unsigned packs = K / 8, li = threadIdx.x % L;
    const unsigned row = (blockIdx.x * BT + threadIdx.x) / L;
    const bool live = row < N;
    const uint4* wr = reinterpret_cast<const uint4*>(w + (size_t)(live ? row : 0) * K);
    uint4 wv[U];
    if (EARLY) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    else {
        asm volatile("griddepcontrol.wait;" ::: "memory");
        asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    }
#pragma unroll
    for (int j = 0; j < U; ++j) wv[j] = ld_stream(wr + li + j * L);
    if (EARLY) asm volatile("griddepcontrol.wait;" ::: "memory");
    if (threadIdx.x < packs) xs[threadIdx.x] = __ldcg(reinterpret_cast<const uint4*>(x) + threadIdx.x);
    __syncthreads();
    float acc = 0.0f;
#pragma unroll
    for (int j = 0; j < U; ++j) {
        {
            const uint4 xv = xs[li + j * L];
            const unsigned xw[4] = {xv.x, xv.y, xv.z, xv.w}, ww[4] = {wv[j].x, wv[j].y, wv[j].z, wv[j].w};
            float d = 0.0f;
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                d = fmaf(__uint_as_float(xw[e] << 16), __uint_as_float(ww[e] << 16), d);
                d = fmaf(__uint_as_float(xw[e] & 0xffff0000u), __uint_as_float(ww[e] & 0xffff0000u), d);
            }
            acc += d;
        }
    }
#pragma unroll
    for (int o = L / 2; o >= 1; o /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (live && li == 0) out[row] = from_f32<bf16>(acc);
}

typedef void (*Kern)(const bf16*, const bf16*, bf16*, unsigned, unsigned);
static Kern pick(unsigned U, unsigned L, unsigned bt, unsigned minb, bool early) {
#define PICK(u, l, b, m)                                                                   \
    if (U == u && L == l && bt == b && minb == m)                                              \
        return early ? gemv_early<u, l, b, m, true> : gemv_early<u, l, b, m, false>;
    PICK(7, 16, 320, 4) PICK(7, 16, 256, 4) PICK(8, 16, 256, 4) PICK(8, 32, 256, 4)
    return nullptr;
}

int main(int argc, char** argv) {
    CK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
    const double copy_gbs = copy_ceiling_gbs();
    for (int a = 1; a < argc; ++a) {
        unsigned K, N, U, L, bt, minb, early;
        if (sscanf(argv[a], "%u,%u,%u,%u,%u,%u,%u", &K, &N, &U, &L, &bt, &minb, &early) < 7) return 2;
        Kern k = pick(U, L, bt, minb, early);
        if (!k || K % 8 || K / 8 != U * L) { fprintf(stderr, "bad config %s\n", argv[a]); return 2; }
        const size_t bytes = size_t(N) * K * 2, copies = rotation(bytes);
        unsigned char* w;
        CK(cudaMalloc(&w, copies * bytes));
        fill<<<1024, 256, 0, g_stream>>>(reinterpret_cast<unsigned*>(w), copies * bytes / 4);
        bf16 *x, *out;
        CK(cudaMalloc(&x, K * 2));
        fill<<<1, 256, 0, g_stream>>>(reinterpret_cast<unsigned*>(x), K / 2);
        CK(cudaMalloc(&out, N * 2));
        const unsigned grid = (unsigned)((size_t(N) * L + bt - 1) / bt);
        int per_sm = 0;
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, bt, 0));
        cudaFuncAttributes fa;
        CK(cudaFuncGetAttributes(&fa, k));
        auto call = [&](const unsigned char* wi) {
            launch(k, grid, bt, 0, true, (const bf16*)x, (const bf16*)wi, out, N, K);
        };
        const double us = time_us([&](int i) { call(w + (i % copies) * bytes); });
        CK(cudaMemset(out, 0xff, N * 2));
        call(w);
        const double worst = gemv_bf16_error(w, x, out, N, K);
        char label[32];
        snprintf(label, sizeof label, "%s/u%uL%ub%u", early ? "early" : "after", U, L, bt);
        printf("%-8s R=1 S=%u nst=0  k=%-6u n=%-6u %7.2f us  %5.1f%% of copy (%.0f GB/s)  "
               "max |out - ref| / sum|x w| %.1e  %d/SM grid=%u regs=%d\n", label, L, K, N, us,
               100.0 * bytes / (copy_gbs * 1e3) / us, copy_gbs, worst, per_sm, grid, fa.numRegs);
        fflush(stdout);
        CK(cudaFree(w));
        CK(cudaFree(x));
        CK(cudaFree(out));
    }
    return 0;
}
