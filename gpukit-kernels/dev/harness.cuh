// Timing harness of the probes in this folder: the ops bench's method in plain CUDA.
//
// A case is `batch` calls captured in one CUDA graph, launched with programmatic dependent
// launch (PDL) as the decode step launches its kernels; the graph is replayed between two
// events and the median over `trials` replays, divided by `batch`, is the time per call (GPU
// time only). Inputs rotate over copies totalling at least 160 MiB, so no call finds its bytes
// in L2 (50 MB on an H100, 60 MB on an H200). The copy ceiling is measured as
// bench/peer_ops.py measures it: a 1 GiB device-to-device copy, eager, read + write counted.
//
// Everything here lives in namespace `probe`, so a probe can include product sources
// (../cuda/*.cu) beside it without name clashes.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#define CK(x)                                                                                  \
    do {                                                                                       \
        cudaError_t e_ = (x);                                                                  \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));        \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

namespace probe {

// Hashed words whose two bf16 halves are finite, of either sign, magnitude 2^-7 … 2^-3: no
// timing runs on zeros, and a GEMV's output can be checked against a reference.
__global__ void fill(unsigned* p, size_t n) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
         i += size_t(gridDim.x) * blockDim.x) {
        unsigned x = static_cast<unsigned>(i) * 2654435761u + 12345u;
        x ^= x >> 13;
        x *= 0x9E3779B9u;
        x ^= x >> 16;
        const unsigned keep = 0x807F807Fu;  // signs and mantissas
        p[i] = (x & keep) | (((0x78u + ((x >> 7) & 3u)) << 7) | ((0x78u + ((x >> 23) & 3u)) << 23));
    }
}

inline cudaStream_t& stream() {
    static cudaStream_t s = [] {
        cudaStream_t t;
        CK(cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking));
        return t;
    }();
    return s;
}

// Fills `bytes` (a multiple of 4) at p with fill's words.
inline void fill_bytes(void* p, size_t bytes) {
    fill<<<1024, 256, 0, stream()>>>(static_cast<unsigned*>(p), bytes / 4);
    CK(cudaGetLastError());
}

// Launches kernel(args...) on the probe stream, with PDL when `pdl`.
template <typename... P, typename... A>
void launch(void (*kernel)(P...), unsigned grid, unsigned block, size_t smem, bool pdl, A... args) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(grid);
    cfg.blockDim = dim3(block);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream();
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = pdl ? 1 : 0;
    CK(cudaLaunchKernelEx(&cfg, kernel, static_cast<P>(args)...));
}

// Microseconds per call: `warm` eager calls, then `batch` calls (call(i), i = 0 … batch − 1)
// captured in one graph, replays timed between two events, median of `trials`.
inline double time_us(const std::function<void(int)>& call, int batch = 50, int trials = 20,
                      int warm = 5) {
    for (int i = 0; i < warm; ++i) call(i);
    CK(cudaStreamSynchronize(stream()));
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(stream(), cudaStreamCaptureModeGlobal));
    for (int i = 0; i < batch; ++i) call(i);
    CK(cudaStreamEndCapture(stream(), &g));
    cudaGraphExec_t ge;
    CK(cudaGraphInstantiate(&ge, g, 0));
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    CK(cudaGraphLaunch(ge, stream()));
    std::vector<double> t;
    for (int r = 0; r < trials; ++r) {
        CK(cudaEventRecord(a, stream()));
        CK(cudaGraphLaunch(ge, stream()));
        CK(cudaEventRecord(b, stream()));
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms * 1000.0 / batch);
    }
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

// The device-to-device copy ceiling in GB/s (1 GiB, eager, read + write counted), median of 10.
inline double copy_ceiling_gbs() {
    const size_t n = size_t(1) << 30;
    void *a, *b;
    CK(cudaMalloc(&a, n));
    CK(cudaMalloc(&b, n));
    CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, stream()));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<double> t;
    for (int r = 0; r < 10; ++r) {
        CK(cudaEventRecord(e0, stream()));
        for (int k = 0; k < 5; ++k)
            CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, stream()));
        CK(cudaEventRecord(e1, stream()));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        t.push_back(2.0 * n / (ms / 5 * 1e-3) / 1e9);
    }
    std::sort(t.begin(), t.end());
    CK(cudaFree(a));
    CK(cudaFree(b));
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    return t[t.size() / 2];
}

// Copies of a `bytes` input that reach 160 MiB, at most 16: the ops bench's rotation.
inline size_t rotation(size_t bytes) {
    return std::min<size_t>(16, std::max<size_t>(1, ((size_t(160) << 20) + bytes - 1) / bytes));
}

inline double bf16_to_double(unsigned short b) {
    unsigned u = unsigned(b) << 16;
    float v;
    memcpy(&v, &u, 4);
    return v;
}

// A one-row bf16 GEMV's worst relative error: the largest |out[n] − Σ_k x[k]·w[n, k]| /
// Σ_k |x[k]·w[n, k]| over the N outputs, the reference in double precision; infinity if an
// output is NaN. w ([N, K]), x and out are device pointers.
inline double gemv_bf16_error(const void* w, const void* x, const void* out, unsigned N,
                              unsigned K) {
    std::vector<unsigned short> hw(size_t(N) * K), hx(K), ho(N);
    CK(cudaMemcpy(hw.data(), w, hw.size() * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hx.data(), x, hx.size() * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(ho.data(), out, ho.size() * 2, cudaMemcpyDeviceToHost));
    double worst = 0;
    for (unsigned n = 0; n < N; ++n) {
        double ref = 0, mag = 0;
        for (unsigned k = 0; k < K; ++k) {
            const double p = bf16_to_double(hx[k]) * bf16_to_double(hw[size_t(n) * K + k]);
            ref += p;
            mag += fabs(p);
        }
        const double e = fabs(bf16_to_double(ho[n]) - ref) / (mag + 1e-30);
        worst = e == e ? std::max(worst, e) : INFINITY;
    }
    return worst;
}

}  // namespace probe
