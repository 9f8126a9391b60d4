// The floor under a single-launch memory-bound op on this GPU (session 19).
//
// Question: can *any* kernel that reads B bytes, launched 50 times back to back in a CUDA graph
// with programmatic dependent launch (PDL), inputs rotated past L2 (the ops bench's harness),
// reach the issue goals' fraction of the copy ceiling at the goals' sizes? A GEMV or a decode
// attention must read at least those bytes, so the best pure read bounds them from above.
//
// Kernels (each block reads a contiguous chunk, XORs it and writes one word):
// - read_regs<MODE, U>: T threads per block, b blocks per SM, U 16-byte streaming loads in
//   flight per thread;
// - read_ring<MODE>: one block per SM, one thread issuing cp.async.bulk copies of `stage`
//   bytes into a ring of S shared-memory slots (the shape of cuBLASLt's GEMV and our
//   gemv_ring, without consumers).
// MODE says where the PDL wait is:
//   0 wait, launch dependents, read               (what gpukit's kernels do)
//   1 L2 prefetch of the first bytes, launch dependents, wait, read   (safe: binds no value)
//   2 launch dependents, read, wait               (UNSAFE for data the previous kernel writes:
//                                                   the bound for weights known constant)
//   3 launch dependents, wait, read
// Also: an empty kernel's cost per launch, and cudaMemcpyAsync in the same graph harness.
//
// Build and run: nvcc -O3 -std=c++17 -arch=sm_90a floor.cu -o floor && ./floor
#include <cstdint>

#include "harness.cuh"

__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void pdl_go() {
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}
__host__ __device__ __forceinline__ size_t lesser(size_t a, size_t b) { return a < b ? a : b; }
__device__ __forceinline__ unsigned smem_addr(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void prefetch_l2(const void* src, unsigned bytes) {
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(src), "r"(bytes) : "memory");
}
// Thread 0 asks L2 for up to `bytes` from src (pieces of 32 KiB).
__device__ __forceinline__ void prefetch_range(const unsigned char* src, size_t bytes) {
    if (threadIdx.x == 0)
        for (size_t o = 0; o < bytes; o += 32768)
            prefetch_l2(src + o, static_cast<unsigned>(lesser(32768, bytes - o)));
}

__device__ __forceinline__ unsigned block_xor(unsigned v) {
    __shared__ unsigned part[32];
    for (int o = 16; o; o >>= 1) v ^= __shfl_xor_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
    __syncthreads();
    v = 0;
    if (threadIdx.x == 0)
        for (unsigned w = 0; w < (blockDim.x + 31) / 32; ++w) v ^= part[w];
    return v;
}

template <int MODE, int U>
__global__ void __launch_bounds__(1024) read_regs(const uint4* __restrict__ p, size_t n,
                                                  unsigned* out, size_t pre_bytes) {
    const size_t chunk = (n + gridDim.x - 1) / gridDim.x;
    const size_t lo = lesser(n, blockIdx.x * chunk), hi = lesser(n, lo + chunk);
    if (MODE == 1) prefetch_range(reinterpret_cast<const unsigned char*>(p + lo),
                                  lesser(pre_bytes, (hi - lo) * 16));
    if (MODE == 0) pdl_wait();
    pdl_go();
    if (MODE == 1 || MODE == 3) pdl_wait();
    unsigned acc = 0;
    size_t i = lo + threadIdx.x;
    for (; i + (U - 1) * blockDim.x < hi; i += U * blockDim.x) {
        uint4 v[U];
#pragma unroll
        for (int u = 0; u < U; ++u) v[u] = __ldcs(p + i + u * blockDim.x);
#pragma unroll
        for (int u = 0; u < U; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
    for (; i < hi; i += blockDim.x) {
        uint4 v = __ldcs(p + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (MODE == 2) pdl_wait();
    acc = block_xor(acc);
    if (threadIdx.x == 0) out[blockIdx.x] = acc;
}

__device__ __forceinline__ void mbar_wait(unsigned long long* b, unsigned parity) {
    asm volatile("{\n .reg .pred p;\n"
                 "W_%=: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
                 " @!p bra W_%=;\n}" ::"r"(smem_addr(b)),
                 "r"(parity)
                 : "memory");
}
__device__ __forceinline__ void bulk_load(void* dst, const void* src, unsigned bytes,
                                          unsigned long long* b) {
    asm volatile("{\n .reg .b64 pol;\n"
                 " createpolicy.fractional.L2::evict_first.b64 pol, 1.0;\n"
                 " mbarrier.arrive.expect_tx.shared::cta.b64 _, [%3], %2;\n"
                 " cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
                 ".L2::cache_hint [%0], [%1], %2, [%3], pol;\n}" ::"r"(smem_addr(dst)),
                 "l"(src), "r"(bytes), "r"(smem_addr(b))
                 : "memory");
}

template <int MODE>
__global__ void read_ring(const unsigned char* __restrict__ p, size_t bytes, unsigned* out,
                          unsigned slots, unsigned stage) {
    extern __shared__ __align__(128) unsigned char ring[];
    __shared__ __align__(8) unsigned long long full[16];
    const size_t chunk = ((bytes / 16 + gridDim.x - 1) / gridDim.x) * 16;
    const size_t lo = lesser(bytes, blockIdx.x * chunk), hi = lesser(bytes, lo + chunk);
    const size_t stages = (hi - lo + stage - 1) / stage;
    if (threadIdx.x == 0) {
        for (unsigned s = 0; s < slots; ++s)
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(&full[s]))
                         : "memory");
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        if (MODE == 1) prefetch_range(p + lo, lesser(hi - lo, size_t(slots) * stage));
        if (MODE == 0) pdl_wait();
        pdl_go();
        if (MODE == 1 || MODE == 3) pdl_wait();
        for (size_t s = 0; s < stages; ++s) {
            const unsigned slot = s % slots;
            if (s >= slots) mbar_wait(&full[slot], unsigned((s / slots - 1) & 1));
            const size_t off = lo + s * stage;
            bulk_load(ring + size_t(slot) * stage, p + off,
                      static_cast<unsigned>(lesser(stage, hi - off)), &full[slot]);
        }
        for (size_t s = stages > slots ? stages - slots : 0; s < stages; ++s)
            mbar_wait(&full[s % slots], unsigned((s / slots) & 1));
        if (MODE == 2) pdl_wait();
        out[blockIdx.x] = ring[threadIdx.x] ^ ring[stage - 1];
    }
}

__global__ void empty_kernel(unsigned* out, int mode) {
    if (mode == 0) pdl_wait();
    pdl_go();
    if (mode == 1) pdl_wait();
    if (threadIdx.x == 0 && out == nullptr) out[0] = 0;
}


struct Best {
    double us = 1e30;
    char how[96] = "";
    void take(double t, const char* fmt, int x, int y, int z) {
        if (t < us) {
            us = t;
            snprintf(how, sizeof how, fmt, x, y, z);
        }
    }
};

int main() {
    CK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    const int sms = prop.multiProcessorCount;
    int drv;
    CK(cudaDriverGetVersion(&drv));
    printf("device: %s, %d SMs, L2 %d MB, driver API %d\n", prop.name, sms, prop.l2CacheSize >> 20,
           drv);

    const size_t arena_bytes = size_t(320) << 20;
    unsigned char* arena;
    CK(cudaMalloc(&arena, arena_bytes));
    fill<<<1024, 256, 0, g_stream>>>(reinterpret_cast<unsigned*>(arena), arena_bytes / 4);
    unsigned* out;
    CK(cudaMalloc(&out, 1 << 20));

    const double copy_gbs = copy_ceiling_gbs();
    printf("copy ceiling (1 GiB, read + write): %.0f GB/s\n", copy_gbs);

    // An empty kernel's cost per launch in the graph harness.
    for (unsigned grid : {unsigned(sms), 2u * sms})
        for (int pdl = 0; pdl < 2; ++pdl)
            for (int mode = 0; mode < 2; ++mode) {
                double us = time_us([&](int) {
                    launch(empty_kernel, grid, 256, 0, pdl, out, mode);
                });
                printf("empty kernel, %u x 256, %s, %s: %.2f us per launch\n", grid,
                       pdl ? "PDL" : "no PDL", mode ? "launch then wait" : "wait then launch",
                       us);
            }

    struct Size {
        const char* what;
        size_t bytes;
        double goal;  // fraction of copy the issue asks for (0: a torch ratio, printed apart)
    };
    const Size sizes[] = {
        {"GEMV (896, 4864)", size_t(896) * 4864 * 2, 0.0},
        {"GEMV (2048, 8192) / (8192, 2048)", size_t(2048) * 8192 * 2, 0.90},
        {"GEMV (4096, 14336) / (14336, 4096)", size_t(4096) * 14336 * 2, 0.90},
        {"decode GQA 8 1k (4 KV heads)", size_t(2) * 4 * 1024 * 128 * 2, 0.80},
        {"decode GQA 4 1k (8 KV heads)", size_t(2) * 8 * 1024 * 128 * 2, 0.80},
        {"decode GQA 8 8k", size_t(2) * 4 * 8192 * 128 * 2, 0.80},
        {"decode GQA 4 8k", size_t(2) * 8 * 8192 * 128 * 2, 0.80},
        {"decode GQA 8 32k", size_t(2) * 4 * 32768 * 128 * 2, 0.80},
        {"decode GQA 4 32k", size_t(2) * 8 * 32768 * 128 * 2, 0.80},
    };

    printf("\n%-36s %10s %8s | %-34s | %-34s | %-34s | %9s | %s\n", "size", "bytes", "ideal us",
           "best safe (regs)", "best safe (bulk ring)", "best unsafe (reads before wait)",
           "memcpy", "goal");
    for (const Size& sz : sizes) {
        const size_t copies = rotation(sz.bytes);
        if (copies * sz.bytes > arena_bytes) {
            fprintf(stderr, "arena too small\n");
            return 1;
        }
        auto buf = [&](int i) { return arena + (i % copies) * sz.bytes; };
        const size_t n16 = sz.bytes / 16;
        Best safe_regs, safe_ring, unsafe;
        Best per_mode[4];
        const std::pair<int, int> geos[] = {{128, 16}, {256, 4}, {256, 8}, {512, 2},
                                            {512, 4},  {1024, 1}, {1024, 2}};
        for (const auto& geo : geos)
            for (int u : {4, 8})
                for (int mode = 0; mode < 4; ++mode) {
                    const int threads = geo.first, per_sm = geo.second;
                    const unsigned grid = per_sm * sms;
                    const size_t pre = (size_t(128) << 10) / per_sm;
                    auto kern = [&](int i) {
                        const uint4* p = reinterpret_cast<const uint4*>(buf(i));
#define L(M, UU) launch(read_regs<M, UU>, grid, threads, 0, true, p, n16, out, pre)
                        if (u == 4) {
                            if (mode == 0) L(0, 4);
                            if (mode == 1) L(1, 4);
                            if (mode == 2) L(2, 4);
                            if (mode == 3) L(3, 4);
                        } else {
                            if (mode == 0) L(0, 8);
                            if (mode == 1) L(1, 8);
                            if (mode == 2) L(2, 8);
                            if (mode == 3) L(3, 8);
                        }
#undef L
                    };
                    const double us = time_us(kern);
                    (mode == 2 ? unsafe : safe_regs)
                        .take(us, "regs %d thr x %d/SM, U=%d", threads, per_sm, u);
                    per_mode[mode].take(us, "regs %d thr x %d/SM, U=%d", threads, per_sm, u);
                }
        const std::pair<unsigned, unsigned> rings[] = {
            {4, 32768}, {6, 32768}, {8, 16384}, {12, 16384}, {13, 16384}};
        for (const auto& rg : rings) {
            const unsigned slots = rg.first, stage = rg.second;
            const size_t smem = size_t(slots) * stage;
            CK(cudaFuncSetAttribute(read_ring<0>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    int(smem)));
            CK(cudaFuncSetAttribute(read_ring<1>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    int(smem)));
            CK(cudaFuncSetAttribute(read_ring<2>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    int(smem)));
            CK(cudaFuncSetAttribute(read_ring<3>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    int(smem)));
            for (int mode = 0; mode < 4; ++mode) {
                auto kern = [&](int i) {
                    const unsigned char* p = buf(i);
                    if (mode == 0)
                        launch(read_ring<0>, sms, 32, smem, true, p, sz.bytes, out, slots, stage);
                    if (mode == 1)
                        launch(read_ring<1>, sms, 32, smem, true, p, sz.bytes, out, slots, stage);
                    if (mode == 2)
                        launch(read_ring<2>, sms, 32, smem, true, p, sz.bytes, out, slots, stage);
                    if (mode == 3)
                        launch(read_ring<3>, sms, 32, smem, true, p, sz.bytes, out, slots, stage);
                };
                const double us = time_us(kern);
                (mode == 2 ? unsafe : safe_ring)
                    .take(us, "ring %d x %d KiB (mode %d)", slots, stage >> 10, mode);
                per_mode[mode].take(us, "ring %d x %d KiB (mode %d)", slots, stage >> 10, mode);
            }
        }
        // cudaMemcpyAsync moving bytes/2 (so it reads and writes `bytes` in all).
        unsigned char* dst = arena + arena_bytes - sz.bytes / 2;
        const double memcpy_us = time_us([&](int i) {
            CK(cudaMemcpyAsync(dst, buf(i), sz.bytes / 2, cudaMemcpyDeviceToDevice, g_stream));
        });
        const double ideal = sz.bytes / (copy_gbs * 1e3);
        auto pct = [&](double us) { return 100.0 * ideal / us; };
        char goal[64] = "1.5x torch: see peer";
        const double best_safe = std::min(safe_regs.us, safe_ring.us);
        if (sz.goal > 0)
            snprintf(goal, sizeof goal, ">= %.0f%% needs <= %.2f us: %s", sz.goal * 100,
                     ideal / sz.goal, pct(best_safe) >= sz.goal * 100 ? "reachable" : "NOT reachable");
        printf("%-36s %10zu %8.2f | %6.2f us %5.1f%% %-19s | %6.2f us %5.1f%% %-19s | %6.2f us "
               "%5.1f%% %-19s | %5.2f us | %s\n",
               sz.what, sz.bytes, ideal, safe_regs.us, pct(safe_regs.us), safe_regs.how,
               safe_ring.us, pct(safe_ring.us), safe_ring.how, unsafe.us, pct(unsafe.us),
               unsafe.how, memcpy_us, goal);
        for (int m = 0; m < 4; ++m)
            printf("    mode %d best: %6.2f us %5.1f%% %s\n", m, per_mode[m].us,
                   pct(per_mode[m].us), per_mode[m].how);
        fflush(stdout);
    }
    return 0;
}
