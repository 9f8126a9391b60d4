// Session 32: the Q4_0 GEMV, main's one-warp-per-row kernel (`qgemv_bf16`) against the tensor-core
// ring (`qgemv_ring_bf16`), both from quant.cu (or a patched copy: -DQUANT_SRC=...), timed in
// session 19's harness (graphs of 50 calls with PDL, weights rotated past L2) and every output
// checked against a host reference in double precision.
// Usage: qprobe K,N[,STAGE_KIB,RING_KIB,NPRE[,FMT]] ... (NPRE: stages asked of L2 before the
// PDL wait, 0 for none; FMT 0: Q8_0 weights, the plain kernel only)
// Build: nvcc -O3 -std=c++17 -arch=sm_90a -I gpukit-kernels/cuda -DQUANT_SRC='"path/quant.cu"' qprobe.cu
#include <cmath>
#include <cstring>

#include "../2026-11-24-h200-s19/harness.cuh"
#include QUANT_SRC

// Random Q4_0 (bb = 18) or Q8_0 (bb = 34) blocks: d a finite f16 of magnitude 2^-8 … 2^-4 and
// either sign, random quants.
__global__ void fill_q4(unsigned char* p, size_t nblocks, unsigned seed, unsigned bb) {
    for (size_t b = blockIdx.x * size_t(blockDim.x) + threadIdx.x; b < nblocks;
         b += size_t(gridDim.x) * blockDim.x) {
        unsigned h = static_cast<unsigned>(b) * 2654435761u + seed;
        unsigned char* q = p + b * bb;
        for (unsigned i = 0; i < bb; ++i) {
            h ^= h >> 13;
            h *= 0x9E3779B9u;
            h ^= h >> 16;
            q[i] = (unsigned char)h;
        }
        const unsigned short d = (unsigned short)(((h >> 3) & 0x8000u) | ((0x0Bu + (h & 3u)) << 10) | (h >> 22));
        q[0] = d & 0xFF;
        q[1] = d >> 8;
    }
}

static double bf16_value(unsigned short b) {
    unsigned u = unsigned(b) << 16;
    float v;
    memcpy(&v, &u, 4);
    return v;
}
static double f16_value(unsigned short h) {
    const int e = (h >> 10) & 31, m = h & 1023;
    const double v = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
    return h & 0x8000 ? -v : v;
}

int main(int argc, char** argv) {
    CK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
    const double copy_gbs = copy_ceiling_gbs();
    const unsigned sms = 132;
    int optin = 0;
    CK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
    for (int a = 1; a < argc; ++a) {
        unsigned K, N, stage_kib = 40, ring_kib = 160, npre_arg = ~0u, fmt = 1;
        if (sscanf(argv[a], "%u,%u,%u,%u,%u,%u", &K, &N, &stage_kib, &ring_kib, &npre_arg, &fmt) < 2)
            return 2;
        const unsigned bb = fmt == 0 ? 34 : 18;  // the plain kernel only for Q8_0 (fmt 0)
        const unsigned blocks = K / 32, row = blocks * bb;
        const size_t bytes = size_t(N) * row, copies = rotation(bytes);
        // The launch rule under test.
        const unsigned most = std::max(8u, (stage_kib * 1024 / (16 * 18)) / 8 * 8);
        const unsigned chunks = (blocks + most - 1) / most;
        const unsigned chunk = ((blocks + chunks - 1) / chunks + 7) / 8 * 8;
        unsigned pitch = chunk * 18;
        if ((pitch / 16) % 2 == 0) pitch += 16;
        const unsigned stage = 16 * pitch;
        unsigned nst = std::min(8u, std::max(2u, ring_kib * 1024 / stage));
        const unsigned extra = K * 4 + blocks * 4 + 3072;  // x, x for the MMAs, block sums, static
        while (nst > 2 && nst * stage + extra > unsigned(optin)) --nst;
        const unsigned npre = npre_arg != ~0u ? npre_arg : 1;  // the launch rule's since call 6
        const size_t smem = size_t(nst) * stage + K * 4 + blocks * 4;
        unsigned char* w;
        CK(cudaMalloc(&w, copies * bytes));
        fill_q4<<<1024, 256, 0, g_stream>>>(w, copies * bytes / bb, 12345u, bb);
        bf16 *x, *out;
        CK(cudaMalloc(&x, K * 2));
        fill<<<1, 256, 0, g_stream>>>(reinterpret_cast<unsigned*>(x), K / 2);
        CK(cudaMalloc(&out, N * 2));
        CK(cudaFuncSetAttribute(qgemv_ring_bf16, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
        const unsigned tiles = (N + 15) / 16, grid = std::min(sms, tiles);
        auto ring = [&](const unsigned char* wi) {
            launch(qgemv_ring_bf16, grid, QGEMV_RING_THREADS, smem, true, (const u8*)wi, (const bf16*)x, out,
                   N, K, chunk, pitch, nst, npre);
        };
        auto plain = [&](const unsigned char* wi) {
            launch(qgemv_bf16, (N * 32 + 255) / 256, 256, 0, true, (const u8*)wi, (const bf16*)x, out, N,
                   K, int(fmt), 1);
        };
        std::vector<unsigned char> hw(bytes);
        std::vector<unsigned short> hx(K), ho(N);
        CK(cudaMemcpy(hw.data(), w, bytes, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(hx.data(), x, K * 2, cudaMemcpyDeviceToHost));
        std::vector<double> ref(N), mag(N);
        for (unsigned n = 0; n < N; ++n) {
            double r = 0, m = 0;
            for (unsigned b = 0; b < blocks; ++b) {
                const unsigned char* q = &hw[size_t(n) * row + b * bb];
                const double d = f16_value(q[0] | (q[1] << 8));
                for (int j = 0; j < 32; ++j) {
                    const int v = fmt == 0 ? int(static_cast<signed char>(q[2 + j]))
                                           : (j < 16 ? (q[2 + j] & 15) : (q[2 + j - 16] >> 4)) - 8;
                    const double p = d * v * bf16_value(hx[b * 32 + j]);
                    r += p;
                    m += fabs(p);
                }
            }
            ref[n] = r;
            mag[n] = m;
        }
        for (int k = 0; k < (fmt == 0 ? 1 : 2); ++k) {
            const char* name = k == 0 ? (fmt == 0 ? "plainq8" : "plain") : "ring";
            auto call = [&](const unsigned char* wi) { k == 0 ? plain(wi) : ring(wi); };
            const double us = time_us([&](int i) { call(w + (i % copies) * bytes); });
            CK(cudaMemset(out, 0xff, N * 2));
            call(w);
            CK(cudaStreamSynchronize(g_stream));
            CK(cudaMemcpy(ho.data(), out, N * 2, cudaMemcpyDeviceToHost));
            double worst = 0;
            for (unsigned n = 0; n < N; ++n) {
                const double e = fabs(bf16_value(ho[n]) - ref[n]) / (mag[n] + 1e-30);
                worst = e == e ? std::max(worst, e) : INFINITY;
            }
            printf("%-6s k=%-6u n=%-6u chunk=%-4u pitch=%-5u nst=%u npre=%u %7.2f us  %5.1f%% of copy "
                   "(%.0f GB/s)  max |out - ref| / sum|terms| %.1e\n",
                   name, K, N, chunk, pitch, nst, npre, us, 100.0 * bytes / (copy_gbs * 1e3) / us,
                   copy_gbs, worst);
            fflush(stdout);
        }
#ifdef QTRACE
        // The last (eager, verified) ring call's stamps: blocks 0, the median and the last
        // finisher, per stage (µs at the SM's clock).
        {
            CK(cudaMemset(out, 0xff, N * 2));
            ring(w);
            CK(cudaStreamSynchronize(g_stream));
            static long long tr[132][64][4];
            CK(cudaMemcpyFromSymbol(tr, g_qtrace, sizeof(tr)));
            int clk = 0;
            CK(cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, 0));
            const double us = 1e3 / clk;
            const unsigned stages_per = chunks * ((tiles + grid - 1) / grid);
            std::vector<std::pair<long long, unsigned>> last;
            for (unsigned b = 0; b < grid; ++b) {
                const unsigned mine = (tiles - 1 - b) / grid + 1;
                last.push_back({tr[b][mine * chunks - 1][3], b});
            }
            std::sort(last.begin(), last.end());
            for (unsigned b : {0u, last[last.size() / 2].second, last.back().second}) {
                const unsigned mine = (tiles - 1 - b) / grid + 1;
                printf("trace k=%u n=%u block %u: x ready %.2f us; stage: issued / ready / full / released\n",
                       K, N, b, tr[b][63][0] * us);
                for (unsigned t = 0; t < mine * chunks && t < 63; ++t)
                    printf("  %2u  %6.2f %6.2f %6.2f %6.2f\n", t, tr[b][t][0] * us, tr[b][t][1] * us,
                           tr[b][t][2] * us, tr[b][t][3] * us);
            }
            (void)stages_per;
        }
#endif
        CK(cudaFree(w));
        CK(cudaFree(x));
        CK(cudaFree(out));
    }
    return 0;
}
