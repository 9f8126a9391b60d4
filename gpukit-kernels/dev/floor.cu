// floor: how fast can any kernel only *read* B bytes, launched back to back in a CUDA graph
// with programmatic dependent launch (PDL), inputs rotated past L2 (harness.cuh: the ops
// bench's method)? A one-row GEMV must read its weights and a decode attention its K/V cache at
// least once, so the best pure read of the same bytes bounds them: it is the ceiling the GEMV
// and attention rows of docs/RESULTS.md are judged against where the copy rate is out of reach.
//
// Readers (each block reads one contiguous chunk, XORs it and writes one word):
// - regs: T threads a block, P blocks per SM, U 16-byte streaming loads in flight per thread;
// - ring: one block per SM whose single thread streams `stage`-byte bulk copies
//   (cp.async.bulk) into a ring of `slots` shared-memory slots: the shape of the Hopper ring
//   kernels, without consumers.
// Where each reader waits for the previous launch (PDL):
//   wait   wait, let the next launch in, read            (what gpukit's kernels do)
//   pref   ask L2 for the first bytes, let the next launch in, wait, read  (safe: reads no
//          value before the wait)
//   early  let the next launch in, read, wait            (UNSAFE for data the previous kernel
//          writes: the bound for weights known to be constant)
// Also printed: an empty kernel's cost per launch, and cudaMemcpyAsync of the same bytes in the
// same harness.
//
// Usage: floor [BYTES ...]   (default: the ops bench's GEMV and decode-attention sizes)
//
// Build and run on the GPU machine (from the repository root, after `cargo xtask gpu-bundle`
// here, which puts the generated header gpukit_shared.cuh in target/gpu-bundle/include):
//   nvcc -std=c++17 -O3 -arch=sm_90a -I gpukit-kernels/cuda -I target/gpu-bundle/include \
//     gpukit-kernels/dev/floor.cu -o /tmp/floor && /tmp/floor
#include <cstdint>
#include <string>

#include "../cuda/common.cuh"
#include "harness.cuh"

using namespace probe;

enum Mode { WAIT = 0, PREF = 1, EARLY = 2 };
static const char* const MODE_NAME[] = {"wait", "pref", "early"};

__host__ __device__ __forceinline__ size_t lesser(size_t a, size_t b) { return a < b ? a : b; }

// Thread 0 asks L2 for up to `bytes` from src, 32 KiB at a time.
__device__ __forceinline__ void prefetch_range(const unsigned char* src, size_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (threadIdx.x == 0)
        for (size_t o = 0; o < bytes; o += 32768)
            bulk_prefetch_l2(src + o, static_cast<unsigned>(lesser(32768, bytes - o)));
#endif
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
    if (MODE == PREF)
        prefetch_range(reinterpret_cast<const unsigned char*>(p + lo),
                       lesser(pre_bytes, (hi - lo) * 16));
    if (MODE == WAIT) pdl_wait();
    pdl_launch_dependents();
    if (MODE == PREF) pdl_wait();
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
        const uint4 v = __ldcs(p + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (MODE == EARLY) pdl_wait();
    acc = block_xor(acc);
    if (threadIdx.x == 0) out[blockIdx.x] = acc;
}

template <int MODE>
__global__ void read_ring(const unsigned char* __restrict__ p, size_t bytes, unsigned* out,
                          unsigned slots, unsigned stage) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    extern __shared__ __align__(128) unsigned char ring[];
    __shared__ __align__(8) unsigned long long full[16];
    const size_t chunk = ((bytes / 16 + gridDim.x - 1) / gridDim.x) * 16;
    const size_t lo = lesser(bytes, blockIdx.x * chunk), hi = lesser(bytes, lo + chunk);
    const size_t stages = (hi - lo + stage - 1) / stage;
    if (threadIdx.x != 0) return;
    for (unsigned s = 0; s < slots; ++s) mbar_init(&full[s], 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    if (MODE == PREF) prefetch_range(p + lo, lesser(hi - lo, size_t(slots) * stage));
    if (MODE == WAIT) pdl_wait();
    pdl_launch_dependents();
    if (MODE == PREF) pdl_wait();
    for (size_t s = 0; s < stages; ++s) {
        const unsigned slot = s % slots;
        if (s >= slots) mbar_wait(&full[slot], unsigned((s / slots - 1) & 1));
        const size_t off = lo + s * stage;
        bulk_load(ring + size_t(slot) * stage, p + off,
                  static_cast<unsigned>(lesser(stage, hi - off)), &full[slot]);
    }
    for (size_t s = stages > slots ? stages - slots : 0; s < stages; ++s)
        mbar_wait(&full[s % slots], unsigned((s / slots) & 1));
    if (MODE == EARLY) pdl_wait();
    out[blockIdx.x] = ring[0] ^ ring[stage - 1];
#endif
}

__global__ void empty_kernel(unsigned* out) {
    pdl_enter();
    if (threadIdx.x == 0 && out == nullptr) out[0] = 0;
}

using RegsKernel = void (*)(const uint4*, size_t, unsigned*, size_t);
using RingKernel = void (*)(const unsigned char*, size_t, unsigned*, unsigned, unsigned);

template <int U>
static RegsKernel regs_kernel(int mode) {
    return mode == WAIT   ? read_regs<WAIT, U>
           : mode == PREF ? read_regs<PREF, U>
                          : read_regs<EARLY, U>;
}
static RingKernel ring_kernel(int mode) {
    return mode == WAIT ? read_ring<WAIT> : mode == PREF ? read_ring<PREF> : read_ring<EARLY>;
}

struct Best {
    double us = 1e30;
    std::string how;
    void take(double t, const std::string& h) {
        if (t < us) {
            us = t;
            how = h;
        }
    }
};

int main(int argc, char** argv) {
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    const unsigned sms = prop.multiProcessorCount;
    printf("device: %s, %u SMs, L2 %d MB\n", prop.name, sms, prop.l2CacheSize >> 20);

    struct Size {
        std::string what;
        size_t bytes;
    };
    std::vector<Size> sizes;
    for (int a = 1; a < argc; ++a)
        sizes.push_back({std::string(argv[a]) + " B", strtoull(argv[a], nullptr, 10)});
    if (sizes.empty())
        sizes = {
            {"GEMV (896, 4864)", size_t(896) * 4864 * 2},
            {"GEMV (2048, 8192), (8192, 2048)", size_t(2048) * 8192 * 2},
            {"GEMV (4096, 14336), (14336, 4096)", size_t(4096) * 14336 * 2},
            {"decode GQA 8 1k (4 KV heads)", size_t(2) * 4 * 1024 * 128 * 2},
            {"decode GQA 4 1k (8 KV heads)", size_t(2) * 8 * 1024 * 128 * 2},
            {"decode GQA 8 8k", size_t(2) * 4 * 8192 * 128 * 2},
            {"decode GQA 4 8k", size_t(2) * 8 * 8192 * 128 * 2},
            {"decode GQA 8 32k", size_t(2) * 4 * 32768 * 128 * 2},
            {"decode GQA 4 32k", size_t(2) * 8 * 32768 * 128 * 2},
        };

    size_t arena_bytes = 0;
    for (const Size& sz : sizes) {
        if (sz.bytes < 16 || sz.bytes % 16) {
            fprintf(stderr, "%s: sizes are positive multiples of 16 bytes\n", sz.what.c_str());
            return 2;
        }
        arena_bytes = std::max(arena_bytes, rotation(sz.bytes) * sz.bytes + sz.bytes / 2);
    }
    unsigned char* arena;
    CK(cudaMalloc(&arena, arena_bytes));
    fill_bytes(arena, arena_bytes / 4 * 4);
    unsigned* out;
    CK(cudaMalloc(&out, 1 << 20));

    const double copy_gbs = copy_ceiling_gbs();
    printf("copy ceiling (1 GiB, read + write): %.0f GB/s\n", copy_gbs);
    for (unsigned grid : {sms, 2 * sms})
        printf("empty kernel, %u blocks of 256, PDL: %.2f us a launch\n", grid,
               time_us([&](int) { launch(empty_kernel, grid, 256, 0, true, out); }));

    const std::pair<int, int> geos[] = {{128, 16}, {256, 4}, {256, 8}, {512, 2},
                                        {512, 4},  {1024, 1}, {1024, 2}};
    const std::pair<unsigned, unsigned> rings[] = {
        {4, 32768}, {6, 32768}, {8, 16384}, {12, 16384}, {13, 16384}};
    for (const auto& rg : rings)
        for (int mode = 0; mode < 3; ++mode)
            CK(cudaFuncSetAttribute(ring_kernel(mode), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    int(rg.first * rg.second)));

    printf("\n%-34s %10s %8s | best read per mode: us, %% of the copy rate, how\n", "size", "bytes",
           "ideal us");
    for (const Size& sz : sizes) {
        const size_t copies = rotation(sz.bytes);
        auto buf = [&](int i) { return arena + (i % copies) * sz.bytes; };
        Best best[3];
        char how[64];
        for (const auto& geo : geos)
            for (int u : {4, 8})
                for (int mode = 0; mode < 3; ++mode) {
                    const unsigned threads = geo.first, grid = geo.second * sms;
                    const size_t pre = (size_t(128) << 10) / geo.second;
                    const RegsKernel k = u == 4 ? regs_kernel<4>(mode) : regs_kernel<8>(mode);
                    const double us = time_us([&](int i) {
                        launch(k, grid, threads, 0, true, reinterpret_cast<const uint4*>(buf(i)),
                               sz.bytes / 16, out, pre);
                    });
                    snprintf(how, sizeof how, "regs %u thr x %d/SM, U=%d", threads, geo.second, u);
                    best[mode].take(us, how);
                }
        for (const auto& rg : rings)
            for (int mode = 0; mode < 3; ++mode) {
                const unsigned slots = rg.first, stage = rg.second;
                const double us = time_us([&](int i) {
                    launch(ring_kernel(mode), sms, 32, size_t(slots) * stage, true,
                           static_cast<const unsigned char*>(buf(i)), sz.bytes, out, slots, stage);
                });
                snprintf(how, sizeof how, "ring %u x %u KiB", slots, stage >> 10);
                best[mode].take(us, how);
            }
        // cudaMemcpyAsync of bytes / 2, so that it reads and writes `bytes` in all.
        unsigned char* dst = arena + arena_bytes - sz.bytes / 2;
        const double memcpy_us = time_us([&](int i) {
            CK(cudaMemcpyAsync(dst, buf(i), sz.bytes / 2, cudaMemcpyDeviceToDevice, stream()));
        });
        const double ideal = sz.bytes / (copy_gbs * 1e3);
        printf("%-34s %10zu %8.2f | memcpy %.2f us (%.1f%%)\n", sz.what.c_str(), sz.bytes, ideal,
               memcpy_us, 100.0 * ideal / memcpy_us);
        for (int mode = 0; mode < 3; ++mode)
            printf("    %-5s %7.2f us %5.1f%%  %s\n", MODE_NAME[mode], best[mode].us,
                   100.0 * ideal / best[mode].us, best[mode].how.c_str());
        fflush(stdout);
    }
    return 0;
}
