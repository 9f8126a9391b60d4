// gpukit's gemv_ring_bf16 (gemv.cu, or a patched copy: -DGEMV_SRC=...) in the floor's harness,
// with the launch rule's parameters for the ops bench's shapes (session 19).
//
// Build: nvcc -O3 -std=c++17 -arch=sm_90a -I gpukit-kernels/cuda -DGEMV_SRC='"path/gemv.cu"'
//        gemv_probe.cu -o gemv_probe
#include <cmath>
#include <cstring>

#include "harness.cuh"
#include GEMV_SRC

int main(int argc, char** argv) {
    const char* variant = argc > 1 ? argv[1] : "main";
    // Warps per group and ring stages (launch::gemv_ring: 4 and 4).
    const unsigned S = argc > 2 ? atoi(argv[2]) : 4, nst = argc > 3 ? atoi(argv[3]) : 4;
    CK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
    const double copy_gbs = copy_ceiling_gbs();
    const unsigned sms = 132;
    // (k, n, rows per stage) as launch::gemv_ring picks them for bf16.
    const unsigned shapes[][3] = {{2048, 8192, 8}, {8192, 2048, 2}, {4096, 14336, 4}, {14336, 4096, 1}};
    for (const auto& sh : shapes) {
        const unsigned K = sh[0], N = sh[1], R = sh[2];
        const size_t bytes = size_t(N) * K * 2, copies = rotation(bytes);
        const size_t smem = size_t(nst) * R * K * 2 + size_t(K) * 2;
        unsigned char* w;
        CK(cudaMalloc(&w, copies * bytes));
        fill<<<1024, 256, 0, g_stream>>>(reinterpret_cast<unsigned*>(w), copies * bytes / 4);
        bf16 *x, *out;
        CK(cudaMalloc(&x, K * 2));
        fill<<<1, 256, 0, g_stream>>>(reinterpret_cast<unsigned*>(x), K / 2);
        CK(cudaMalloc(&out, N * 2));
        CK(cudaFuncSetAttribute(gemv_ring_bf16, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
        const double us = time_us([&](int i) {
            launch(gemv_ring_bf16, sms, (GEMV_RING_WARPS + 1) * 32, smem, true, (const bf16*)x,
                   (const bf16*)(w + (i % copies) * bytes), (const bf16*)nullptr, out, N, K, S, R, nst);
        });
        // Check copy 0's output against a host reference (double sums of the bf16 values).
        launch(gemv_ring_bf16, sms, (GEMV_RING_WARPS + 1) * 32, smem, true, (const bf16*)x,
               (const bf16*)w, (const bf16*)nullptr, out, N, K, S, R, nst);
        std::vector<unsigned short> hw(size_t(N) * K), hx(K), ho(N);
        CK(cudaMemcpy(hw.data(), w, bytes, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(hx.data(), x, K * 2, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(ho.data(), out, N * 2, cudaMemcpyDeviceToHost));
        auto f = [](unsigned short b) {
            unsigned u = unsigned(b) << 16;
            float v;
            memcpy(&v, &u, 4);
            return double(v);
        };
        double worst = 0;
        for (unsigned n = 0; n < N; ++n) {
            double ref = 0, mag = 0;
            for (unsigned k = 0; k < K; ++k) {
                ref += f(hx[k]) * f(hw[size_t(n) * K + k]);
                mag += fabs(f(hx[k]) * f(hw[size_t(n) * K + k]));
            }
            worst = std::max(worst, fabs(f(ho[n]) - ref) / (mag + 1e-30));
        }
#ifdef GEMV_TRACE
        {
            // The last launch's timeline, µs from each block's entry (SM clock).
            static long long tr[132][48];
            int khz;
            CK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
            CK(cudaMemcpyFromSymbol(tr, g_trace, sizeof tr));
            for (int b : {0, 1, 66, 131}) {
                auto at = [&](int e) { return tr[b][e] ? (tr[b][e] - tr[b][0]) / (khz * 1e-3) : -1.0; };
                printf("  block %3d: producer wait done %.2f, consumers have x %.2f\n", b, at(1), at(34));
                for (int t = 0; t < 8; ++t)
                    printf("    stage %d: copy %.2f  landed/woke %.2f  released %.2f  reduced %.2f\n", t,
                           at(2 + t), at(10 + t), at(18 + t), at(26 + t));
            }
            CK(cudaMemset(g_trace, 0, 0));
        }
#endif
        printf("%-10s S=%u nst=%u k=%-6u n=%-6u %7.2f us  %5.1f%% of copy (%.0f GB/s)  "
               "max |out - ref| / sum|x w| %.1e\n", variant, S, nst, K, N, us,
               100.0 * bytes / (copy_gbs * 1e3) / us, copy_gbs, worst);
        fflush(stdout);
        CK(cudaFree(w));
        CK(cudaFree(x));
        CK(cudaFree(out));
    }
    return 0;
}
