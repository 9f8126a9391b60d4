// Session 33: a single-row GEMV for constant weights (nothing writes them while kernels run):
// every weight load of a thread is issued before the PDL wait, into registers; after the wait each
// thread dots its packs with x, writes one partial per pack to shared memory, and warps sum each
// row in a fixed order. Timed in session 19's harness (graphs of 50 calls with PDL, weights
// rotated past L2), every output checked against a host reference.
// Usage: cprobe MODE,THREADS,U,MINB,GRID[,K,N] ... (K, N default 896, 4864).
#include <cmath>
#include <cstring>

#include "../2026-11-24-h200-s19/harness.cuh"
#include "common.cuh"

template <typename T> __device__ __forceinline__ Pack<T> ld_stream(const T* p) {
    uint4 r;
    asm volatile("ld.global.cs.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
    return *reinterpret_cast<Pack<T>*>(&r);
}

// MODE 0: the packs in registers (U per thread); MODE 1: cp.async (16-byte LDGSTS) into shared
// memory, each thread later reading only its own packs (no barrier before the dot products).
// Block b takes rows [b N / grid, (b + 1) N / grid). MINB: blocks per SM for __launch_bounds__.
template <typename T, int THREADS, int U, int MODE, int MINB>
__global__ void __launch_bounds__(THREADS, MINB)
gemv_const(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
           T* __restrict__ out, unsigned N, unsigned K) {
    extern __shared__ __align__(16) unsigned char dyn[];
    const int V = Vec16<T>::N;
    const unsigned P = K / V;
    const unsigned long long r0 = (unsigned long long)blockIdx.x * N / gridDim.x;
    const unsigned nr = (unsigned)((unsigned long long)(blockIdx.x + 1) * N / gridDim.x - r0);
    const unsigned total = nr * P;
    const T* wb = w + r0 * K;
    pdl_launch_dependents();
    float* part = reinterpret_cast<float*>(dyn + (MODE == 1 ? (size_t)total * 16 : 0));
    if (MODE == 0) {
        Pack<T> wv[U];
#pragma unroll
        for (int j = 0; j < U; ++j) {
            const unsigned p = threadIdx.x + j * THREADS;
            if (p < total) wv[j] = ld_stream(wb + (size_t)p * V);
        }
        pdl_wait();
#pragma unroll
        for (int j = 0; j < U; ++j) {
            const unsigned p = threadIdx.x + j * THREADS;
            if (p < total) {
                const Pack<T> xv = load16(x + (p % P) * V);
                float d = 0.0f;
#pragma unroll
                for (int e = 0; e < V; ++e) d = fmaf(to_f32(xv.v[e]), to_f32(wv[j].v[e]), d);
                part[p] = d;
            }
        }
    } else {
        for (unsigned p = threadIdx.x; p < total; p += THREADS)
            asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16;"
                         :: "r"(smem_addr(dyn + (size_t)p * 16)), "l"(wb + (size_t)p * V) : "memory");
        asm volatile("cp.async.commit_group;" ::: "memory");
        pdl_wait();
        asm volatile("cp.async.wait_all;" ::: "memory");
        for (unsigned p = threadIdx.x; p < total; p += THREADS) {
            const Pack<T> xv = load16(x + (p % P) * V);
            const Pack<T> wv = *reinterpret_cast<const Pack<T>*>(dyn + (size_t)p * 16);
            float d = 0.0f;
#pragma unroll
            for (int e = 0; e < V; ++e) d = fmaf(to_f32(xv.v[e]), to_f32(wv.v[e]), d);
            part[p] = d;
        }
    }
    __syncthreads();
    const unsigned warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    for (unsigned r = warp; r < nr; r += THREADS / 32) {
        float s = 0.0f;
        for (unsigned i = lane; i < P; i += 32) s += part[r * P + i];
        s = warp_sum(s);
        if (lane == 0) out[r0 + r] = from_f32<T>(bias ? s + to_f32(bias[r0 + r]) : s);
    }
}

int main(int argc, char** argv) {
    CK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
    const double copy_gbs = copy_ceiling_gbs();
    for (int a = 1; a < argc; ++a) {
        unsigned mode, threads, U, minb, grid, K = 896, N = 4864;
        if (sscanf(argv[a], "%u,%u,%u,%u,%u,%u,%u", &mode, &threads, &U, &minb, &grid, &K, &N) < 5)
            return 2;
        const unsigned P = K / 8, rpb = (N + grid - 1) / grid;
        if (mode == 0 && rpb * P > threads * U) { printf("rows too many for U\n"); continue; }
        const size_t bytes = size_t(N) * K * 2, copies = rotation(bytes);
        const size_t smem = size_t(rpb) * P * (mode == 1 ? 20 : 4);
        unsigned char* w;
        CK(cudaMalloc(&w, copies * bytes));
        fill<<<1024, 256, 0, g_stream>>>(reinterpret_cast<unsigned*>(w), copies * bytes / 4);
        bf16 *x, *out;
        CK(cudaMalloc(&x, K * 2));
        fill<<<1, 256, 0, g_stream>>>(reinterpret_cast<unsigned*>(x), K / 2);
        CK(cudaMalloc(&out, N * 2));
        auto call = [&](const unsigned char* wi) {
#define C(MM, TT, UU, BB) if (mode == MM && threads == TT && U == UU && minb == BB) { \
            CK(cudaFuncSetAttribute(gemv_const<bf16, TT, UU, MM, BB>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem))); \
            launch(gemv_const<bf16, TT, UU, MM, BB>, grid, TT, smem, true, (const bf16*)x, (const bf16*)wi, \
                   (const bf16*)nullptr, out, N, K); return; }
            C(0, 512, 5, 2) C(0, 512, 5, 4) C(0, 1024, 5, 1) C(0, 1024, 5, 2) C(0, 512, 4, 4)
            C(0, 256, 5, 8) C(0, 256, 8, 4) C(1, 512, 1, 2) C(1, 1024, 1, 1) C(1, 256, 1, 4)
            C(1, 512, 1, 4) C(1, 1024, 1, 2)
            fprintf(stderr, "no instance\n");
            exit(2);
        };
        const double us = time_us([&](int i) { call(w + (i % copies) * bytes); });
        CK(cudaMemset(out, 0xff, N * 2));
        call(w);
        const double worst = gemv_bf16_error(w, x, out, N, K);
        printf("const mode=%u T=%-4u U=%-2u minb=%u grid=%-4u k=%-6u n=%-6u %7.2f us  %5.1f%% of copy "
               "(%.0f GB/s)  max |out - ref| / sum|x w| %.1e\n", mode, threads, U, minb, grid, K, N, us,
               100.0 * bytes / (copy_gbs * 1e3) / us, copy_gbs, worst);
        fflush(stdout);
        CK(cudaFree(w));
        CK(cudaFree(x));
        CK(cudaFree(out));
    }
    return 0;
}
