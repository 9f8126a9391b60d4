// Session 30: how fast can one block read a few dozen KiB that sit in L2 (the decode ring's
// split merge reads 33–132 KiB of partials)? One block (or `blocks` blocks at once, each its own
// data), 160 threads like the ring; the data is read once first so it is in L2. Methods:
//   bulk N: thread 0 issues N cp.async.bulk copies (equal parts) into shared memory, one mbarrier;
//   ldg U:  128 threads read float4s, U loads in flight per thread, summed (kept live);
//   mix:    half by one bulk copy, half by the threads' loads, at once.
// Prints cycles (SM clock) from the first issue to the last byte usable, and B/cycle.
//
// Build: nvcc -O3 -std=c++17 -arch=sm_90a l2read.cu -o l2read
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#define CK(x)                                                                      \
    do {                                                                           \
        cudaError_t e_ = (x);                                                      \
        if (e_ != cudaSuccess) {                                                   \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
            return 1;                                                              \
        }                                                                          \
    } while (0)

__device__ __forceinline__ unsigned smem_addr(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

template <int U>
__device__ __forceinline__ float ldg_part(const float4* src, unsigned n4) {
    float s = 0.0f;
    for (unsigned i = threadIdx.x; i < n4; i += 128 * U) {
        float4 v[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const unsigned j = min(i + u * 128, n4 - 1);
            v[u] = __ldcg(src + j);
        }
#pragma unroll
        for (int u = 0; u < U; ++u) s += v[u].x + v[u].y + v[u].z + v[u].w;
    }
    return s;
}

// mode 0: bulk (nb copies of the whole), 1: ldg U=16, 2: ldg U=8, 3: mix (bulk half + ldg U=16 half)
__global__ void __launch_bounds__(160, 1) l2read(const float* data, size_t per_block, int mode, int nb,
                                                  long long* cycles, float* sink) {
    extern __shared__ __align__(128) unsigned char sm[];
    __shared__ __align__(8) unsigned long long bar;
    const float* src = data + blockIdx.x * (per_block / 4);
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(&bar)));
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    const long long t0 = clock64();
    unsigned bulk_bytes = mode == 0 ? (unsigned)per_block : mode == 3 ? (unsigned)per_block / 2 : 0;
    if (threadIdx.x == 0 && bulk_bytes) {
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(&bar)), "r"(bulk_bytes)
                     : "memory");
        const unsigned part = bulk_bytes / nb;
        for (int i = 0; i < nb; ++i)
            asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                             smem_addr(sm + i * part)),
                         "l"(reinterpret_cast<const unsigned char*>(src) + i * part), "r"(part), "r"(smem_addr(&bar))
                         : "memory");
    }
    float s = 0.0f;
    if (threadIdx.x < 128) {
        if (mode == 1) s = ldg_part<16>(reinterpret_cast<const float4*>(src), per_block / 16);
        if (mode == 2) s = ldg_part<8>(reinterpret_cast<const float4*>(src), per_block / 16);
        if (mode == 3)
            s = ldg_part<16>(reinterpret_cast<const float4*>(src) + per_block / 32, per_block / 32);
    }
    if (bulk_bytes) {
        asm volatile("{\n .reg .pred p;\nW: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], 0;\n @!p bra W;\n}" ::"r"(
                         smem_addr(&bar))
                     : "memory");
        s += reinterpret_cast<float*>(sm)[threadIdx.x];
    }
    __syncthreads();
    const long long t1 = clock64();
    if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
    if (s == 12345.0f) sink[threadIdx.x] = s;
}

int main() {
    const size_t sizes[] = {33792, 67584, 135168};  // GQA 4 (16 splits), half of GQA 8, GQA 8 (32 splits)
    float* data;
    const size_t total = size_t(64) << 20;
    CK(cudaMalloc(&data, total));
    CK(cudaMemset(data, 0, total));
    long long* cyc;
    float* sink;
    CK(cudaMalloc(&cyc, 132 * 8));
    CK(cudaMalloc(&sink, 1024 * 4));
    CK(cudaFuncSetAttribute(l2read, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
    struct M {
        int mode, nb;
        const char* name;
    } modes[] = {{0, 1, "bulk x1"}, {0, 4, "bulk x4"}, {0, 16, "bulk x16"}, {0, 32, "bulk x32"},
                 {1, 0, "ldg U16"}, {2, 0, "ldg U8"},   {3, 1, "mix"}};
    for (int blocks : {1, 4, 8}) {
        for (size_t sz : sizes) {
            for (const M& m : modes) {
                std::vector<long long> best;
                for (int rep = 0; rep < 7; ++rep) {
                    // Warm L2 with the same data (a read by the same kernel), then time.
                    l2read<<<blocks, 160, 200 * 1024>>>(data, sz, 1, 0, cyc, sink);
                    l2read<<<blocks, 160, 200 * 1024>>>(data, sz, m.mode, m.nb, cyc, sink);
                    CK(cudaDeviceSynchronize());
                    std::vector<long long> h(blocks);
                    CK(cudaMemcpy(h.data(), cyc, blocks * 8, cudaMemcpyDeviceToHost));
                    best.push_back(*std::max_element(h.begin(), h.end()));
                }
                std::sort(best.begin(), best.end());
                const long long c = best[best.size() / 2];
                printf("blocks %d  %6zu B  %-9s %7lld cycles  %5.1f B/cycle per block\n", blocks, sz, m.name, c,
                       double(sz) / c);
            }
        }
    }
    return 0;
}
