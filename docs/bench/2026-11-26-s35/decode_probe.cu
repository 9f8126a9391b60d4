// Session 40: PROBE_CASES picks the cases' KV heads and lengths (default: the ops bench's four
// ring cases, as before); the workspace is twice the kernel's and zeroed (ll_variants.py).
//
// Session 35: with PROBE_SWZ (and ATTN_PRESWIZZLED) the probe launches attention.cu's own
// sdpa_decode_ring_bf16_d128_swz (1-d copies of a pre-swizzled cache) instead of the tensor-map
// entry point.
//
// Session 35: session 34's probe; with ATTN_PRESWIZZLED the cache is rewritten after its fill
// so that chunk c (16 bytes) of key r's row within each 64-column block lies at c ^ (r % 8): the
// layout a 1-d copy of a 64-key tile lands in the swizzle the consumers read (RowSwizzledKV).
//
// Session 34: session 30's probe, which also passes the raw K and V addresses of each call's
// copy (AttnArgs::kraw / vraw) to variants that define ATTN_RAW_KV; PROBE_UNITS (units aimed
// at, 132 by default, as launch::SDPA_RING_UNITS) and PROBE_STAGES (ring slots, 4) override the launch; variants that define ATTN_HALFROW_MAP get tensor
// maps of 128-byte lines (two a key) with 128-line boxes; ATTN_PADDED_RING, a ring of rows padded
// by 8 elements.
//
// Session 30: gpukit's decode ring (sdpa_decode_ring_bf16_d128 from attention.cu, or a patched
// copy: -DATTN_SRC=...) at the ops bench's four ring cases, launched as gpukit launches it
// (launch::sdpa_decode_ring, attention.rs decode_ring), timed by session 19's harness (graphs of
// 20 calls with PDL, median of 20 replays, caches rotated past L2). With -DDECODE_TRACE (a copy
// made by trace_patch.py) it prints where one launch's time goes. With OUTFILE set it writes
// every case's output (bf16) there, to compare variants.
//
// Build: nvcc -O3 -std=c++17 -arch=sm_90a -I gpukit-kernels/cuda -I <s19 dir>
//        -DATTN_SRC='"path/attention.cu"' decode_probe.cu -o decode_probe -lcuda
#include <cuda.h>

#include <array>
#include <cmath>
#include <vector>
#include <cstring>
#include <string>

#include "harness.cuh"
#include ATTN_SRC

#ifdef ATTN_PRESWIZZLED
// Rows of 128 bf16 (16 chunks): chunk c of row r to (c & 8) | ((c & 7) ^ (r & 7)), in place.
__global__ void preswizzle(uint4* p, size_t rows) {
    for (size_t r = blockIdx.x * size_t(blockDim.x) + threadIdx.x; r < rows; r += size_t(gridDim.x) * blockDim.x) {
        uint4 v[16];
        for (int c = 0; c < 16; ++c) v[c] = p[r * 16 + c];
        for (int c = 0; c < 16; ++c) p[r * 16 + ((c & 8) | ((c & 7) ^ int(r & 7)))] = v[c];
    }
}
#endif

static CUtensorMap tensor_map(const void* base, unsigned kv_heads, unsigned len) {
    CUtensorMap m;
#ifdef ATTN_HALFROW_MAP
    // Each key's 256-byte row as two 128-byte lines: one box of 128 lines is a whole 64-key
    // tile, 16 KiB contiguous in the cache.
    const cuuint64_t dims[4] = {64, 2 * cuuint64_t(len), kv_heads, 1};
    const cuuint64_t strides[3] = {64 * 2, cuuint64_t(len) * 128 * 2, cuuint64_t(kv_heads) * len * 128 * 2};
    const cuuint32_t box[4] = {64, 128, 1, 1}, es[4] = {1, 1, 1, 1};
#else
    const cuuint64_t dims[4] = {128, len, kv_heads, 1};
    const cuuint64_t strides[3] = {128 * 2, cuuint64_t(len) * 128 * 2, cuuint64_t(kv_heads) * len * 128 * 2};
    const cuuint32_t box[4] = {64, 64, 1, 1}, es[4] = {1, 1, 1, 1};
#endif
    const CUresult r = cuTensorMapEncodeTiled(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, const_cast<void*>(base), dims,
                                              strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                              CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) {
        fprintf(stderr, "cuTensorMapEncodeTiled: %d\n", int(r));
        exit(1);
    }
    return m;
}

#ifdef DECODE_TRACE
// One replay's launches 4..15: per step, min / median / max over blocks of the globaltimer time
// since the launch's first block entered (ns), and the clock-cycle steps inside blocks.
static void report_trace(unsigned grid) {
    static long long c[32][132][20], g[32][132][20];
    static unsigned it[132];
    CK(cudaMemcpyFromSymbol(c, g_trc, sizeof c));
    CK(cudaMemcpyFromSymbol(g, g_trg, sizeof g));
    CK(cudaMemcpyFromSymbol(it, g_it, sizeof it));
    const char* names[12] = {"P entry", "P waited", "P first copy", "P last copy", "C entry", "C waited",
                             "C first tile", "C last tile", "C attended", "C partial out", "C counted",
                             "C merged (last)"};
    // Launch indices in the ring of 32: it[b] launches were recorded; take 12 from the middle of
    // the last 20.
    const unsigned n = it[0];
    std::vector<double> acc[12][3];
    std::vector<double> gaps, spans, ends_last, ends_rest;
    std::vector<double> cyc[6];  // cycle steps: waited→first tile, first→last tile, last tile→attended, attended→partial, partial→counted, counted→merged
    double ghz_sum = 0;
    int ghz_n = 0;
    long long gmin_all = -1;
    for (unsigned L = n - 16; L < n - 4; ++L) {
        const unsigned i = L % 32, j = (L + 1) % 32;
        long long t0 = -1, t0n = -1, end = 0;
        for (unsigned b = 0; b < grid; ++b) {
            if (t0 < 0 || g[i][b][0] < t0) t0 = g[i][b][0];
            if (t0n < 0 || g[j][b][0] < t0n) t0n = g[j][b][0];
            const long long e = c[i][b][12] ? g[i][b][11] : g[i][b][10];
            end = std::max(end, e);
        }
        for (unsigned b = 0; b < grid; ++b) {
            for (int k = 0; k < 12; ++k) {
                if (k == 11 && !c[i][b][12]) continue;
                acc[k][0].push_back(double(g[i][b][k] - t0));
            }
            (c[i][b][12] ? ends_last : ends_rest).push_back(double((c[i][b][12] ? g[i][b][11] : g[i][b][10]) - t0));
            const int from[6] = {5, 6, 7, 8, 9, 10}, to[6] = {6, 7, 8, 9, 10, 11};
            for (int k = 0; k < 6; ++k) {
                if (to[k] == 11 && !c[i][b][12]) continue;
                cyc[k].push_back(double(c[i][b][to[k]] - c[i][b][from[k]]));
            }
            const long long e = c[i][b][12] ? 11 : 10;
            const double dg = double(g[i][b][e] - g[i][b][4]), dc = double(c[i][b][e] - c[i][b][4]);
            if (dg > 0) {
                ghz_sum += dc / dg;
                ++ghz_n;
            }
        }
        gaps.push_back(double(t0n - end));
        spans.push_back(double(end - t0));
        if (gmin_all < 0 || t0 < gmin_all) gmin_all = t0;
    }
    auto pct = [](std::vector<double> v, double q) {
        if (v.empty()) return -1.0;
        std::sort(v.begin(), v.end());
        return v[size_t(q * (v.size() - 1))];
    };
    const double ghz = ghz_sum / std::max(ghz_n, 1);
    printf("  trace: %u launches recorded; 12 launches x %u blocks; SM clock %.2f GHz (clock64 / globaltimer)\n", n,
           grid, ghz);
    printf("  %-16s %8s %8s %8s %8s   (ns since the launch's first block entry, globaltimer)\n", "step", "min",
           "p10", "median", "max");
    for (int k = 0; k < 12; ++k)
        printf("  %-16s %8.0f %8.0f %8.0f %8.0f\n", names[k], pct(acc[k][0], 0), pct(acc[k][0], 0.1),
               pct(acc[k][0], 0.5), pct(acc[k][0], 1));
    printf("  %-16s %8.0f %8.0f %8.0f %8.0f\n", "end (non-last)", pct(ends_rest, 0), pct(ends_rest, 0.1),
           pct(ends_rest, 0.5), pct(ends_rest, 1));
    printf("  %-16s %8.0f %8.0f %8.0f %8.0f\n", "end (last split)", pct(ends_last, 0), pct(ends_last, 0.1),
           pct(ends_last, 0.5), pct(ends_last, 1));
    printf("  launch span (first entry -> last end) median %.0f ns; last end -> next launch's first entry median "
           "%.0f ns (min %.0f, max %.0f)\n",
           pct(spans, 0.5), pct(gaps, 0.5), pct(gaps, 0), pct(gaps, 1));
    const char* cn[6] = {"waited->first tile", "first->last tile", "last tile->attended", "attended->partial",
                         "partial->counted", "counted->merged"};
    {
        // The producer between its wait and its first copy (cycles → ns).
        std::vector<double> p1, p2, p3;
        for (unsigned L = n - 16; L < n - 4; ++L)
            for (unsigned b = 0; b < grid; ++b) {
                const long long* x = c[L % 32][b];
                p1.push_back(double(x[14] - x[1]));
                p2.push_back(double(x[15] - x[14]));
                p3.push_back(double(x[2] - x[15]));
            }
        std::vector<double> m1, m2, m3;
        for (unsigned L = n - 16; L < n - 4; ++L)
            for (unsigned b = 0; b < grid; ++b) {
                const long long* x = c[L % 32][b];
                if (!x[12] || !x[16]) continue;
                m1.push_back(double(x[16] - x[10]));
                if (x[17]) m2.push_back(double(x[17] - x[16]));
                m3.push_back(double(x[18] - (x[17] ? x[17] : x[16])));
            }
        printf("  split merge, ns (min / median / max): counted->slot 16 %.0f / %.0f / %.0f, slot 16->17 "
               "%.0f / %.0f / %.0f, slot 17 (or 16)->18 %.0f / %.0f / %.0f\n",
               pct(m1, 0) / ghz, pct(m1, 0.5) / ghz, pct(m1, 1) / ghz, pct(m2, 0) / ghz, pct(m2, 0.5) / ghz,
               pct(m2, 1) / ghz, pct(m3, 0) / ghz, pct(m3, 0.5) / ghz, pct(m3, 1) / ghz);
        printf("  producer, ns (min / median / max): waited->branch %.0f / %.0f / %.0f, branch->unit %.0f / %.0f / "
               "%.0f, unit->first tile's copies issued %.0f / %.0f / %.0f\n",
               pct(p1, 0) / ghz, pct(p1, 0.5) / ghz, pct(p1, 1) / ghz, pct(p2, 0) / ghz, pct(p2, 0.5) / ghz,
               pct(p2, 1) / ghz, pct(p3, 0) / ghz, pct(p3, 0.5) / ghz, pct(p3, 1) / ghz);
    }
    printf("  in-block steps, ns at %.2f GHz (min / median / max over blocks):\n", ghz);
    for (int k = 0; k < 6; ++k)
        printf("    %-20s %7.0f %7.0f %7.0f\n", cn[k], pct(cyc[k], 0) / ghz, pct(cyc[k], 0.5) / ghz,
               pct(cyc[k], 1) / ghz);
    // Globaltimer granularity: the smallest nonzero step between entries.
    long long step = -1;
    for (unsigned b = 1; b < grid; ++b) {
        const long long d = llabs(g[(n - 8) % 32][b][0] - g[(n - 8) % 32][0][0]);
        if (d > 0 && (step < 0 || d < step)) step = d;
    }
    printf("  smallest nonzero entry difference between blocks: %lld ns\n", step);
}
#endif

static unsigned env_u(const char* name, unsigned dflt) {
    const char* v = getenv(name);
    return v ? unsigned(atoi(v)) : dflt;
}

int main(int argc, char** argv) {
    const char* variant = argc > 1 ? argv[1] : "main";
    const char* outfile = getenv("OUTFILE");
    FILE* of = outfile ? fopen(outfile, "wb") : nullptr;
    CK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
    CK(cudaFree(nullptr));
    const double copy_gbs = copy_ceiling_gbs();
    int sms;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const unsigned D = 128, q_heads = 32;
    // PROBE_CASES="kv_heads:len,…" (session 40) replaces the four ring cases of the ops bench.
    std::vector<std::array<unsigned, 2>> cases = {{8, 8192}, {8, 32768}, {4, 8192}, {4, 32768}};  // kv_heads, len
    if (const char* pc = getenv("PROBE_CASES")) {
        cases.clear();
        for (const char* c = pc; *c;) {
            unsigned h = 0, l = 0;
            int n = 0;
            if (sscanf(c, "%u:%u%n", &h, &l, &n) != 2) break;
            cases.push_back({h, l});
            c += n;
            if (*c == ',') ++c;
        }
    }
    for (const auto& cs : cases) {
        const unsigned kv_heads = cs[0], len = cs[1];
        // launch::sdpa_decode_ring_splits: split_keys(len, 132 / kv_heads).
        const unsigned tiles = (len + 63) / 64, want = std::min(std::max(env_u("PROBE_UNITS", 132) / kv_heads, 1u), tiles);
        const unsigned chunk = (tiles + want - 1) / want * 64, splits = (len + chunk - 1) / chunk;
        const unsigned units = kv_heads * splits, grid = std::min<unsigned>(units, sms);
        const unsigned stages = env_u("PROBE_STAGES", 4);  // 128 KiB of 32 KiB stages at head_dim 128
#ifdef RING_RED_BYTES
        const size_t merge = RING_RED_BYTES(128);
#else
        const size_t merge = (4 * 16 * (D + 8) + 3 * 64 + 2 * 16) * 4;
#endif
#ifdef ATTN_PADDED_RING
        const size_t smem = stages * 2 * 64 * (D + 8) * 2 + merge + 1024;  // rows padded by 8 elements
#else
        const size_t smem = stages * 2 * 64 * D * 2 + merge + 1024;
#endif
        const size_t half = size_t(kv_heads) * len * D * 2, bytes = 2 * half, copies = rotation(bytes);
        unsigned char* kv;
        CK(cudaMalloc(&kv, copies * bytes));
        fill<<<1024, 256, 0, g_stream>>>(reinterpret_cast<unsigned*>(kv), copies * bytes / 4);
#ifdef ATTN_PRESWIZZLED
        preswizzle<<<1024, 256, 0, g_stream>>>(reinterpret_cast<uint4*>(kv), copies * bytes / 256);
#endif
        bf16 *q, *out;
        CK(cudaMalloc(&q, q_heads * D * 2));
        fill<<<1, 256, 0, g_stream>>>(reinterpret_cast<unsigned*>(q), q_heads * D / 2);
        CK(cudaMalloc(&out, q_heads * D * 2));
        float* partial;
        // Twice the kernel's workspace, zeroed: session 40's LL variant stores 8-byte words.
        CK(cudaMalloc(&partial, size_t(units) * 16 * (D + 4) * 8));
        CK(cudaMemset(partial, 0, size_t(units) * 16 * (D + 4) * 8));
        unsigned* counters;
        CK(cudaMalloc(&counters, 4096 * 4));
        CK(cudaMemset(counters, 0, 4096 * 4));
        std::vector<TensorMap> tk(copies), tv(copies);
        for (size_t c = 0; c < copies; ++c) {
            const CUtensorMap mk = tensor_map(kv + c * bytes, kv_heads, len),
                              mv = tensor_map(kv + c * bytes + half, kv_heads, len);
            memcpy(&tk[c], &mk, sizeof mk);
            memcpy(&tv[c], &mv, sizeof mv);
        }
        AttnArgs a = {};
        a.q_stride[0] = q_heads * D;
        a.q_stride[1] = D;
        a.q_stride[2] = D;
        a.k_stride[0] = (long long)kv_heads * len * D;
        a.k_stride[1] = (long long)len * D;
        a.k_stride[2] = D;
        for (int i = 0; i < 3; ++i) {
            a.v_stride[i] = a.k_stride[i];
            a.o_stride[i] = a.q_stride[i];
        }
        a.q_heads = q_heads;
        a.kv_heads = kv_heads;
        a.q_len = 1;
        a.kv_len = len;
        a.scale_log2 = 0.088f * 1.4426950408889634f;
        a.causal = 1;
        a.key_begin = 0;
        a.chunk = chunk;
        a.splits = splits;
        a.stages = stages;
        a.partial = partial;
        a.position = nullptr;
#ifdef PROBE_SWZ
        CK(cudaFuncSetAttribute(sdpa_decode_ring_bf16_d128_swz, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
#else
        CK(cudaFuncSetAttribute(sdpa_decode_ring_bf16_d128, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
#endif
        auto call = [&](int i) {
            AttnArgs ai = a;
#ifdef ATTN_RAW_KV
            ai.kraw = kv + (i % copies) * bytes;
            ai.vraw = ai.kraw + half;
#endif
#ifdef PROBE_SWZ
            const bf16* kc = reinterpret_cast<const bf16*>(kv + (i % copies) * bytes);
            launch(sdpa_decode_ring_bf16_d128_swz, grid, RING_THREADS, smem, true, (const bf16*)q, out, ai, kc,
                   kc + half / 2, counters, 1u);
#else
            launch(sdpa_decode_ring_bf16_d128, grid, RING_THREADS, smem, true, (const bf16*)q, out, ai,
                   tk[i % copies], tv[i % copies], counters, 1u);
#endif
        };
        const double us = time_us(call, 20, 20, 5);
        printf("%-12s GQA %u len=%-6u kv_heads=%u splits=%-3u grid=%-3u stages=%u %7.2f us  %5.1f%% of copy (%.0f GB/s)\n",
               variant, q_heads / kv_heads, len, kv_heads, splits, grid, stages, us, 100.0 * bytes / (copy_gbs * 1e3) / us,
               copy_gbs);
        fflush(stdout);
#ifdef DECODE_TRACE
        // time_us's last replay filled the trace ring (20 launches).
        report_trace(grid);
        fflush(stdout);
        CK(cudaMemcpyToSymbol(g_it, std::vector<unsigned>(132, 0).data(), 132 * 4));
#endif
        if (of) {
            call(0);
            CK(cudaStreamSynchronize(g_stream));
            std::vector<unsigned short> h(q_heads * D);
            CK(cudaMemcpy(h.data(), out, h.size() * 2, cudaMemcpyDeviceToHost));
            fwrite(h.data(), 2, h.size(), of);
        }
        CK(cudaFree(kv));
        CK(cudaFree(q));
        CK(cudaFree(out));
        CK(cudaFree(partial));
        CK(cudaFree(counters));
    }
    if (of) fclose(of);
    return 0;
}
