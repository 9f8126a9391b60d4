// Session 21: gemv_ring_bf16 (gemv.cu, or a copy patched by pieces.py: -DGEMV_SRC=...) timed in
// session 19's harness with launch::gemv_ring's parameters for the ops bench's four shapes
// (R rows per stage, S warps per group, nst stages; argv[2] overrides the ring's KiB), the
// output checked against a host reference.
//
// Build: nvcc -O3 -std=c++17 -arch=sm_90a -I gpukit-kernels/cuda -DGEMV_SRC='"path/gemv.cu"'
//        probe.cu -o probe
#include <cmath>
#include <cstring>

#include "../2026-11-24-h200-s19/harness.cuh"
#include GEMV_SRC

int main(int argc, char** argv) {
    const char* variant = argc > 1 ? argv[1] : "main";
    const unsigned ring_kib = argc > 2 ? atoi(argv[2]) : 128;
    CK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
    const double copy_gbs = copy_ceiling_gbs();
    const unsigned sms = 132;
    const unsigned shapes[][2] = {{2048, 8192}, {8192, 2048}, {4096, 14336}, {14336, 4096}};
    for (const auto& sh : shapes) {
        const unsigned K = sh[0], N = sh[1], row = K * 2;
        unsigned R = 1;
        while (R < 8 && 2 * R * row <= (32u << 10)) R *= 2;
        const unsigned S = R == 8 ? 2 : 4, G = GEMV_RING_WARPS / S;
        const unsigned nst = (ring_kib * 1024 / (R * row)) / G * G;
        const size_t bytes = size_t(N) * K * 2, copies = rotation(bytes);
        const size_t smem = size_t(nst) * R * row + row;
        unsigned char* w;
        CK(cudaMalloc(&w, copies * bytes));
        fill<<<1024, 256, 0, g_stream>>>(reinterpret_cast<unsigned*>(w), copies * bytes / 4);
        bf16 *x, *out;
        CK(cudaMalloc(&x, row));
        fill<<<1, 256, 0, g_stream>>>(reinterpret_cast<unsigned*>(x), K / 2);
        CK(cudaMalloc(&out, N * 2));
        CK(cudaFuncSetAttribute(gemv_ring_bf16, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
        auto call = [&](const unsigned char* wi) {
            launch(gemv_ring_bf16, sms, (GEMV_RING_WARPS + 1) * 32, smem, true, (const bf16*)x,
                   (const bf16*)wi, (const bf16*)nullptr, out, N, K, S, R, nst);
        };
        const double us = time_us([&](int i) { call(w + (i % copies) * bytes); });
        CK(cudaMemset(out, 0xff, N * 2));
        call(w);
        const double worst = gemv_bf16_error(w, x, out, N, K);
        printf("%-6s R=%u S=%u nst=%-2u k=%-6u n=%-6u %7.2f us  %5.1f%% of copy (%.0f GB/s)  "
               "max |out - ref| / sum|x w| %.1e\n", variant, R, S, nst, K, N, us,
               100.0 * bytes / (copy_gbs * 1e3) / us, copy_gbs, worst);
        fflush(stdout);
        CK(cudaFree(w));
        CK(cudaFree(x));
        CK(cudaFree(out));
    }
    return 0;
}
