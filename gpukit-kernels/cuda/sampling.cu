// Token sampling on the device, writing one id per row of logits [rows, vocab] to out[row]. The
// CPU reference (gpukit-ops/src/sampling.rs) documents the algorithm; both pick the same id:
// every weight is a 40-bit fixed-point integer q = floor(e · 2^40) of e = exp(z − max z), so all
// sums are exact and no order of the work below changes a threshold or a draw.
//
// Every draw runs on a grid of (chunks, rows) blocks of SAMPLE_THREADS threads, each block one
// chunk of SAMPLE_CHUNK consecutive ids (4 per thread), sharing a per-row workspace. Greedy:
//   sample_greedy_<dt> each chunk's first maximum of the penalised logits;
//   sample_greedy_merge (one 1024-thread block per row) the row's first maximum of those.
// At a temperature above 0, up to six launches:
//   sample_scale_<dt>  z = penalised logit / temperature into the workspace, chunk maxima;
//                      zeroes the row's accumulators;
//   sample_exp         e = exp_det(z − max) over z, the total weight, and (for top-k / top-p)
//                      the histogram of counts and weights by e's top 12 bits;
//   sample_refine      (levels 2 and 3, only for top-k / top-p) the radix select's next round:
//                      each block reads the previous histogram, picks the bin holding each
//                      threshold, and histograms the next 10 bits of the ids in that bin;
//   sample_theta       (any filter) the exact thresholds, theta, and each chunk's kept weight;
//   sample_draw        the 24-bit uniform of Philox-4x32-10 (Salmon et al. 2011) at counter
//                      (step, row), key seed, scales the kept weight; the chunk holding the
//                      target finds the id by an exclusive scan of its threads' kept weights.
// Histograms are built in shared memory and added to the workspace with integer atomics
// (exact, so deterministic). The step is read from device memory so a captured decode step
// replays with the next one.
#include "common.cuh"

static_assert(SAMPLE_CHUNK == 4 * SAMPLE_THREADS, "a thread takes 4 consecutive ids of its chunk");

// SamplerArgs (in gpukit_shared.cuh): temperature (0: greedy), top_p (1: off), min_p (0: off),
// penalty (1: off), top_k (0: off, also when ≥ vocab), vocab, window (recent ids per row;
// negative entries are empty), chunks (blocks per row: ceil(vocab / SAMPLE_CHUNK)), seed,
// row_bytes (workspace bytes per row).

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

// Logit x of id i after the repetition penalty (ids set in the bitmap `pen`).
__device__ __forceinline__ float penalised(float x, const unsigned* pen, unsigned i, float penalty) {
    if (penalty != 1.0f && (pen[i >> 5] >> (i & 31)) & 1u) x = x > 0.0f ? __fdiv_rn(x, penalty) : __fmul_rn(x, penalty);
    return x;
}

// The block's first maximum of the threads' (best, at), in thread 0 (GPUKIT_NO_INDEX when there
// is none): warps by butterfly, then warp 0's results in warp order. `shv`, `shi`: 32 entries.
__device__ __forceinline__ void block_argmax(float& best, unsigned& at, float* shv, unsigned* shi) {
    warp_argmax(best, at);
    if ((threadIdx.x & 31) == 0) { shv[threadIdx.x >> 5] = best; shi[threadIdx.x >> 5] = at; }
    __syncthreads();
    if (threadIdx.x == 0)
        for (unsigned i = 1; i < (blockDim.x + 31) / 32; ++i) argmax_merge(best, at, shv[i], shi[i]);
}

// One block merges `n` first maxima into *out (0 when there is none).
__device__ __forceinline__ void merge_parts(const ArgmaxPart* __restrict__ parts, unsigned n, int* out) {
    __shared__ float shv[32];
    __shared__ unsigned shi[32];
    float best = -GPUKIT_INF;
    unsigned at = GPUKIT_NO_INDEX;
    for (unsigned i = threadIdx.x; i < n; i += blockDim.x) argmax_merge(best, at, parts[i].value, parts[i].index);
    block_argmax(best, at, shv, shi);
    if (threadIdx.x == 0) *out = (int)(at == GPUKIT_NO_INDEX ? 0 : at);
}

// One row's workspace (SamplerArgs::row_bytes bytes at row · row_bytes; the host's
// `gpukit_kernels::sampling::row_bytes` sizes it from the same constants). The accumulators from `total` to the
// end of `count` are zeroed by sample_scale.
struct SampleSel {
    unsigned prefix_k, above_k, prefix_p, pad;  // bit-pattern prefix chosen so far, count above
    unsigned long long above_p;                 // weight above the chosen prefix
    unsigned long long pad2;
};
struct SampleWs {
    unsigned long long* total;  // Σq of the row
    float* theta;               // the filters' threshold on e (0: none)
    SampleSel* sel;             // [2]: the radix select after rounds 1 and 2
    unsigned long long* mass;   // [3][SAMPLE_BINS]: weights per bin, rounds 1-3 (top-p)
    unsigned* count;            // [3][SAMPLE_BINS]: ids per bin, rounds 1-3 (top-k)
    unsigned long long* kept;   // [chunks]: each chunk's kept weight (greedy: its ArgmaxPart)
    float* maxz;                // [chunks]: each chunk's largest z
    float* e;                   // [chunks · SAMPLE_CHUNK]: z, then e (0 past the vocabulary)
};
static_assert(SAMPLE_HEAD_BYTES == 16 + 2 * sizeof(SampleSel), "total, theta, then sel[2]");
#define SAMPLE_ZEROED_WORDS ((SAMPLE_HEAD_BYTES + 3 * SAMPLE_BINS * 12) / 4)

__device__ __forceinline__ SampleWs sample_ws(unsigned char* base, const SamplerArgs& a) {
    unsigned char* const row = base + (unsigned long long)blockIdx.y * a.row_bytes;
    unsigned char* p = row;
    SampleWs w;
    w.total = reinterpret_cast<unsigned long long*>(p);
    w.theta = reinterpret_cast<float*>(p + 8);
    w.sel = reinterpret_cast<SampleSel*>(p + 16);
    p += SAMPLE_HEAD_BYTES;
    w.mass = reinterpret_cast<unsigned long long*>(p);
    p += 3 * SAMPLE_BINS * 8;
    w.count = reinterpret_cast<unsigned*>(p);
    p += 3 * SAMPLE_BINS * 4;
    w.kept = reinterpret_cast<unsigned long long*>(p);
    p += 8ull * a.chunks;
    w.maxz = reinterpret_cast<float*>(p);
    p += 4ull * a.chunks;
    w.e = reinterpret_cast<float*>(row + ((p - row + 15) & ~15ll));
    return w;
}

// The fixed-point weight of e ∈ [0, 1]: floor(e · 2^40) (exact).
__device__ __forceinline__ unsigned long long fixed_weight(float e) {
    return __float2ull_rz(__fmul_rn(e, 1099511627776.0f));
}

// Block-wide sum of one u64 per thread (exact; every thread gets it). `sh`: 8 entries.
__device__ __forceinline__ unsigned long long block_sum_u64(unsigned long long v, unsigned long long* sh) {
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
    __syncthreads();
    unsigned long long s = 0;
    for (unsigned w = 0; w < SAMPLE_THREADS / 32; ++w) s += sh[w];
    return s;
}

// Block-wide exclusive prefix sum of one u64 per thread, in thread order. `sh`: 8 entries.
__device__ __forceinline__ unsigned long long block_exclusive_u64(unsigned long long v, unsigned long long* sh) {
    const unsigned lane = threadIdx.x & 31;
    unsigned long long inc = v;
    for (int o = 1; o < 32; o <<= 1) {
        const unsigned long long u = __shfl_up_sync(0xffffffffu, inc, o);
        if (lane >= (unsigned)o) inc += u;
    }
    __syncthreads();
    if (lane == 31) sh[threadIdx.x >> 5] = inc;
    __syncthreads();
    unsigned long long off = inc - v;
    for (unsigned w = 0; w < (threadIdx.x >> 5); ++w) off += sh[w];
    return off;
}

// Inclusive suffix sums over the warp's lanes: lane l gets Σ_{l' ≥ l} v(l').
template <typename V> __device__ __forceinline__ V warp_suffix_sum(V v) {
    const unsigned lane = threadIdx.x & 31;
    for (int o = 1; o < 32; o <<= 1) {
        const V u = __shfl_down_sync(0xffffffffu, v, o);
        if (lane + o < 32) v += u;
    }
    return v;
}

// One warp (every lane returns the same): the highest bin b of h[SAMPLE_BINS] (shared memory)
// with ok(above + Σ_{b' ≥ b} h[b']), or 0 when none; *rest = above + Σ_{b' > b} h[b']. ok holds
// for every bin at or below the answer, so: lane l sums bins 32 l … 32 l + 31 (rotated reads,
// no bank conflicts), the highest lane where ok holds at its lowest bin owns the answer, and the
// warp then scans that lane's 32 bins the same way, one bin per lane.
template <typename V, typename Ok>
__device__ __forceinline__ unsigned select_bin(const V* h, V above, Ok ok, V* rest) {
    const unsigned lane = threadIdx.x & 31;
    V own = 0;
#pragma unroll
    for (unsigned k = 0; k < 32; ++k) own += h[32 * lane + ((k + lane) & 31)];
    const V suf = warp_suffix_sum(own);
    const unsigned hit = __ballot_sync(0xffffffffu, ok(above + suf));
    if (!hit) {
        *rest = above;
        return 0;
    }
    const unsigned l = 31 - __clz(hit);
    const V base = __shfl_sync(0xffffffffu, above + suf - own, l);
    const V v = h[32 * l + lane];
    const V at = base + warp_suffix_sum(v);
    const unsigned j = 31 - __clz(__ballot_sync(0xffffffffu, ok(at)));
    *rest = __shfl_sync(0xffffffffu, at - v, j);
    return 32 * l + j;
}

// The radix select's round `level` (1-3) for top-k and top-p, from that round's histograms (the
// block's copies in shared memory: `stage_round`) and the selection before it (`prev`; zero for
// round 1), by warp 0: the prefix grows by the chosen bin (12 bits in round 1, then 10).
__device__ __forceinline__ SampleSel select_round(const SampleWs& w, const SamplerArgs& a, unsigned level,
                                                  const SampleSel& prev, const unsigned* hc,
                                                  const unsigned long long* hm) {
    SampleSel s = prev;
    const unsigned shift = level == 1 ? 0 : 10;
    if (a.top_k > 0) {
        unsigned rest;
        const unsigned b = select_bin<unsigned>(hc, prev.above_k, [&](unsigned c) { return c >= a.top_k; }, &rest);
        s.prefix_k = (prev.prefix_k << shift) | b;
        s.above_k = rest;
    }
    if (a.top_p < 1.0f) {
        const double need = (double)a.top_p * (double)*w.total;
        unsigned long long rest;
        const unsigned b = select_bin<unsigned long long>(
            hm, prev.above_p, [&](unsigned long long m) { return (double)m >= need; }, &rest);
        s.prefix_p = (prev.prefix_p << shift) | b;
        s.above_p = rest;
    }
    return s;
}

// The block copies round `level`'s histograms from the workspace into shared memory (`hc`
// counts for top-k, `hm` weights for top-p), so warp 0's scans read shared memory (scanning the
// workspace's copies, each step a dependent global load, cost ~10 µs a round).
__device__ __forceinline__ void stage_round(const SampleWs& w, const SamplerArgs& a, unsigned level, unsigned* hc,
                                            unsigned long long* hm) {
    for (unsigned b = threadIdx.x; b < SAMPLE_BINS; b += SAMPLE_THREADS) {
        if (a.top_k > 0) hc[b] = w.count[(level - 1) * SAMPLE_BINS + b];
        if (a.top_p < 1.0f) hm[b] = w.mass[(level - 1) * SAMPLE_BINS + b];
    }
    __syncthreads();
}

// The penalty bitmap of the block's chunk (ids lo … lo + SAMPLE_CHUNK − 1) from the row's window.
__device__ __forceinline__ void chunk_penalty(unsigned* pen, const int* __restrict__ recent, const SamplerArgs& a,
                                              unsigned lo) {
    if (threadIdx.x < SAMPLE_CHUNK / 32) pen[threadIdx.x] = 0u;
    __syncthreads();
    if (a.penalty != 1.0f) {
        for (unsigned j = threadIdx.x; j < a.window; j += SAMPLE_THREADS) {
            const int id = recent[(unsigned long long)blockIdx.y * a.window + j];
            if (id >= 0 && (unsigned)id < a.vocab && (unsigned)id - lo < SAMPLE_CHUNK)
                atomicOr(&pen[((unsigned)id - lo) >> 5], 1u << (((unsigned)id - lo) & 31));
        }
    }
    __syncthreads();
}

// A greedy draw's first stage: the chunk's first maximum of the penalised logits (NaN above
// numbers, then value, then the lower id) into its slot of the workspace (`kept`, as an
// ArgmaxPart); sample_greedy_merge takes the row's first maximum of those.
template <typename T>
__device__ void sample_greedy_chunk(const T* __restrict__ logits, const int* __restrict__ recent,
                                    const SamplerArgs& a, unsigned char* ws) {
    __shared__ unsigned pen[SAMPLE_CHUNK / 32];
    __shared__ float shv[32];
    __shared__ unsigned shi[32];
    const SampleWs w = sample_ws(ws, a);
    const unsigned lo = blockIdx.x * SAMPLE_CHUNK;
    chunk_penalty(pen, recent, a, lo);
    const T* x = logits + (unsigned long long)blockIdx.y * a.vocab;
    float best = -GPUKIT_INF;
    unsigned at = GPUKIT_NO_INDEX;
#pragma unroll
    for (unsigned j = 0; j < 4; ++j) {
        const unsigned i = lo + 4 * threadIdx.x + j;
        if (i < a.vocab) argmax_merge(best, at, penalised(to_f32(x[i]), pen, i - lo, a.penalty), i);
    }
    block_argmax(best, at, shv, shi);
    if (threadIdx.x == 0) reinterpret_cast<ArgmaxPart*>(w.kept)[blockIdx.x] = ArgmaxPart{best, at};
}

// z of the chunk's ids (−∞ past the vocabulary) into the workspace, the chunk's largest z into
// maxz; the blocks of a row also zero its accumulators.
template <typename T>
__device__ void sample_scale_chunk(const T* __restrict__ logits, const int* __restrict__ recent,
                                   const SamplerArgs& a, unsigned char* ws) {
    __shared__ unsigned pen[SAMPLE_CHUNK / 32];
    __shared__ float scratch[32];
    const SampleWs w = sample_ws(ws, a);
    const unsigned tid = threadIdx.x, row = blockIdx.y, lo = blockIdx.x * SAMPLE_CHUNK, V = a.vocab;
    unsigned* zero = reinterpret_cast<unsigned*>(w.total);
    for (unsigned i = blockIdx.x * SAMPLE_THREADS + tid; i < SAMPLE_ZEROED_WORDS; i += a.chunks * SAMPLE_THREADS)
        zero[i] = 0u;
    chunk_penalty(pen, recent, a, lo);
    const T* x = logits + (unsigned long long)row * V;
    float z[4], m = -GPUKIT_INF;
#pragma unroll
    for (unsigned j = 0; j < 4; ++j) {
        const unsigned i = lo + 4 * tid + j;
        z[j] = -GPUKIT_INF;
        if (i < V) {
            z[j] = __fdiv_rn(penalised(to_f32(x[i]), pen, i - lo, a.penalty), a.temperature);
            m = fmaxf(m, z[j]);
        }
    }
    reinterpret_cast<float4*>(w.e + lo)[tid] = make_float4(z[0], z[1], z[2], z[3]);
    m = block_max(m, scratch);
    if (tid == 0) w.maxz[blockIdx.x] = m;
}

// Adds the block's shared histograms (counts `hc`, weights `hm`) into the workspace's.
__device__ __forceinline__ void flush_histograms(const unsigned* hc, const unsigned long long* hm,
                                                 unsigned* count, unsigned long long* mass) {
    __syncthreads();
    for (unsigned b = threadIdx.x; b < SAMPLE_BINS; b += SAMPLE_THREADS) {
        if (count && hc[b]) atomicAdd(count + b, hc[b]);
        if (mass && hm[b]) atomicAdd(mass + b, hm[b]);
    }
}

__device__ __forceinline__ void zero_histograms(unsigned* hc, unsigned long long* hm) {
    for (unsigned b = threadIdx.x; b < SAMPLE_BINS; b += SAMPLE_THREADS) {
        hc[b] = 0u;
        hm[b] = 0ull;
    }
    __syncthreads();
}

extern "C" __global__ void __launch_bounds__(SAMPLE_THREADS) sample_exp(SamplerArgs a, unsigned char* ws) {
    __shared__ unsigned hc[SAMPLE_BINS];
    __shared__ unsigned long long hm[SAMPLE_BINS];
    __shared__ unsigned long long sh[SAMPLE_THREADS / 32];
    __shared__ float scratch[32];
    pdl_enter();
    const SampleWs w = sample_ws(ws, a);
    const unsigned tid = threadIdx.x, lo = blockIdx.x * SAMPLE_CHUNK;
    const bool search = a.top_k > 0 || a.top_p < 1.0f, filters = search || a.min_p > 0.0f;
    // The row's largest z (order-free).
    float m = -GPUKIT_INF;
    for (unsigned c = tid; c < a.chunks; c += SAMPLE_THREADS) m = fmaxf(m, w.maxz[c]);
    m = block_max(m, scratch);
    if (search) zero_histograms(hc, hm);
    float4 v = reinterpret_cast<const float4*>(w.e + lo)[tid];
    float* e = reinterpret_cast<float*>(&v);
    unsigned long long s = 0;
#pragma unroll
    for (unsigned j = 0; j < 4; ++j) {
        e[j] = exp_det(__fsub_rn(e[j], m));
        const unsigned long long q = fixed_weight(e[j]);
        s += q;
        if (search && lo + 4 * tid + j < a.vocab) {
            const unsigned b = __float_as_uint(e[j]) >> 20;
            atomicAdd(&hc[b], 1u);
            atomicAdd(&hm[b], q);
        }
    }
    reinterpret_cast<float4*>(w.e + lo)[tid] = v;
    s = block_sum_u64(s, sh);
    if (tid == 0) {
        atomicAdd(w.total, s);
        if (!filters) w.kept[blockIdx.x] = s;
    }
    if (search) flush_histograms(hc, hm, w.count, w.mass);
}

// Round `level` (2 or 3) of the radix select: the ids whose e lies in the bin chosen for a
// threshold in the previous round, histogrammed by their next 10 bits.
extern "C" __global__ void __launch_bounds__(SAMPLE_THREADS) sample_refine(SamplerArgs a, unsigned char* ws,
                                                                          unsigned int level) {
    __shared__ unsigned hc[SAMPLE_BINS];
    __shared__ unsigned long long hm[SAMPLE_BINS];
    __shared__ SampleSel sel;
    pdl_enter();
    const SampleWs w = sample_ws(ws, a);
    const unsigned tid = threadIdx.x, lo = blockIdx.x * SAMPLE_CHUNK;
    stage_round(w, a, level - 1, hc, hm);
    if (tid < 32) {
        const SampleSel prev = level == 2 ? SampleSel{} : w.sel[0];
        const SampleSel s = select_round(w, a, level - 1, prev, hc, hm);
        if (tid == 0) {
            sel = s;
            if (blockIdx.x == 0) w.sel[level - 2] = s;
        }
    }
    __syncthreads();
    zero_histograms(hc, hm);
    const unsigned shift = level == 2 ? 20 : 10, sub = level == 2 ? 10 : 0;
    const float4 v = reinterpret_cast<const float4*>(w.e + lo)[tid];
    const float* e = reinterpret_cast<const float*>(&v);
#pragma unroll
    for (unsigned j = 0; j < 4; ++j) {
        if (lo + 4 * tid + j >= a.vocab) continue;
        const unsigned bits = __float_as_uint(e[j]), b = (bits >> sub) & (SAMPLE_BINS - 1);
        if (a.top_k > 0 && bits >> shift == sel.prefix_k) atomicAdd(&hc[b], 1u);
        if (a.top_p < 1.0f && bits >> shift == sel.prefix_p) atomicAdd(&hm[b], fixed_weight(e[j]));
    }
    flush_histograms(hc, hm, a.top_k > 0 ? w.count + (level - 1) * SAMPLE_BINS : nullptr,
                     a.top_p < 1.0f ? w.mass + (level - 1) * SAMPLE_BINS : nullptr);
}

// The filters' threshold theta on e (the exact top-k and top-p ones from round 3, min-p) and each
// chunk's weight at or above it.
extern "C" __global__ void __launch_bounds__(SAMPLE_THREADS) sample_theta(SamplerArgs a, unsigned char* ws) {
    __shared__ unsigned hc[SAMPLE_BINS];
    __shared__ unsigned long long hm[SAMPLE_BINS];
    __shared__ unsigned long long sh[SAMPLE_THREADS / 32];
    __shared__ float theta_sh;
    pdl_enter();
    const SampleWs w = sample_ws(ws, a);
    const unsigned tid = threadIdx.x, lo = blockIdx.x * SAMPLE_CHUNK;
    const bool search = a.top_k > 0 || a.top_p < 1.0f;
    if (search) stage_round(w, a, 3, hc, hm);
    if (tid < 32) {
        float theta = a.min_p;
        if (search) {
            const SampleSel s = select_round(w, a, 3, w.sel[1], hc, hm);
            if (a.top_k > 0) theta = fmaxf(theta, __uint_as_float(s.prefix_k));
            if (a.top_p < 1.0f) theta = fmaxf(theta, __uint_as_float(s.prefix_p));
        }
        if (tid == 0) {
            theta_sh = theta;
            if (blockIdx.x == 0) *w.theta = theta;
        }
    }
    __syncthreads();
    const float theta = theta_sh;
    const float4 v = reinterpret_cast<const float4*>(w.e + lo)[tid];
    const float* e = reinterpret_cast<const float*>(&v);
    unsigned long long s = 0;
#pragma unroll
    for (unsigned j = 0; j < 4; ++j) s += e[j] >= theta ? fixed_weight(e[j]) : 0ull;
    s = block_sum_u64(s, sh);
    if (tid == 0) w.kept[blockIdx.x] = s;
}

// The draw: target = floor(u24 · K / 2^24) of the kept weight K; the chunk whose kept weight
// covers it finds the id. Id 0 when nothing has weight.
extern "C" __global__ void __launch_bounds__(SAMPLE_THREADS) sample_draw(const long long* __restrict__ step_ptr,
                                                                        SamplerArgs a, unsigned char* ws,
                                                                        int* __restrict__ out) {
    __shared__ unsigned long long sh[SAMPLE_THREADS / 32];
    pdl_enter();
    const SampleWs w = sample_ws(ws, a);
    const unsigned tid = threadIdx.x, c = blockIdx.x, row = blockIdx.y, lo = c * SAMPLE_CHUNK;
    unsigned long long before = 0, all = 0;
    for (unsigned b = tid; b < a.chunks; b += SAMPLE_THREADS) {
        const unsigned long long k = w.kept[b];
        all += k;
        if (b < c) before += k;
    }
    all = block_sum_u64(all, sh);
    before = block_sum_u64(before, sh);
    if (all == 0) {
        if (c == 0 && tid == 0) out[row] = 0;
        return;
    }
    const unsigned long long step = (unsigned long long)*step_ptr;
    unsigned r[4] = {(unsigned)step, (unsigned)(step >> 32), row, 0u};
    philox4x32_10(r, (unsigned)a.seed, (unsigned)(a.seed >> 32));
    const unsigned long long target = __umul64hi((unsigned long long)(r[0] >> 8) << 40, all);
    const unsigned long long mine = w.kept[c];
    if (target < before || target - before >= mine) return;
    const unsigned long long rel = target - before;
    const float theta = *w.theta;
    const float4 v = reinterpret_cast<const float4*>(w.e + lo)[tid];
    const float* e = reinterpret_cast<const float*>(&v);
    unsigned long long q[4], own = 0;
#pragma unroll
    for (unsigned j = 0; j < 4; ++j) {
        q[j] = e[j] >= theta ? fixed_weight(e[j]) : 0ull;
        own += q[j];
    }
    unsigned long long acc = block_exclusive_u64(own, sh);
    if (acc <= rel && rel - acc < own) {
        for (unsigned j = 0; j < 4; ++j) {
            acc += q[j];
            if (acc > rel) {
                out[row] = (int)(lo + 4 * tid + j);
                break;
            }
        }
    }
}

#define SAMPLER_KERNELS(T, NAME)                                                                   \
extern "C" __global__ void __launch_bounds__(SAMPLE_THREADS) sample_greedy_##NAME(                  \
        const T* logits, const int* recent, SamplerArgs a, unsigned char* ws) {                    \
    pdl_enter();                                                                                   \
    sample_greedy_chunk<T>(logits, recent, a, ws);                                                 \
}                                                                                                  \
extern "C" __global__ void __launch_bounds__(SAMPLE_THREADS) sample_scale_##NAME(                  \
        const T* logits, const int* recent, SamplerArgs a, unsigned char* ws) {                    \
    pdl_enter();                                                                                   \
    sample_scale_chunk<T>(logits, recent, a, ws);                                                  \
}

SAMPLER_KERNELS(float, f32)
SAMPLER_KERNELS(f16, f16)
SAMPLER_KERNELS(bf16, bf16)

// Greedy sampling from the LM head GEMV's per-block first maxima (gemv_norm_*_argmax): one block
// merges `n` partials into out[0]. Equal to a greedy sample_* with no penalty on the logits that
// GEMV wrote.
extern "C" __global__ void __launch_bounds__(ARGMAX_PARTS_THREADS) sample_argmax_parts(
        const ArgmaxPart* __restrict__ parts, unsigned int n, int* __restrict__ out) {
    pdl_enter();
    merge_parts(parts, n, out);
}

// A greedy draw's second stage: grid (1, rows), the row's first maximum of its chunks' into
// out[row].
extern "C" __global__ void __launch_bounds__(ARGMAX_PARTS_THREADS) sample_greedy_merge(SamplerArgs a, unsigned char* ws,
                                                                                 int* __restrict__ out) {
    pdl_enter();
    const SampleWs w = sample_ws(ws, a);
    merge_parts(reinterpret_cast<const ArgmaxPart*>(w.kept), a.chunks, out + blockIdx.y);
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
