// gemv_probe: times gpukit's one-row bf16 GEMV kernels — the product code of
// gpukit-kernels/cuda/gemv.cu, included below, not copied — at explicit launch parameters, in
// harness.cuh's graphs (PDL, weights rotated past L2), and checks every output against a
// double-precision host reference. Use it to try a launch parameter or a change to gemv.cu
// without a Rust build: edit gemv.cu (or point -DGEMV_SRC at a patched copy), rebuild, rerun.
//
// Usage: gemv_probe CASE ...      CASE = K,N,R,S,NST,NPRE[,GRID]
//   R = 1, 2, 4 or 8: the Hopper bulk-copy ring gemv_ring_bf16_r<R> with R rows a stage, S warps
//       a group, NST ring stages, NPRE of them asked of L2 before the PDL wait; GRID blocks
//       (default: one per SM, at most one per stage);
//   R = 0: the persistent kernel gemv_bf16_vec_m1 with S warps a row (NST and NPRE unused);
//       GRID blocks (default: one wave, as the occupancy allows).
// gemv::ring and gemv::split (gpukit-kernels/src/gemv.rs) choose these in the product. For the
// ops bench's shapes on a 132-SM H100/H200 they choose
//   2048,8192,8,2,4,2,128  8192,2048,2,4,4,2,128  4096,14336,4,4,4,2,128
//   14336,4096,1,4,4,2,128  896,4864,4,2,8,8,132
// (recompute them from the rule when it changes).
// PROBE_EAGER=1 replaces the timing with three eager calls, for Nsight Compute:
//   ncu -k regex:gemv /tmp/gemv_probe 896,4864,4,2,8,8
//
// Build and run on the GPU machine (from the repository root, after `cargo xtask gpu-bundle`
// here, which puts the generated header gpukit_shared.cuh in target/gpu-bundle/include):
//   nvcc -std=c++17 -O3 -arch=sm_90a -I gpukit-kernels/cuda -I target/gpu-bundle/include \
//     gpukit-kernels/dev/gemv_probe.cu -o /tmp/gemv_probe && /tmp/gemv_probe 896,4864,4,2,8,8
#include <string>

#include "harness.cuh"

#ifdef GEMV_SRC
#include GEMV_SRC
#else
#include "../cuda/gemv.cu"
#endif

using namespace probe;

using RingKernel = void (*)(const bf16*, const bf16*, const bf16*, bf16*, unsigned, unsigned,
                            unsigned, unsigned, unsigned);

static RingKernel ring_kernel(unsigned R) {
    switch (R) {
    case 1: return gemv_ring_bf16_r1;
    case 2: return gemv_ring_bf16_r2;
    case 4: return gemv_ring_bf16_r4;
    case 8: return gemv_ring_bf16_r8;
    default: return nullptr;
    }
}

int main(int argc, char** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s K,N,R,S,NST,NPRE[,GRID] ... (see gemv_probe.cu's header)\n",
                argv[0]);
        return 2;
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    const unsigned sms = prop.multiProcessorCount;
    const bool eager = getenv("PROBE_EAGER") != nullptr;
    const double copy_gbs = copy_ceiling_gbs();
    printf("device: %s, %u SMs; copy ceiling %.0f GB/s\n", prop.name, sms, copy_gbs);
    for (int a = 1; a < argc; ++a) {
        unsigned K, N, R, S, nst, npre, grid = 0;
        if (sscanf(argv[a], "%u,%u,%u,%u,%u,%u,%u", &K, &N, &R, &S, &nst, &npre, &grid) < 6 ||
            (R && (!ring_kernel(R) || nst == 0 || nst > GEMV_RING_MAX_STAGES || npre > nst)) ||
            S == 0 || 8 % S || K % 8) {
            fprintf(stderr,
                    "%s: not a case (K,N,R,S,NST,NPRE[,GRID]: R 0, 1, 2, 4 or 8; S 1, 2, 4 or 8;"
                    " K a multiple of 8; 1 <= NST <= GEMV_RING_MAX_STAGES; NPRE <= NST)\n",
                    argv[a]);
            return 2;
        }
        const size_t row = size_t(K) * 2, bytes = size_t(N) * row, copies = rotation(bytes);
        unsigned threads, per_sm = 0;
        size_t smem = 0;
        void (*m1)(const bf16*, const bf16*, const bf16*, bf16*, unsigned, unsigned, unsigned) =
            gemv_bf16_vec_m1;
        const RingKernel ring = R ? ring_kernel(R) : nullptr;
        if (R) {
            threads = (GEMV_RING_WARPS + 1) * 32;
            smem = size_t(nst) * R * row + row;  // the ring's stages, then x
            cudaFuncAttributes fa;
            CK(cudaFuncGetAttributes(&fa, ring));
            if (smem + fa.sharedSizeBytes > prop.sharedMemPerBlockOptin) {
                fprintf(stderr, "%s: %zu + %zu bytes of shared memory do not fit a block\n",
                        argv[a], smem, fa.sharedSizeBytes);
                return 2;
            }
            CK(cudaFuncSetAttribute(ring, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
            int b;
            CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, ring, threads, smem));
            per_sm = b;
            if (!grid) grid = std::min(sms, (N + R - 1) / R);
        } else {
            threads = 256;
            int b;
            CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, m1, threads, 0));
            per_sm = b;
            if (!grid) grid = std::min(sms * per_sm, (N + 8 / S - 1) / (8 / S));
        }
        unsigned char* w;
        bf16 *x, *out;
        CK(cudaMalloc(&w, copies * bytes));
        CK(cudaMalloc(&x, row));
        CK(cudaMalloc(&out, size_t(N) * 2));
        fill_bytes(w, copies * bytes);
        fill_bytes(x, row);
        auto call = [&](int i) {
            const bf16* wi = reinterpret_cast<const bf16*>(w + (i % copies) * bytes);
            if (R)
                launch(ring, grid, threads, smem, true, x, wi, nullptr, out, N, K, S, nst, npre);
            else
                launch(m1, grid, threads, 0, true, x, wi, nullptr, out, N, K, S);
        };
        double us = 0;
        if (eager) {
            for (int i = 0; i < 3; ++i) call(i);
            CK(cudaStreamSynchronize(stream()));
        } else {
            us = time_us(call);
        }
        CK(cudaMemset(out, 0xff, size_t(N) * 2));  // NaN: an output the kernel misses shows
        call(0);
        CK(cudaStreamSynchronize(stream()));
        const double err = gemv_bf16_error(w, x, out, N, K);
        const std::string what =
            R ? "ring R=" + std::to_string(R) + " S=" + std::to_string(S) +
                    " nst=" + std::to_string(nst) + " npre=" + std::to_string(npre)
              : "persistent S=" + std::to_string(S);
        const double pct = us > 0 ? 100.0 * bytes / (copy_gbs * 1e3) / us : 0.0;
        printf("k=%-6u n=%-6u %-24s grid %-4u %u/SM  %7.2f us  %5.1f%% of copy"
               "  max rel. error %.1e%s\n",
               K, N, what.c_str(), grid, per_sm, us, pct, err, err > 1e-2 ? "  WRONG" : "");
        fflush(stdout);
        CK(cudaFree(w));
        CK(cudaFree(x));
        CK(cudaFree(out));
    }
    return 0;
}
