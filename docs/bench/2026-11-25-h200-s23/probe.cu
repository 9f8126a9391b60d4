// Session 23: gemv_ring_bf16 (gemv.cu, or a copy patched by variants.py: -DGEMV_SRC=...) timed in
// session 19's harness at explicit launch parameters, every output checked against a host
// reference. Usage: probe VARIANT K,N,R,S,NST[,NPRE] [...]: NPRE stages asked of L2 before the
// PDL wait, a kernel argument since session 24 (default 2, the launch rule's at 32 KiB stages;
// session 31 added it, so the probe builds against gemv.cu as it is now).
// Session 37: gemv.cu has one ring entry point per R since then (gemv_ring_bf16_r<R>, without
// the R argument); R = 0 times the persistent kernel (gemv_bf16_vec_m1, a full wave of 256-thread
// blocks) with S warps per row (pass launch::gemv_split's). With -DPROBE_STAMPS (against
// session 37's gemv_variants.py "stamp" copy) it also prints, for the timed graph's last call,
// each step's median and latest block in ns after its first block's PDL wait returned.
//
// Session 38: PROBE_GRID=n (environment) launches n ring blocks instead of one per
// multiprocessor; PROBE_NCU=1 replaces the timing with three eager calls (for Nsight Compute);
// with -DPROBE_TIMELINE (against session 38's gemv_variants.py "timeline" copy) it prints, for
// the timed graph's last call, each stage's bulk copy issued / landed / released and each group's
// end for the block that ends at the median and the one that ends last, in ns after the first
// block's PDL wait returned.
//
// Build: nvcc -O3 -std=c++17 -arch=sm_90a -I gpukit-kernels/cuda -DGEMV_SRC='"path/gemv.cu"'
//        probe.cu -o probe
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "../2026-11-24-h200-s19/harness.cuh"
#include GEMV_SRC

int main(int argc, char** argv) {
    const char* variant = argc > 1 ? argv[1] : "main";
    CK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
    const double copy_gbs = copy_ceiling_gbs();
    const unsigned sms = 132;
    for (int a = 2; a < argc; ++a) {
        unsigned K, N, R, S, nst, npre = 2;
        if (sscanf(argv[a], "%u,%u,%u,%u,%u,%u", &K, &N, &R, &S, &nst, &npre) < 5) return 2;
        const unsigned row = K * 2;
        const size_t bytes = size_t(N) * K * 2, copies = rotation(bytes);
        const size_t smem = R ? size_t(nst) * R * row + row : 0;
        unsigned char* w;
        CK(cudaMalloc(&w, copies * bytes));
        fill<<<1024, 256, 0, g_stream>>>(reinterpret_cast<unsigned*>(w), copies * bytes / 4);
        bf16 *x, *out;
        CK(cudaMalloc(&x, row));
        fill<<<1, 256, 0, g_stream>>>(reinterpret_cast<unsigned*>(x), K / 2);
        CK(cudaMalloc(&out, N * 2));
        const unsigned threads = R ? (GEMV_RING_WARPS + 1) * 32 : 256;
        void (*ring)(const bf16*, const bf16*, const bf16*, bf16*, unsigned, unsigned, unsigned,
                     unsigned, unsigned) = R == 1   ? gemv_ring_bf16_r1
                                           : R == 2 ? gemv_ring_bf16_r2
                                           : R == 4 ? gemv_ring_bf16_r4
                                                    : gemv_ring_bf16_r8;
        if (R) CK(cudaFuncSetAttribute(ring, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
        // Session 37: PROBE_CARVEOUT=percent sets the preferred shared-memory carveout; the
        // blocks a multiprocessor can hold at once (two let the next launch's blocks start
        // beside the previous launch's) are printed with each result.
        if (const char* c = getenv("PROBE_CARVEOUT"))
            CK(cudaFuncSetAttribute(ring, cudaFuncAttributePreferredSharedMemoryCarveout, atoi(c)));
        int per_sm = 0;
        if (R)
            CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, ring, threads, smem));
        else
            CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, gemv_bf16_vec_m1, threads, 0));
        unsigned grid = R ? std::min(sms, (N + R - 1) / R) : sms * per_sm;
        if (const char* g = getenv("PROBE_GRID"); g && R) grid = std::min<unsigned>(atoi(g), (N + R - 1) / R);
        auto call = [&](const unsigned char* wi) {
            if (R)
                launch(ring, grid, threads, smem, true, (const bf16*)x, (const bf16*)wi,
                       (const bf16*)nullptr, out, N, K, S, nst, npre);
            else
                launch(gemv_bf16_vec_m1, grid, threads, 0, true, (const bf16*)x, (const bf16*)wi,
                       (const bf16*)nullptr, out, N, K, S);
        };
        double us = 0;
        if (getenv("PROBE_NCU")) {
            for (int i = 0; i < 3; ++i) call(w + (i % copies) * bytes);
            CK(cudaStreamSynchronize(g_stream));
        } else {
            us = time_us([&](int i) { call(w + (i % copies) * bytes); });
        }
#ifdef PROBE_TIMELINE
        if (R && grid <= TL_BLOCKS) {
            static unsigned long long tl[TL_BLOCKS][4][TL_STAGES];
            CK(cudaMemcpyFromSymbol(tl, g_tl, sizeof tl));
            const unsigned G = GEMV_RING_WARPS / S, stages = (N + R - 1) / R;
            unsigned long long t0 = ~0ull;
            for (unsigned b = 0; b < grid; ++b) t0 = std::min(t0, tl[b][3][0]);
            auto rel = [&](unsigned long long v) { return (long long)(v - t0); };
            std::vector<std::pair<long long, unsigned>> ends;
            for (unsigned b = 0; b < grid; ++b) {
                unsigned long long e = 0;
                for (unsigned g = 0; g < G; ++g) e = std::max(e, tl[b][3][1 + g]);
                ends.push_back({rel(e), b});
            }
            std::sort(ends.begin(), ends.end());
            for (auto [end, b] : {ends[ends.size() / 2], ends.back()}) {
                const unsigned mine = (stages - 1 - b) / grid + 1;
                printf("%-8s timeline k=%u n=%u block %u (%s end %lld): wait %lld; stage issued/landed/released:",
                       variant, K, N, b, end == ends.back().first ? "latest" : "median", end, rel(tl[b][3][0]));
                for (unsigned s = 0; s < mine && s < TL_STAGES; ++s)
                    printf(" %u:%lld/%lld/%lld", s, rel(tl[b][0][s]), rel(tl[b][1][s]), rel(tl[b][2][s]));
                printf("; group ends");
                for (unsigned g = 0; g < G; ++g) printf(" %lld", rel(tl[b][3][1 + g]));
                printf("\n");
            }
        }
#endif
#ifdef PROBE_STAMPS
        if (R) {
            static unsigned long long st[4][1024];
            CK(cudaMemcpyFromSymbol(st, g_stamp, sizeof st));
            unsigned long long t0 = ~0ull;
            for (unsigned b = 0; b < grid; ++b) t0 = std::min(t0, st[1][b]);
            printf("%-8s stamps k=%u n=%u (ns after the first PDL wait returned; median / max):", variant,
                   K, N);
            const char* step[4] = {"entry", "wait", "last landed", "end"};
            for (int s = 0; s < 4; ++s) {
                std::vector<long long> v;
                for (unsigned b = 0; b < grid; ++b) v.push_back((long long)(st[s][b] - t0));
                std::sort(v.begin(), v.end());
                printf("  %s %lld / %lld", step[s], v[v.size() / 2], v.back());
            }
            printf("\n");
        }
#endif
        CK(cudaMemset(out, 0xff, N * 2));
        call(w);
        const double worst = gemv_bf16_error(w, x, out, N, K);
        printf("%-8s R=%u S=%u nst=%-2u k=%-6u n=%-6u %7.2f us  %5.1f%% of copy (%.0f GB/s)  "
               "max |out - ref| / sum|x w| %.1e  %d/SM grid=%u\n", variant, R, S, nst, K, N,
               us, 100.0 * bytes / (copy_gbs * 1e3) / us, copy_gbs, worst, per_sm, grid);
        fflush(stdout);
        CK(cudaFree(w));
        CK(cudaFree(x));
        CK(cudaFree(out));
    }
    return 0;
}
