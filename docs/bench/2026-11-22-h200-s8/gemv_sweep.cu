// Standalone GEMV sweep (not part of the project; deleted before commit).
#include "../gpukit-kernels/cuda/gemv.cu"
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cstring>
#include <cmath>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %d: %s\n", #x, __LINE__, cudaGetErrorString(e)); exit(1); } } while (0)

// warp per row, persistent
template <int U>
__global__ void __launch_bounds__(256) wrow(const bf16* __restrict__ x, const bf16* __restrict__ w, bf16* __restrict__ out, unsigned N, unsigned K) {
    const unsigned warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const unsigned long long warps = (unsigned long long)gridDim.x * 8;
    unsigned long long n = (unsigned long long)blockIdx.x * 8 + warp;
    if (n < N) row_prefetch(w + n * K, K, 1, 0, lane);
    pdl_enter();
    for (; n < N; n += warps) {
        float acc[1] = {0.0f};
        row_dot<bf16, true, 1, U>(x, w + n * K, 1, K, 1, 0, lane, acc);
        const float s = warp_sum(acc[0]);
        if (lane == 0) out[n] = from_f32<bf16>(s);
    }
}

__device__ __forceinline__ void named_bar(unsigned id, unsigned count) {
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}

// S warps per row (interleaved 16-byte chunks), groups synchronised by named barriers, persistent.
template <int S, int U>
__global__ void __launch_bounds__(256) wseg(const bf16* __restrict__ x, const bf16* __restrict__ w, bf16* __restrict__ out, unsigned N, unsigned K) {
    __shared__ float slot[2][8];
    const unsigned warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const unsigned g = warp / S, s = warp % S;
    const unsigned long long groups = (unsigned long long)gridDim.x * (8 / S);
    unsigned long long n = (unsigned long long)blockIdx.x * (8 / S) + g;
    if (n < N) row_prefetch(w + n * K, K, S, s, lane);
    pdl_enter();
    unsigned it = 0;
    for (; n < N; n += groups, ++it) {
        float acc[1] = {0.0f};
        row_dot<bf16, true, 1, U>(x, w + n * K, 1, K, S, s, lane, acc);
        const float v = warp_sum(acc[0]);
        if (S == 1) { if (lane == 0) out[n] = from_f32<bf16>(v); continue; }
        if (lane == 0) slot[it & 1][warp] = v;
        named_bar(1 + g, S * 32);
        if (s == 0 && lane == 0) {
            float t = 0.0f;
            for (int j = 0; j < S; ++j) t += slot[it & 1][g * S + j];
            out[n] = from_f32<bf16>(t);
        }
    }
}

// x staged in shared memory, warp per row (like the pre-norm kernels without the norm)
template <int U>
__global__ void __launch_bounds__(256) wrow_sx(const bf16* __restrict__ x, const bf16* __restrict__ w, bf16* __restrict__ out, unsigned N, unsigned K) {
    extern __shared__ __align__(16) unsigned char sm[];
    bf16* xs = reinterpret_cast<bf16*>(sm);
    const unsigned warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const unsigned long long warps = (unsigned long long)gridDim.x * 8;
    unsigned long long n = (unsigned long long)blockIdx.x * 8 + warp;
    if (n < N) row_prefetch(w + n * K, K, 1, 0, lane);
    pdl_enter();
    for (unsigned i = threadIdx.x; i < K / 8; i += 256) store16(xs + i * 8, load16(x + i * 8));
    __syncthreads();
    for (; n < N; n += warps) {
        float acc[1] = {0.0f};
        row_dot<bf16, true, 1, U>(xs, w + n * K, 1, K, 1, 0, lane, acc);
        const float s = warp_sum(acc[0]);
        if (lane == 0) out[n] = from_f32<bf16>(s);
    }
}

typedef void (*Kfn)(const bf16*, const bf16*, bf16*, unsigned, unsigned);

struct Shape { const char* name; unsigned K, N; };

static int sms;

static unsigned resident(const void* f, size_t smem) {
    int b = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, f, 256, smem));
    return (unsigned)(b * sms);
}

static void launch(bool pdl, dim3 grid, size_t smem, cudaStream_t st, const void* f, void** args) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid; cfg.blockDim = dim3(256); cfg.dynamicSmemBytes = smem; cfg.stream = st;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at; cfg.numAttrs = pdl ? 1 : 0;
    CK(cudaLaunchKernelExC(&cfg, f, args));
}

int main() {
    cudaDeviceProp p; CK(cudaGetDeviceProperties(&p, 0)); sms = p.multiProcessorCount;
    printf("device %s sms %d l2 %d MB\n", p.name, sms, p.l2CacheSize >> 20);
    cudaStream_t st; CK(cudaStreamCreate(&st));
    cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    // copy bandwidth
    {
        size_t bytes = 1ull << 30; void *a, *b; CK(cudaMalloc(&a, bytes)); CK(cudaMalloc(&b, bytes));
        CK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, st));
        CK(cudaEventRecord(e0, st));
        for (int i = 0; i < 10; ++i) CK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, st));
        CK(cudaEventRecord(e1, st)); CK(cudaEventSynchronize(e1));
        float ms; CK(cudaEventElapsedTime(&ms, e0, e1));
        printf("copy %.0f GB/s (read+write)\n", 2.0 * bytes * 10 / (ms * 1e-3) / 1e9);
        CK(cudaFree(a)); CK(cudaFree(b));
    }
    Shape shapes[] = {
        {"1B-qkv", 2048, 3072}, {"1B-o", 2048, 2048}, {"1B-gateup", 2048, 16384}, {"1B-down", 8192, 2048},
        {"q05-qkv", 896, 1152}, {"q05-o", 896, 896}, {"q05-gateup", 896, 9728}, {"q05-down", 4864, 896},
        {"8B-qkv", 4096, 6144}, {"8B-o", 4096, 4096}, {"8B-gateup", 4096, 28672}, {"8B-down", 14336, 4096},
        {"i4-2048x8192", 2048, 8192}, {"i4-8192x2048", 8192, 2048}, {"i4-896x4864", 896, 4864},
        {"1B-head", 2048, 128256},
    };
    const int L = 64;
    for (auto& sh : shapes) {
        size_t mat = (size_t)sh.K * sh.N * 2;
        int nbuf = (int)((512ull << 20) / mat) + 2; if (nbuf > L) nbuf = L;
        std::vector<bf16*> ws(nbuf);
        for (auto& b : ws) { CK(cudaMalloc(&b, mat)); CK(cudaMemset(b, 0x3c, mat)); }
        bf16 *x, *out, *ref; CK(cudaMalloc(&x, sh.K * 2)); CK(cudaMalloc(&out, sh.N * 2)); CK(cudaMalloc(&ref, sh.N * 2));
        {
            std::vector<unsigned short> h(sh.K); for (unsigned i = 0; i < sh.K; ++i) h[i] = 0x3c00 + (i % 7);
            CK(cudaMemcpy(x, h.data(), sh.K * 2, cudaMemcpyHostToDevice));
            // random-ish weights for buffer 0
            std::vector<unsigned short> wv((size_t)sh.K * sh.N); unsigned s = 12345;
            for (auto& v : wv) { s = s * 1664525u + 1013904223u; v = 0x3c00 | ((s >> 16) & 0x3ff) | ((s >> 31) << 15); }
            CK(cudaMemcpy(ws[0], wv.data(), mat, cudaMemcpyHostToDevice));
        }
        struct V { const char* name; const void* f; unsigned grid; size_t smem; bool legacy; unsigned R; };
        std::vector<V> vs;
        {
            unsigned Wr = 1u << (31 - __builtin_clz(std::max(1u, std::min(8u, sh.K * 2 / 2048))));
            unsigned R = 8 / Wr;
            vs.push_back({"cur", (const void*)gemv_bf16_vec_m1, (sh.N + R - 1) / R, 0, true, R});
        }
        auto per = [&](const void* f, unsigned rows_per_block, size_t smem) {
            unsigned g = (sh.N + rows_per_block - 1) / rows_per_block; unsigned r = resident(f, smem);
            return g < r ? g : r;
        };
        vs.push_back({"wrow4", (const void*)wrow<4>, per((const void*)wrow<4>, 8, 0), 0, false, 0});
        vs.push_back({"wrow8", (const void*)wrow<8>, per((const void*)wrow<8>, 8, 0), 0, false, 0});
        vs.push_back({"wrow16", (const void*)wrow<16>, per((const void*)wrow<16>, 8, 0), 0, false, 0});
        vs.push_back({"sx8", (const void*)wrow_sx<8>, per((const void*)wrow_sx<8>, 8, sh.K * 2), sh.K * 2, false, 0});
        vs.push_back({"seg2u4", (const void*)wseg<2, 4>, per((const void*)wseg<2, 4>, 4, 0), 0, false, 0});
        vs.push_back({"seg2u8", (const void*)wseg<2, 8>, per((const void*)wseg<2, 8>, 4, 0), 0, false, 0});
        vs.push_back({"seg4u4", (const void*)wseg<4, 4>, per((const void*)wseg<4, 4>, 2, 0), 0, false, 0});
        vs.push_back({"seg4u8", (const void*)wseg<4, 8>, per((const void*)wseg<4, 8>, 2, 0), 0, false, 0});
        vs.push_back({"seg8u4", (const void*)wseg<8, 4>, per((const void*)wseg<8, 4>, 1, 0), 0, false, 0});
        for (int pdl = 0; pdl < 2; ++pdl) {
            for (auto& v : vs) {
                if (v.smem > 48 * 1024) continue;
                if (v.smem) CK(cudaFuncSetAttribute(v.f, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)v.smem));
                auto one = [&](int i) {
                    const bf16* wp = ws[i % nbuf]; unsigned N = sh.N, K = sh.K, M = 1, R = v.R; const bf16* nb = nullptr;
                    bf16* o = out;
                    if (v.legacy) { void* a[] = {&x, &wp, &nb, &o, &M, &N, &K, &R}; launch(pdl, dim3(v.grid), 0, st, v.f, a); }
                    else { void* a[] = {&x, &wp, &o, &N, &K}; launch(pdl, dim3(v.grid), v.smem, st, v.f, a); }
                };
                // correctness vs cur on buffer 0
                one(0); CK(cudaStreamSynchronize(st));
                if (v.legacy) CK(cudaMemcpy(ref, out, sh.N * 2, cudaMemcpyDeviceToDevice));
                else {
                    std::vector<unsigned short> a(sh.N), b(sh.N);
                    CK(cudaMemcpy(a.data(), out, sh.N * 2, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(b.data(), ref, sh.N * 2, cudaMemcpyDeviceToHost));
                    double md = 0; for (unsigned i = 0; i < sh.N; ++i) { float fa, fb; unsigned ua = a[i] << 16, ub = b[i] << 16; memcpy(&fa, &ua, 4); memcpy(&fb, &ub, 4); double d = fabs(fa - fb) / (fabs(fb) + 1); if (d > md) md = d; }
                    if (md > 2e-2) printf("  MISMATCH %s %s %.3g\n", sh.name, v.name, md);
                }
                cudaGraph_t gr; cudaGraphExec_t ge;
                CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
                for (int i = 0; i < L; ++i) one(i + 1);
                CK(cudaStreamEndCapture(st, &gr)); CK(cudaGraphInstantiate(&ge, gr, 0));
                CK(cudaGraphLaunch(ge, st));
                float best = 1e9;
                for (int r = 0; r < 5; ++r) {
                    CK(cudaEventRecord(e0, st)); CK(cudaGraphLaunch(ge, st)); CK(cudaEventRecord(e1, st)); CK(cudaEventSynchronize(e1));
                    float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); if (ms < best) best = ms;
                }
                double us = best * 1e3 / L;
                printf("%-14s %-7s pdl=%d grid=%5u  %7.2f us  %6.0f GB/s\n", sh.name, v.name, pdl, v.grid, us, mat / (us * 1e-6) / 1e9);
                CK(cudaGraphExecDestroy(ge)); CK(cudaGraphDestroy(gr));
            }
        }
        for (auto& b : ws) CK(cudaFree(b));
        CK(cudaFree(x)); CK(cudaFree(out)); CK(cudaFree(ref));
        fflush(stdout);
    }
}
