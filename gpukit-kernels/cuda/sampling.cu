// Token sampling on the device: one 1024-thread block per row of logits [rows, vocab], writing
// the chosen id to out[row]. Every f32 operation happens in the order of the CPU reference
// (gpukit-ops/src/sampling.rs, which documents the algorithm), so both pick the same id:
// thread t owns ids t, t + 1024, t + 2048, … (so a warp's loads coalesce); sums run
// sequentially over a thread's ids, then over 32 groups of 32 threads, then over the groups.
// (A greedy pick has no sums: any split of the ids gives the same first maximum, so it reads the
// row as 16-byte vectors, `greedy_scan`.)
// The draw is Philox-4x32-10 (Salmon et al. 2011) at counter (step, row), key seed; the step is
// read from device memory so a captured decode step replays with the next one.
//
// Top-k / top-p thresholds are bisections over f32 bit patterns, each step a pass over the
// probabilities. To keep those passes short, the pass that computes the normaliser also builds a
// histogram of the unnormalised exponentials e = exp(z − max) by their top 12 bits (8 bins per
// octave); it bounds from below every threshold the filters can reach, and the ids whose e lies
// at or above one bin under that bound (all that can survive) are compacted, in id order and
// thread by thread, into a candidate list in shared memory. The bisections and the draw then run
// over each thread's segment of that list: a segment holds every probability of the thread's ids
// at or above the list's floor, and every threshold searched starts there, so each sum and count
// equals the reference's bit for bit. When the candidates do not fit, or the thresholds land
// under the floor, the searches run over the whole vocabulary instead (same result, slower).
#include "common.cuh"

#define SAMPLER_THREADS 1024
#define SAMPLER_BINS 1024
static_assert(SAMPLER_BINS == SAMPLER_THREADS, "the block zeroes one histogram bin per thread");

struct SamplerArgs {
    float temperature;   // 0: greedy
    float top_p;         // 1: off
    float min_p;         // 0: off
    float penalty;       // 1: off
    unsigned int top_k;  // 0: off
    unsigned int vocab;
    unsigned int window; // recent ids per row (negative entries are empty)
    unsigned int list;   // candidate-list capacity in dynamic shared memory (0: none)
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

// Shared scratch of the block's sums: the threads' partials at SH_AT(t) (one pad word per 32, so
// warp 0 summing a group per lane reads 32 banks), the 32 group sums at SH_GROUPS + g.
#define SH_AT(t) ((t) + ((t) >> 5))
#define SH_GROUPS (SAMPLER_THREADS + 32)
#define SH_WORDS (SAMPLER_THREADS + 64)

// The sums of the 32 groups of 32 partials in sh, in order, into sh[SH_GROUPS + g] (warp 0).
__device__ __forceinline__ void group_sums(float* sh) {
    if (threadIdx.x < 32) {
        float g = 0.0f;
        for (int i = 0; i < 32; ++i) g = __fadd_rn(g, sh[SH_AT(threadIdx.x * 32 + i)]);
        sh[SH_GROUPS + threadIdx.x] = g;
    }
}

// The reference's two-level sum of the threads' partials (result in every thread).
__device__ __forceinline__ float sum2(float v, float* sh) {
    sh[SH_AT(threadIdx.x)] = v;
    __syncthreads();
    group_sums(sh);
    __syncthreads();
    float total = 0.0f;
    for (int i = 0; i < 32; ++i) total = __fadd_rn(total, sh[SH_GROUPS + i]);
    __syncthreads();
    return total;
}

__device__ __forceinline__ unsigned count_all(unsigned v, unsigned* sh) {
    v = warp_reduce<false>(v);
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
    __syncthreads();
    unsigned total = 0;
    for (int i = 0; i < 32; ++i) total += sh[i];
    __syncthreads();
    return total;
}

// Logit x of id i after the repetition penalty (ids set in the bitmap `pen`).
__device__ __forceinline__ float penalised(float x, const unsigned* pen, unsigned i, float penalty) {
    if (penalty != 1.0f && (pen[i >> 5] >> (i & 31)) & 1u) x = x > 0.0f ? __fdiv_rn(x, penalty) : __fmul_rn(x, penalty);
    return x;
}

template <typename T>
__device__ __forceinline__ float logit(const T* row, const unsigned* pen, unsigned i, float penalty) {
    return penalised(to_f32(row[i]), pen, i, penalty);
}

// The thread's first maximum of the row's penalised logits for a greedy pick. Which ids a thread
// takes does not change the block's answer (argmax_merge's order is total), so a 16-byte aligned
// row is read as 16-byte vectors, GREEDY_BATCH of them in flight per thread (one block reads the
// whole row); the ids past the last whole vector, or every id of an unaligned row, go one by one.
#define GREEDY_BATCH 4
template <typename T>
__device__ __forceinline__ void greedy_scan(const T* row, const unsigned* pen, float penalty, unsigned V,
                                            float& best, unsigned& bid) {
    constexpr unsigned P = Vec16<T>::N;
    const unsigned tid = threadIdx.x;
    unsigned rest = 0;
    if (aligned16(row)) {
        const unsigned nv = V / P;
        const uint4* rv = reinterpret_cast<const uint4*>(row);
        batched_scan<GREEDY_BATCH>(tid, SAMPLER_THREADS, nv, [&](unsigned j) { return __ldg(rv + j); },
                                   [&](const uint4& w, unsigned j) {
                                       const T* e = reinterpret_cast<const T*>(&w);
#pragma unroll
                                       for (unsigned p = 0; p < P; ++p)
                                           argmax_merge(best, bid, penalised(to_f32(e[p]), pen, j * P + p, penalty),
                                                        j * P + p);
                                   });
        rest = nv * P;
    }
    argmax_scan<8>(best, bid, rest + tid, SAMPLER_THREADS, V, [&](unsigned i) { return logit(row, pen, i, penalty); });
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

// Block-wide exclusive prefix sum of one count per thread (in thread order). `sh`: 32 entries.
__device__ __forceinline__ unsigned exclusive_scan(unsigned v, unsigned* sh) {
    unsigned inc = v;
    for (int o = 1; o < 32; o <<= 1) {
        const unsigned u = __shfl_up_sync(0xffffffffu, inc, o);
        if ((threadIdx.x & 31) >= (unsigned)o) inc += u;
    }
    if ((threadIdx.x & 31) == 31) sh[threadIdx.x >> 5] = inc;
    __syncthreads();
    unsigned off = inc - v;
    for (unsigned w = 0; w < (threadIdx.x >> 5); ++w) off += sh[w];
    __syncthreads();
    return off;
}

// A thread's probabilities, recomputed from the logits: ids lo, lo + 1024, … below hi.
template <typename T>
struct OwnedProbs {
    static constexpr unsigned step = SAMPLER_THREADS;
    const T* row;
    const unsigned* pen;
    float penalty, temperature, m, total;
    unsigned lo, hi;
    // The reference's unnormalised exp(z − max) and probability of id i.
    __device__ __forceinline__ float e(unsigned i) const {
        return exp_det(__fsub_rn(__fdiv_rn(logit(row, pen, i, penalty), temperature), m));
    }
    __device__ __forceinline__ float p(unsigned i) const { return __fdiv_rn(e(i), total); }
    __device__ __forceinline__ unsigned id(unsigned i) const { return i; }
};

// A thread's segment [lo, hi) of the candidate list (ids and probabilities, id order).
struct ListProbs {
    static constexpr unsigned step = 1;
    const unsigned* ids;
    const float* ps;
    unsigned lo, hi;
    __device__ __forceinline__ float p(unsigned j) const { return ps[j]; }
    __device__ __forceinline__ unsigned id(unsigned j) const { return ids[j]; }
};

// The top-k and top-p thresholds combined with `theta` (the min-p one): the largest bit pattern
// b with count(p ≥ b) ≥ top_k, and with mass(p ≥ b) ≥ top_p, each searched from `base` up when
// its predicate holds at `base` (it always does at 0, where top-p applies only if the whole
// mass reaches top_p, as in the reference).
template <class Src>
__device__ float search_thresholds(const Src& s, float theta, unsigned base, const SamplerArgs& a,
                                   bool topk, bool topp, float* sh, unsigned* shi) {
    const float fb = __uint_as_float(base);
    if (topk) {
        bool from_base = base == 0;
        if (!from_base) {
            unsigned c = 0;
            for (unsigned j = s.lo; j < s.hi; j += Src::step) c += s.p(j) >= fb;
            from_base = count_all(c, shi) >= a.top_k;
        }
        if (from_base) {
            unsigned blo = base, bhi = 0x3f800001u;
            while (bhi - blo > 1) {
                const unsigned mid = blo + (bhi - blo) / 2;
                const float th = __uint_as_float(mid);
                unsigned c = 0;
                for (unsigned j = s.lo; j < s.hi; j += Src::step) c += s.p(j) >= th;
                if (count_all(c, shi) >= a.top_k) blo = mid; else bhi = mid;
            }
            theta = fmaxf(theta, __uint_as_float(blo));
        }
    }
    if (topp) {
        float s0 = 0.0f;
        for (unsigned j = s.lo; j < s.hi; j += Src::step) {
            const float p = s.p(j);
            if (p >= fb) s0 = __fadd_rn(s0, p);
        }
        if (sum2(s0, sh) >= a.top_p) {
            unsigned blo = base, bhi = 0x3f800001u;
            while (bhi - blo > 1) {
                const unsigned mid = blo + (bhi - blo) / 2;
                const float th = __uint_as_float(mid);
                float ms = 0.0f;
                for (unsigned j = s.lo; j < s.hi; j += Src::step) {
                    const float p = s.p(j);
                    if (p >= th) ms = __fadd_rn(ms, p);
                }
                if (sum2(ms, sh) >= a.top_p) blo = mid; else bhi = mid;
            }
            theta = fmaxf(theta, __uint_as_float(blo));
        }
    }
    return theta;
}

// The draw among the probabilities at or above `theta`: kept mass per thread, the exclusive
// scan within groups of 32 then over the groups, one uniform scaled by the kept mass, then the
// cumulative walk through the chosen thread's probabilities.
template <class Src>
__device__ void draw(const Src& s, float theta, unsigned long long step, unsigned long long seed,
                     float* sh, unsigned* shi, int* out) {
    const unsigned tid = threadIdx.x;
    float mass = 0.0f;
    for (unsigned j = s.lo; j < s.hi; j += Src::step) {
        const float p = s.p(j);
        if (p >= theta) mass = __fadd_rn(mass, p);
    }
    sh[SH_AT(tid)] = mass;
    __syncthreads();
    group_sums(sh);
    __syncthreads();
    float offset = 0.0f, M = 0.0f;
    const unsigned g = tid >> 5;
    for (unsigned i = 0; i < 32; ++i) {
        if (i == g) offset = M;
        M = __fadd_rn(M, sh[SH_GROUPS + i]);
    }
    float local = 0.0f;
    for (unsigned i = g * 32; i < tid; ++i) local = __fadd_rn(local, sh[SH_AT(i)]);
    const float excl = __fadd_rn(local, offset);
    unsigned c[4] = {(unsigned)step, (unsigned)(step >> 32), blockIdx.x, 0u};
    philox4x32_10(c, (unsigned)seed, (unsigned)(seed >> 32));
    const float target = __fmul_rn((float)(c[0] >> 8) * (1.0f / 16777216.0f), M);
    // The chosen thread: the last one with kept mass starting at or before the target.
    unsigned cand = mass > 0.0f && excl <= target ? tid : 0u;
    cand = warp_reduce<true>(cand);
    __syncthreads();
    if ((tid & 31) == 0) shi[tid >> 5] = cand;
    __syncthreads();
    unsigned chosen = 0;
    for (int i = 0; i < 32; ++i) chosen = max(chosen, shi[i]);
    if (tid == chosen) {
        float acc = excl;
        int last = -1;
        for (unsigned j = s.lo; j < s.hi; j += Src::step) {
            const float p = s.p(j);
            if (p >= theta) {
                acc = __fadd_rn(acc, p);
                last = (int)s.id(j);
                if (target < acc) break;
            }
        }
        *out = last < 0 ? 0 : last;
    }
}

// Warp 0 reads the histogram of e's top 12 bits and returns (in every lane) the bin under which
// no filter threshold can fall: the highest bin whose ids and those above number at least top_k;
// the highest whose lower bounds of e, summed, reach top_p of the normaliser (with a 2^-10
// margin); min_p's own bin. 0 when none applies.
__device__ __forceinline__ unsigned threshold_bin(const unsigned* hist, const SamplerArgs& a,
                                                  bool topk, bool topp, float total) {
    const unsigned l = threadIdx.x & 31;
    unsigned cnt = 0;
    double mass = 0.0;
    for (unsigned b = 32 * l; b < 32 * l + 32; ++b) {
        cnt += hist[b];
        mass += (double)hist[b] * (double)__uint_as_float(b << 20);
    }
    for (int o = 1; o < 32; o <<= 1) {
        const unsigned c2 = __shfl_down_sync(0xffffffffu, cnt, o);
        const double m2 = __shfl_down_sync(0xffffffffu, mass, o);
        if (l + o < 32) { cnt += c2; mass += m2; }
    }
    // Counts and lower-bound masses of the bins above this lane's.
    unsigned c = __shfl_down_sync(0xffffffffu, cnt, 1);
    double ms = __shfl_down_sync(0xffffffffu, mass, 1);
    if (l == 31) { c = 0; ms = 0.0; }
    const double need = (double)a.top_p * (double)total * (1.0 + 1.0 / 1024.0);
    int bk = -1, bp = -1;
    for (int b = (int)(32 * l + 31); b >= (int)(32 * l); --b) {
        c += hist[b];
        ms += (double)hist[b] * (double)__uint_as_float((unsigned)b << 20);
        if (topk && bk < 0 && c >= a.top_k) bk = b;
        if (topp && bp < 0 && ms >= need) bp = b;
    }
    int bin = max(bk, bp);
    bin = warp_reduce<true>(bin);
    if (a.min_p > 0.0f) bin = max(bin, (int)min(__float_as_uint(a.min_p) >> 20, SAMPLER_BINS - 1u));
    return (unsigned)max(bin, 0);
}

template <typename T>
__device__ void sample_row(const T* __restrict__ logits, const int* __restrict__ recent,
                           const long long* __restrict__ step_ptr, const SamplerArgs& a,
                           int* __restrict__ out) {
    // Dynamic shared memory: the penalty bitmap [ceil(vocab / 32)]; with a list capacity, the
    // histogram [SAMPLER_BINS], then the candidate ids [list] and probabilities [list].
    extern __shared__ unsigned sampler_smem[];
    __shared__ float sh[SH_WORDS];
    __shared__ float shv[32];
    __shared__ unsigned shi[32];
    __shared__ unsigned plan[2];
    const unsigned row_i = blockIdx.x, tid = threadIdx.x, V = a.vocab;
    const T* row = logits + (unsigned long long)row_i * V;
    unsigned* pen = sampler_smem;
    const unsigned words = (V + 31) / 32;
    unsigned* hist = pen + words;
    unsigned* list_id = hist + SAMPLER_BINS;
    float* list_p = reinterpret_cast<float*>(list_id + a.list);
    const bool topk = a.top_k > 0 && a.top_k < V, topp = a.top_p < 1.0f;
    const bool bins = a.temperature > 0.0f && (topk || topp) && a.list > 0;
    for (unsigned w = tid; w < words; w += SAMPLER_THREADS) pen[w] = 0u;
    if (bins) hist[tid] = 0u;
    __syncthreads();
    if (a.penalty != 1.0f) {
        for (unsigned j = tid; j < a.window; j += SAMPLER_THREADS) {
            const int id = recent[(unsigned long long)row_i * a.window + j];
            if (id >= 0 && (unsigned)id < V) atomicOr(&pen[id >> 5], 1u << (id & 31));
        }
    }
    __syncthreads();
    if (a.temperature <= 0.0f) {
        // Greedy: first maximum (NaN above numbers, then value, then the lower id).
        float best = -GPUKIT_INF;
        unsigned bid = GPUKIT_NO_INDEX;
        greedy_scan(row, pen, a.penalty, V, best, bid);
        block_argmax_out(best, bid, shv, shi, out + row_i);
        return;
    }
    // Max of logits / temperature (order-free).
    float m = -GPUKIT_INF;
    for (unsigned i = tid; i < V; i += SAMPLER_THREADS)
        m = fmaxf(m, __fdiv_rn(logit(row, pen, i, a.penalty), a.temperature));
    m = warp_reduce<true>(m);
    if ((tid & 31) == 0) shv[tid >> 5] = m;
    __syncthreads();
    m = shv[0];
    for (int i = 1; i < 32; ++i) m = fmaxf(m, shv[i]);
    __syncthreads();
    OwnedProbs<T> cp{row, pen, a.penalty, a.temperature, m, 0.0f, tid, V};
    // Normaliser (and, for the searches, the histogram of e).
    float s = 0.0f;
    for (unsigned i = tid; i < V; i += SAMPLER_THREADS) {
        const float e = cp.e(i);
        s = __fadd_rn(s, e);
        if (bins) atomicAdd(&hist[min(__float_as_uint(e) >> 20, SAMPLER_BINS - 1u)], 1u);
    }
    const float total = sum2(s, sh);
    cp.total = total;
    float theta = 0.0f;
    if (a.min_p > 0.0f) theta = fmaxf(theta, __fmul_rn(a.min_p, __fdiv_rn(1.0f, total)));
    const unsigned long long step = (unsigned long long)*step_ptr;
    if (bins) {
        // The list holds the ids with e ≥ the bin under the threshold bin (a margin of at least
        // 1/16 in value, far beyond rounding); `floor` is the smallest probability it is sure
        // to hold all of: an id left out has e < 2^(bits of the list bin), so p ≤ q below.
        if (tid < 32) {
            const unsigned b = threshold_bin(hist, a, topk, topp, total);
            const unsigned lb = b > 0 ? b - 1 : 0;
            unsigned n = 0;
            for (unsigned k = 32 * tid; k < 32 * tid + 32; ++k) n += k >= lb ? hist[k] : 0u;
            n = warp_reduce<false>(n);
            if (tid == 0) { plan[0] = lb; plan[1] = n; }
        }
        __syncthreads();
        const unsigned lb = plan[0], n = plan[1];
        if (n <= a.list) {
            const unsigned crit = lb << 20;
            const unsigned floor_bits =
                lb == 0 ? 0u : __float_as_uint(__fdiv_rn(__uint_as_float(crit - 1), total)) + 1;
            unsigned cnt = 0;
            for (unsigned i = tid; i < V; i += SAMPLER_THREADS) cnt += __float_as_uint(cp.e(i)) >= crit;
            unsigned j = exclusive_scan(cnt, shi);
            const ListProbs lp{list_id, list_p, j, j + cnt};
            for (unsigned i = tid; i < V; i += SAMPLER_THREADS) {
                const float e = cp.e(i);
                if (__float_as_uint(e) >= crit) { list_id[j] = i; list_p[j] = __fdiv_rn(e, total); ++j; }
            }
            // Each thread reads only its own segment: no barrier needed.
            const float t = search_thresholds(lp, theta, floor_bits, a, topk, topp, sh, shi);
            if (__float_as_uint(t) >= floor_bits) {
                draw(lp, t, step, a.seed, sh, shi, out + row_i);
                return;
            }
        }
    }
    theta = search_thresholds(cp, theta, 0u, a, topk, topp, sh, shi);
    draw(cp, theta, step, a.seed, sh, shi, out + row_i);
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
