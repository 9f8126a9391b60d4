// Token sampling on the device: one 1024-thread block per row of logits [rows, vocab], writing
// the chosen id to out[row]. Every f32 operation happens in the order of the CPU reference
// (gpukit-ops/src/sampling.rs, which documents the algorithm), so both pick the same id:
// thread t owns the contiguous chunk [t·C, (t+1)·C) of the vocabulary (C = ceil(vocab / 1024)),
// sums run sequentially within a chunk, then over 32 groups of 32 chunks, then over the groups.
// The draw is Philox-4x32-10 (Salmon et al. 2011) at counter (step, row), key seed; the step is
// read from device memory so a captured decode step replays with the next one.
#include "common.cuh"

#define SAMPLER_THREADS 1024

struct SamplerArgs {
    float temperature;   // 0: greedy
    float top_p;         // 1: off
    float min_p;         // 0: off
    float penalty;       // 1: off
    unsigned int top_k;  // 0: off
    unsigned int vocab;
    unsigned int window; // recent ids per row (negative entries are empty)
    unsigned int cache;  // 1: probabilities kept in shared memory after the normaliser
    unsigned long long seed;
};

__device__ __forceinline__ void philox4x32_10(unsigned c[4], unsigned k0, unsigned k1) {
#pragma unroll
    for (int r = 0; r < 10; ++r) {
        if (r > 0) {
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        const unsigned hi0 = __umulhi(0xD2511F53u, c[0]), lo0 = 0xD2511F53u * c[0];
        const unsigned hi1 = __umulhi(0xCD9E8D57u, c[2]), lo1 = 0xCD9E8D57u * c[2];
        const unsigned n0 = hi1 ^ c[1] ^ k0, n2 = hi0 ^ c[3] ^ k1;
        c[0] = n0;
        c[1] = lo1;
        c[2] = n2;
        c[3] = lo0;
    }
}

// exp_det of the reference: 2^(x·log2 e) by a degree-7 polynomial in fused multiply-adds.
__device__ __forceinline__ float exp_det(float x) {
    // Explicit roundings: a fused x·c − n would differ from the reference.
    const float t = __fmul_rn(x, __int_as_float(0x3fb8aa3b));
    if (isnan(t) || t < -126.0f) return 0.0f;
    const float n = floorf(t), f = __fsub_rn(t, n);
    float r = __int_as_float(0x377fe5fe);
    r = fmaf(r, f, __int_as_float(0x39218489));
    r = fmaf(r, f, __int_as_float(0x3aaec3ff));
    r = fmaf(r, f, __int_as_float(0x3c1d955b));
    r = fmaf(r, f, __int_as_float(0x3d635847));
    r = fmaf(r, f, __int_as_float(0x3e75fdf0));
    r = fmaf(r, f, __int_as_float(0x3f317218));
    r = fmaf(r, f, __int_as_float(0x3f800000));
    return __fmul_rn(r, __int_as_float(((int)n + 127) << 23));
}

// The reference's two-level sum of the threads' partials (result in every thread).
__device__ __forceinline__ float sum2(float v, float* sh) {
    sh[threadIdx.x] = v;
    __syncthreads();
    if (threadIdx.x < 32) {
        float g = 0.0f;
        for (int i = 0; i < 32; ++i) g = __fadd_rn(g, sh[threadIdx.x * 32 + i]);
        sh[SAMPLER_THREADS + threadIdx.x] = g;
    }
    __syncthreads();
    float total = 0.0f;
    for (int i = 0; i < 32; ++i) total = __fadd_rn(total, sh[SAMPLER_THREADS + i]);
    __syncthreads();
    return total;
}

__device__ __forceinline__ unsigned count_all(unsigned v, unsigned* sh) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
    __syncthreads();
    unsigned total = 0;
    for (int i = 0; i < 32; ++i) total += sh[i];
    __syncthreads();
    return total;
}

template <typename T>
__device__ __forceinline__ float logit(const T* row, const unsigned* pen, unsigned i, float penalty) {
    float x = to_f32(row[i]);
    if (penalty != 1.0f && (pen[i >> 5] >> (i & 31)) & 1u) x = x > 0.0f ? __fdiv_rn(x, penalty) : __fmul_rn(x, penalty);
    return x;
}

// The block's first maximum of the threads' (best, at) into *out (0 when there is none):
// warps by butterfly, then warp 0's results in warp order. `shv`, `shi`: 32 entries each.
__device__ __forceinline__ void block_argmax_out(float best, unsigned at, float* shv,
                                                 unsigned* shi, int* out) {
    warp_argmax(best, at);
    if ((threadIdx.x & 31) == 0) { shv[threadIdx.x >> 5] = best; shi[threadIdx.x >> 5] = at; }
    __syncthreads();
    if (threadIdx.x == 0) {
        float b = shv[0];
        unsigned id = shi[0];
        for (unsigned i = 1; i < (blockDim.x + 31) / 32; ++i) argmax_merge(b, id, shv[i], shi[i]);
        *out = (int)(id == GPUKIT_NO_INDEX ? 0 : id);
    }
}

template <typename T>
__device__ void sample_row(const T* __restrict__ logits, const int* __restrict__ recent,
                           const long long* __restrict__ step_ptr, const SamplerArgs& a,
                           int* __restrict__ out) {
    // Dynamic shared memory: the penalty bitmap [ceil(vocab / 32)], then with `cache` the
    // probabilities, thread-interleaved ([chunk index][thread]: conflict-free).
    extern __shared__ unsigned sampler_smem[];
    __shared__ float sh[SAMPLER_THREADS + 32];
    __shared__ float shv[32];
    __shared__ unsigned shi[32];
    const unsigned row_i = blockIdx.x, tid = threadIdx.x, V = a.vocab;
    const T* row = logits + (unsigned long long)row_i * V;
    unsigned* pen = sampler_smem;
    const unsigned words = (V + 31) / 32;
    for (unsigned w = tid; w < words; w += SAMPLER_THREADS) pen[w] = 0u;
    __syncthreads();
    if (a.penalty != 1.0f) {
        for (unsigned j = tid; j < a.window; j += SAMPLER_THREADS) {
            const int id = recent[(unsigned long long)row_i * a.window + j];
            if (id >= 0 && (unsigned)id < V) atomicOr(&pen[id >> 5], 1u << (id & 31));
        }
    }
    __syncthreads();
    const unsigned C = (V + SAMPLER_THREADS - 1) / SAMPLER_THREADS;
    const unsigned lo = min(V, tid * C), hi = min(V, lo + C);
    if (a.temperature <= 0.0f) {
        // Greedy: first maximum (value, then the lower id). The order of the reads cannot change
        // that, so threads stride through the row (coalesced loads) instead of owning chunks.
        float best = -GPUKIT_INF;
        unsigned bid = GPUKIT_NO_INDEX;
        for (unsigned i = tid; i < V; i += SAMPLER_THREADS) {
            const float x = logit(row, pen, i, a.penalty);
            if (bid == GPUKIT_NO_INDEX || x > best) { best = x; bid = i; }
        }
        block_argmax_out(best, bid, shv, shi, out + row_i);
        return;
    }
    // Max of logits / temperature (order-free).
    float m = -GPUKIT_INF;
    for (unsigned i = lo; i < hi; ++i) m = fmaxf(m, __fdiv_rn(logit(row, pen, i, a.penalty), a.temperature));
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if ((tid & 31) == 0) shv[tid >> 5] = m;
    __syncthreads();
    m = shv[0];
    for (int i = 1; i < 32; ++i) m = fmaxf(m, shv[i]);
    __syncthreads();
    // Normaliser.
    float s = 0.0f;
    for (unsigned i = lo; i < hi; ++i)
        s = __fadd_rn(s, exp_det(__fsub_rn(__fdiv_rn(logit(row, pen, i, a.penalty), a.temperature), m)));
    const float total = sum2(s, sh);
#define SAMPLER_P_NEW(i) __fdiv_rn(exp_det(__fsub_rn(__fdiv_rn(logit(row, pen, (i), a.penalty), a.temperature), m)), total)
    // Each thread only ever reads its own chunk: no barrier needed after filling the cache.
    float* pc = reinterpret_cast<float*>(sampler_smem + words);
    if (a.cache)
        for (unsigned i = lo; i < hi; ++i) pc[(i - lo) * SAMPLER_THREADS + tid] = SAMPLER_P_NEW(i);
#define SAMPLER_P(i) (a.cache ? pc[((i) - lo) * SAMPLER_THREADS + tid] : SAMPLER_P_NEW(i))
    float theta = 0.0f;
    if (a.min_p > 0.0f) theta = fmaxf(theta, __fmul_rn(a.min_p, __fdiv_rn(1.0f, total)));
    if (a.top_k > 0 && a.top_k < V) {
        unsigned blo = 0, bhi = 0x3f800001u;
        while (bhi - blo > 1) {
            const unsigned mid = blo + (bhi - blo) / 2;
            const float th = __int_as_float(mid);
            unsigned c = 0;
            for (unsigned i = lo; i < hi; ++i) c += SAMPLER_P(i) >= th;
            if (count_all(c, shi) >= a.top_k) blo = mid; else bhi = mid;
        }
        theta = fmaxf(theta, __int_as_float(blo));
    }
    if (a.top_p < 1.0f) {
        float s0 = 0.0f;
        for (unsigned i = lo; i < hi; ++i) s0 = __fadd_rn(s0, SAMPLER_P(i));
        if (sum2(s0, sh) >= a.top_p) {
            unsigned blo = 0, bhi = 0x3f800001u;
            while (bhi - blo > 1) {
                const unsigned mid = blo + (bhi - blo) / 2;
                const float th = __int_as_float(mid);
                float ms = 0.0f;
                for (unsigned i = lo; i < hi; ++i) {
                    const float p = SAMPLER_P(i);
                    if (p >= th) ms = __fadd_rn(ms, p);
                }
                if (sum2(ms, sh) >= a.top_p) blo = mid; else bhi = mid;
            }
            theta = fmaxf(theta, __int_as_float(blo));
        }
    }
    // Kept mass per chunk and the exclusive scan: within groups of 32, then over the groups.
    float mass = 0.0f;
    for (unsigned i = lo; i < hi; ++i) {
        const float p = SAMPLER_P(i);
        if (p >= theta) mass = __fadd_rn(mass, p);
    }
    sh[tid] = mass;
    __syncthreads();
    if (tid < 32) {
        float local = 0.0f;
        for (int i = 0; i < 32; ++i) local = __fadd_rn(local, sh[tid * 32 + i]);
        sh[SAMPLER_THREADS + tid] = local;
    }
    __syncthreads();
    float offset = 0.0f, M = 0.0f;
    const unsigned g = tid >> 5;
    for (unsigned i = 0; i < 32; ++i) {
        if (i == g) offset = M;
        M = __fadd_rn(M, sh[SAMPLER_THREADS + i]);
    }
    float local = 0.0f;
    for (unsigned i = g * 32; i < tid; ++i) local = __fadd_rn(local, sh[i]);
    const float excl = __fadd_rn(local, offset);
    unsigned c[4] = {(unsigned)(*step_ptr), (unsigned)((unsigned long long)*step_ptr >> 32), row_i, 0u};
    philox4x32_10(c, (unsigned)a.seed, (unsigned)(a.seed >> 32));
    const float target = __fmul_rn((float)(c[0] >> 8) * (1.0f / 16777216.0f), M);
    // The chosen chunk: the last non-empty one starting at or before the target.
    unsigned cand = mass > 0.0f && excl <= target ? tid : 0u;
    for (int o = 16; o > 0; o >>= 1) cand = max(cand, __shfl_xor_sync(0xffffffffu, cand, o));
    __syncthreads();
    if ((tid & 31) == 0) shi[tid >> 5] = cand;
    __syncthreads();
    unsigned chosen = 0;
    for (int i = 0; i < 32; ++i) chosen = max(chosen, shi[i]);
    if (tid == chosen) {
        float acc = excl;
        int last = -1;
        for (unsigned i = lo; i < hi; ++i) {
            const float p = SAMPLER_P(i);
            if (p >= theta) {
                acc = __fadd_rn(acc, p);
                last = (int)i;
                if (target < acc) break;
            }
        }
        out[row_i] = last < 0 ? 0 : last;
    }
#undef SAMPLER_P
#undef SAMPLER_P_NEW
}

#define SAMPLER_KERNELS(T, NAME)                                                                   \
extern "C" __global__ void __launch_bounds__(SAMPLER_THREADS) sample_##NAME(                       \
        const T* logits, const int* recent, const long long* step, SamplerArgs a, int* out) {      \
    pdl_enter();                                                                                   \
    sample_row<T>(logits, recent, step, a, out);                                                   \
}

SAMPLER_KERNELS(float, f32)
SAMPLER_KERNELS(f16, f16)
SAMPLER_KERNELS(bf16, bf16)

// Greedy sampling from the LM head GEMV's per-block first maxima (gemv_norm_*_argmax): one block
// merges `n` partials into out[0]. Equal to sample_* with temperature 0 and no penalty on the
// logits that GEMV wrote.
extern "C" __global__ void __launch_bounds__(SAMPLER_THREADS) sample_argmax_parts(
        const ArgmaxPart* __restrict__ parts, unsigned int n, int* __restrict__ out) {
    __shared__ float shv[32];
    __shared__ unsigned shi[32];
    pdl_enter();
    float best = -GPUKIT_INF;
    unsigned at = GPUKIT_NO_INDEX;
    for (unsigned i = threadIdx.x; i < n; i += blockDim.x) argmax_merge(best, at, parts[i].value, parts[i].index);
    block_argmax_out(best, at, shv, shi, out);
}

// Moves a captured decode step's device state on by one token after sample_* drew token[rows]:
// position (i32) and step (i64) grow by one; each row's window of recent ids (i32 [rows, window],
// oldest first) shifts left and the drawn id enters at the end. One thread: a few dozen words.
extern "C" __global__ void decode_advance(int* position, long long* step, int* recent,
                                          unsigned int window, const int* token, unsigned int rows) {
    pdl_enter();
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    *position += 1;
    *step += 1;
    for (unsigned int r = 0; r < rows && window > 0; ++r) {
        int* w = recent + (unsigned long long)r * window;
        for (unsigned int i = 0; i + 1 < window; ++i) w[i] = w[i + 1];
        w[window - 1] = token[r];
    }
}
