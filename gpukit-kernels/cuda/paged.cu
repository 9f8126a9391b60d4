// The paged KV cache (Kwon et al. 2023, "Efficient Memory Management for Large Language Model
// Serving with PagedAttention"): each layer's keys and values live in one tensor of fixed-size
// blocks, [num_blocks · block_size, kv_heads, head_dim] (a slot per token position), and a
// sequence reaches its positions through its block table (block ids in position order).
//
// Both kernels work on a flat batch of tokens from many sequences — decode tokens and chunks of
// prompts mixed — and compute each token from its own inputs only, in an order fixed by the
// token's position: a token's result is bit for bit the same whatever else is in the batch
// (batch invariance).
#include "common.cuh"
#include "attention.cuh"

// Keys and values of `tokens` new tokens ([tokens, kv_heads, head_dim] each) into their slots.
// A negative slot is padding (nothing written); a slot at or past num_slots writes nothing and
// sets bit 0 of *err.
template <typename T>
__device__ __forceinline__ void paged_kv_write_impl(T* __restrict__ k_cache, T* __restrict__ v_cache,
                                                    const T* __restrict__ k, const T* __restrict__ v,
                                                    const int* __restrict__ slots, unsigned int tokens,
                                                    unsigned int row, unsigned long long num_slots,
                                                    unsigned int* __restrict__ err) {
    pdl_enter();
    const unsigned long long total = (unsigned long long)tokens * row;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < total;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        const unsigned long long t = i / row, c = i % row;
        const int slot = slots[t];
        if (slot < 0) continue;
        if ((unsigned long long)slot >= num_slots) {
            atomicOr(err, 1u);
            continue;
        }
        k_cache[(unsigned long long)slot * row + c] = k[i];
        v_cache[(unsigned long long)slot * row + c] = v[i];
    }
}

// Attention of each token's query heads over its sequence's keys and values up to its own
// position (causal; with window > 0 only the last `window` positions), read through the block
// table: out[t, h] = softmax(scale · q[t, h] · K[lo..=pos]ᵀ) · V[lo..=pos].
//
// The keys of a token, from the window's start lo, are cut into partitions of PAGED_PART_KEYS
// positions; a block computes one partition for PAGED_GROUP query heads that share a KV head
// (each key and value row is read once for all of them). Its PAGED_WARPS warps take the
// partition's tiles of 32 keys in turn (warp w: tiles w, w + PAGED_WARPS, …); in a tile, lane j
// scores key j (its whole row, 16-byte loads), and the running output (lane l owning dims l,
// l + 32, …) takes the tile's values key by key with the online softmax of Milakov &
// Gimelshein 2018. The warps' states merge in warp order. A token with one partition writes
// its output at once; with more, each partition's state (max, sum, unnormalised output) goes to
// the workspace and paged_merge combines them in partition order.
//
// Every boundary — partition, tile, warp — is a fixed function of the token's position, so a
// token's result is bit for bit the same whatever else is in the batch (batch invariance). A
// sequence row outside the block tables, a position past them or a block id outside
// [0, num_blocks) sets bit 0 of *err and the token's output is zero.

// What the partition kernel and the merge share: a token's key range and partition count.
struct PagedKeys {
    int lo, pos;
    unsigned int parts;
    bool bad;
};

__device__ __forceinline__ PagedKeys paged_keys(const int* __restrict__ token_seq,
                                                const int* __restrict__ token_pos, unsigned int t,
                                                unsigned int seqs, unsigned int max_blocks,
                                                unsigned int block_size, unsigned int window) {
    PagedKeys k;
    k.pos = token_pos[t];
    const int seq = token_seq[t];
    k.bad = seq < 0 || (unsigned int)seq >= seqs || k.pos < 0 ||
            (unsigned int)k.pos / block_size >= max_blocks;
    k.lo = (window > 0 && k.pos + 1 > (int)window) ? k.pos + 1 - (int)window : 0;
    k.parts = k.bad ? 1 : (unsigned int)(k.pos - k.lo) / PAGED_PART_KEYS + 1;
    return k;
}

template <typename T>
__device__ __forceinline__ void paged_attention_impl(
    T* __restrict__ out, float* __restrict__ partial, const T* __restrict__ q,
    const T* __restrict__ k_cache, const T* __restrict__ v_cache, const int* __restrict__ block_tables,
    const int* __restrict__ token_seq, const int* __restrict__ token_pos, unsigned int heads,
    unsigned int kv_heads, unsigned int head_dim, unsigned int block_size, unsigned int seqs,
    unsigned int max_blocks, unsigned int num_blocks, float scale, unsigned int window,
    unsigned int max_parts, unsigned int* __restrict__ err) {
    constexpr int PER = PAGED_MAX_HEAD_DIM / 32, VEC = Vec16<T>::N;
    __shared__ float qs[PAGED_GROUP][PAGED_MAX_HEAD_DIM];
    __shared__ float red[PAGED_WARPS][PAGED_GROUP][PAGED_MAX_HEAD_DIM];
    __shared__ float red_ml[PAGED_WARPS][PAGED_GROUP][2];
    __shared__ int any_bad;
    const unsigned int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const unsigned int group = heads / kv_heads, chunks = (group + PAGED_GROUP - 1) / PAGED_GROUP;
    const unsigned int item = blockIdx.x, part = blockIdx.y;
    const unsigned int t = item / (kv_heads * chunks), kvh = item / chunks % kv_heads;
    const unsigned int g0 = item % chunks * PAGED_GROUP, ng = min((unsigned int)PAGED_GROUP, group - g0);
    const unsigned int h0 = kvh * group + g0;  // the block's first query head
    pdl_enter();
    const PagedKeys keys = paged_keys(token_seq, token_pos, t, seqs, max_blocks, block_size, window);
    if (part >= keys.parts) return;
    if (threadIdx.x == 0) any_bad = keys.bad;
    for (unsigned int i = threadIdx.x; i < PAGED_GROUP * PAGED_MAX_HEAD_DIM; i += blockDim.x) {
        const unsigned int g = i / PAGED_MAX_HEAD_DIM, d = i % PAGED_MAX_HEAD_DIM;
        qs[g][d] = g < ng && d < head_dim ? to_f32(q[((unsigned long long)t * heads + h0 + g) * head_dim + d])
                                          : 0.0f;
    }
    __syncthreads();
    const unsigned long long row = (unsigned long long)kv_heads * head_dim;
    const int* table = block_tables + (unsigned long long)(keys.bad ? 0 : token_seq[t]) * max_blocks;
    float m[PAGED_GROUP], l[PAGED_GROUP], acc[PAGED_GROUP][PER];
#pragma unroll
    for (int g = 0; g < PAGED_GROUP; ++g) {
        m[g] = -GPUKIT_INF;
        l[g] = 0.0f;
#pragma unroll
        for (int i = 0; i < PER; ++i) acc[g][i] = 0.0f;
    }
    const int first = keys.lo + (int)(part * PAGED_PART_KEYS);
    bool bad = keys.bad;
    for (int tile = (int)warp; !bad && tile < PAGED_PART_KEYS / 32; tile += PAGED_WARPS) {
        const int base = first + tile * 32;
        if (base > keys.pos) break;
        const int key = base + (int)lane;
        const bool valid = key <= keys.pos;
        unsigned long long slot = 0;  // keys past pos read slot 0 (in bounds) and are masked
        if (valid) {
            const int b = table[key / (int)block_size];
            if (b < 0 || (unsigned int)b >= num_blocks) bad = true;
            else slot = (unsigned long long)b * block_size + key % (int)block_size;
        }
        if (__any_sync(0xffffffffu, bad)) {
            bad = true;
            break;
        }
        // Lane j scores key j against each query head: its key row in 16-byte loads, the
        // dimensions in order.
        float s[PAGED_GROUP];
#pragma unroll
        for (int g = 0; g < PAGED_GROUP; ++g) s[g] = 0.0f;
        const T* kr = k_cache + slot * row + (unsigned long long)kvh * head_dim;
#pragma unroll 4
        for (unsigned int c = 0; c < head_dim; c += VEC) {
            float kf[VEC];
            unpack_f32(load16(kr + c), kf);
#pragma unroll
            for (int e = 0; e < VEC; ++e)
#pragma unroll
                for (int g = 0; g < PAGED_GROUP; ++g) s[g] = fmaf(qs[g][c + e], kf[e], s[g]);
        }
        float p[PAGED_GROUP];
#pragma unroll
        for (int g = 0; g < PAGED_GROUP; ++g) {
            const float sg = valid ? s[g] * scale : -GPUKIT_INF;
            const float m_new = fmaxf(m[g], warp_reduce<true>(sg));
            const float corr = expf(m[g] - m_new);
            p[g] = valid ? expf(sg - m_new) : 0.0f;
            l[g] = l[g] * corr + warp_sum(p[g]);
#pragma unroll
            for (int i = 0; i < PER; ++i) acc[g][i] *= corr;
            m[g] = m_new;
        }
        const int n = min(32, keys.pos - base + 1);
        // Unrolled so that eight keys' value rows are in flight at once: with fewer, a short
        // context's tile waits on one load latency after another.
#pragma unroll 8
        for (int j = 0; j < n; ++j) {
            const unsigned long long sj = __shfl_sync(0xffffffffu, slot, j);
            const T* vr = v_cache + sj * row + (unsigned long long)kvh * head_dim;
            float pj[PAGED_GROUP];
#pragma unroll
            for (int g = 0; g < PAGED_GROUP; ++g) pj[g] = __shfl_sync(0xffffffffu, p[g], j);
#pragma unroll
            for (int i = 0; i < PER; ++i) {
                const unsigned int d = lane + 32 * i;
                if (d < head_dim) {
                    const float vd = to_f32(vr[d]);
#pragma unroll
                    for (int g = 0; g < PAGED_GROUP; ++g) acc[g][i] = fmaf(pj[g], vd, acc[g][i]);
                }
            }
        }
    }
    if (bad && lane == 0) {
        any_bad = 1;
        atomicOr(err, 1u);
    }
    // The warps' states, merged in warp order by every thread for its (head, dim) items.
#pragma unroll
    for (int g = 0; g < PAGED_GROUP; ++g) {
#pragma unroll
        for (int i = 0; i < PER; ++i) red[warp][g][lane + 32 * i] = acc[g][i];
        if (lane == 0) {
            red_ml[warp][g][0] = m[g];
            red_ml[warp][g][1] = l[g];
        }
    }
    __syncthreads();
    const bool zero = any_bad != 0;
    const bool single = keys.parts == 1;
    const unsigned int stride = head_dim + 2;
    for (unsigned int i = threadIdx.x; i < ng * (head_dim + 1); i += blockDim.x) {
        const unsigned int g = i / (head_dim + 1), d = i % (head_dim + 1);  // d = head_dim: m, l
        float mx = -GPUKIT_INF;
        for (int w = 0; w < PAGED_WARPS; ++w) mx = fmaxf(mx, red_ml[w][g][0]);
        float sum = 0.0f, o = 0.0f;
        for (int w = 0; w < PAGED_WARPS; ++w) {
            const float f = red_ml[w][g][1] > 0.0f ? expf(red_ml[w][g][0] - mx) : 0.0f;
            sum = sum + red_ml[w][g][1] * f;
            if (d < head_dim) o = o + red[w][g][d] * f;
        }
        if (zero) sum = 0.0f;
        const unsigned long long th = (unsigned long long)t * heads + h0 + g;
        if (single) {
            if (d < head_dim) out[th * head_dim + d] = from_f32<T>(sum > 0.0f ? o / sum : 0.0f);
        } else {
            float* pp = partial + (th * max_parts + part) * stride;
            // A bad partition's sum is -1: the merge then zeroes the token.
            if (d < head_dim) pp[d] = zero ? 0.0f : o;
            else {
                pp[head_dim] = zero ? 0.0f : mx;
                pp[head_dim + 1] = zero ? -1.0f : sum;
            }
        }
    }
}

// Tokens with more than one partition: their partitions' states combined in partition order,
// one warp per (token, query head).
template <typename T>
__device__ __forceinline__ void paged_merge_impl(T* __restrict__ out, const float* __restrict__ partial,
                                                 const int* __restrict__ token_seq,
                                                 const int* __restrict__ token_pos, unsigned int tokens,
                                                 unsigned int heads, unsigned int head_dim,
                                                 unsigned int block_size, unsigned int seqs,
                                                 unsigned int max_blocks, unsigned int window,
                                                 unsigned int max_parts) {
    const unsigned int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const unsigned long long item = (unsigned long long)blockIdx.x * PAGED_MERGE_WARPS + warp;
    pdl_enter();
    if (item >= (unsigned long long)tokens * heads) return;
    const unsigned int t = (unsigned int)(item / heads);
    const PagedKeys keys = paged_keys(token_seq, token_pos, t, seqs, max_blocks, block_size, window);
    if (keys.parts < 2) return;
    const unsigned int stride = head_dim + 2;
    const float* pp = partial + item * max_parts * stride;
    float mx = -GPUKIT_INF;
    for (unsigned int p = 0; p < keys.parts; ++p) mx = fmaxf(mx, pp[p * stride + head_dim]);
    float sum = 0.0f;
    bool zero = false;
    for (unsigned int p = 0; p < keys.parts; ++p) {
        const float lp = pp[p * stride + head_dim + 1];
        zero = zero || lp < 0.0f;
        sum = sum + lp * (lp > 0.0f ? expf(pp[p * stride + head_dim] - mx) : 0.0f);
    }
    if (zero) sum = 0.0f;
    for (unsigned int d = lane; d < head_dim; d += 32) {
        float o = 0.0f;
        for (unsigned int p = 0; p < keys.parts; ++p) {
            const float lp = pp[p * stride + head_dim + 1];
            o = o + pp[p * stride + d] * (lp > 0.0f ? expf(pp[p * stride + head_dim] - mx) : 0.0f);
        }
        out[item * head_dim + d] = from_f32<T>(sum > 0.0f ? o / sum : 0.0f);
    }
}

// The tensor-core variant (f16/bf16 at the sdpa kernels' head dims D): the same partitions
// and the same partial states for paged_merge, computed the way sdpa_decode computes a split.
// A block of SDPA_THREADS per (token, KV head, chunk of up to 16 query heads of its group,
// partition) makes those heads the rows of its mma.sync tiles (Q in registers), copies the
// partition's keys and values 64 positions at a time into a ring of `stages` shared-memory
// tiles (each key's row found through the block table) while its four warps attend 16 keys of
// each tile apiece (attend: scores, online softmax in the log2 domain, P·V with P rounded to T),
// then merges the warps in order (merge_warps). Tiles start at the partition's first key, so
// every boundary is a function of the token's position: batch invariant as paged_attention.
// The block ids a partition reads are checked before any is used.

// Starts copying the keys key0 .. key0 + 63 of KV head kvh into shared memory (positions past
// `last` zero-filled, so that masked keys add exact zeros), each row through the block table.
template <typename T, int D>
__device__ __forceinline__ void paged_load_tile(T* ks, T* vs, const T* __restrict__ k_cache,
                                                const T* __restrict__ v_cache, const int* __restrict__ table,
                                                unsigned int block_size, unsigned long long row, unsigned int kvh,
                                                int key0, int last) {
    constexpr int BN = SDPA_DECODE_KEYS, LD = D + SDPA_TILE_PAD, CH = D / 8;
    constexpr int PASSES = (BN * CH + SDPA_THREADS - 1) / SDPA_THREADS;
#pragma unroll
    for (int p = 0; p < PASSES; ++p) {
        const int i = (int)threadIdx.x + p * SDPA_THREADS;
        if (BN * CH % SDPA_THREADS != 0 && i >= BN * CH) break;
        const int r = i / CH, c = (i % CH) * 8, key = key0 + r;
        const bool ok = key <= last;
        unsigned long long off = 0;
        if (ok) {
            const unsigned long long slot =
                (unsigned long long)table[key / (int)block_size] * block_size + key % (int)block_size;
            off = slot * row + (unsigned long long)kvh * D + c;
        }
        cp_async16(ks + r * LD + c, k_cache + off, ok);
        cp_async16(vs + r * LD + c, v_cache + off, ok);
    }
    cp_async_commit();
}

template <typename T, int D>
__device__ __forceinline__ void paged_attention_mma_impl(
    T* __restrict__ out, float* __restrict__ partial, const T* __restrict__ q,
    const T* __restrict__ k_cache, const T* __restrict__ v_cache, const int* __restrict__ block_tables,
    const int* __restrict__ token_seq, const int* __restrict__ token_pos, unsigned int heads,
    unsigned int kv_heads, unsigned int block_size, unsigned int seqs, unsigned int max_blocks,
    unsigned int num_blocks, float scale, unsigned int window, unsigned int max_parts,
    unsigned int stages, unsigned int* __restrict__ err) {
    extern __shared__ __align__(16) unsigned char paged_smem[];
    T* smem = reinterpret_cast<T*>(paged_smem);
    constexpr int BN = SDPA_DECODE_KEYS, TILE = BN * (D + SDPA_TILE_PAD);
    const int warp = threadIdx.x >> 5, g = (threadIdx.x & 31) >> 2;
    const unsigned int group = heads / kv_heads, chunks = (group + 15) / 16;
    const unsigned int item = blockIdx.x, part = blockIdx.y;
    const unsigned int t = item / (kv_heads * chunks), kvh = item / chunks % kv_heads;
    const unsigned int g0 = item % chunks * 16, nrows = min(16u, group - g0);
    const unsigned int h0 = kvh * group + g0;  // the block's first query head
    pdl_enter();
    const PagedKeys keys = paged_keys(token_seq, token_pos, t, seqs, max_blocks, block_size, window);
    if (part >= keys.parts) return;
    const int key_begin = keys.lo + (int)(part * PAGED_PART_KEYS);
    const int last = min(keys.pos, key_begin + PAGED_PART_KEYS - 1);  // the partition's last key
    const int* table = block_tables + (unsigned long long)(keys.bad ? 0 : token_seq[t]) * max_blocks;
    bool bad = keys.bad;
    if (!bad) {
        for (int b = key_begin / (int)block_size + (int)threadIdx.x; b <= last / (int)block_size; b += SDPA_THREADS) {
            const int id = table[b];
            bad = bad || id < 0 || (unsigned int)id >= num_blocks;
        }
    }
    bad = __syncthreads_or(bad);
    if (bad && threadIdx.x == 0) atomicOr(err, 1u);
    Rows rows;
    const T* qrow[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const unsigned int rr = g + 8 * r;
        rows.pos[r] = keys.pos;
        rows.slope[r] = 0.0f;
        qrow[r] = rr < nrows ? q + ((unsigned long long)t * heads + h0 + rr) * D : nullptr;
    }
    unsigned qa[D / 16][4];
    load_q<T, D>(qa, qrow[0], qrow[1]);
    // The token's causal mask as the dense kernels see it: one query at position pos.
    AttnArgs a = {};
    a.q_len = 1;
    a.kv_len = (unsigned int)keys.pos + 1;
    a.causal = 1;
    a.scale_log2 = scale * LOG2E;
    State<D> st;
    st.init();
    if (!bad) {
        const unsigned long long row = (unsigned long long)kv_heads * D;
        const unsigned int S = min(max(stages, 1u), 3u);
        for (unsigned int s = 0; s + 1 < S; ++s) {
            T* ks = smem + s * 2 * TILE;
            const int k0 = key_begin + (int)(s * BN);
            if (k0 <= last) paged_load_tile<T, D>(ks, ks + TILE, k_cache, v_cache, table, block_size, row, kvh, k0, last);
            else cp_async_commit();
        }
        unsigned int stage = 0;
        for (int key0 = key_begin; key0 <= last; key0 += BN) {
            const int next = key0 + (int)(S - 1) * BN;
            T* nx = smem + (stage + S - 1) % S * 2 * TILE;
            if (next <= last) paged_load_tile<T, D>(nx, nx + TILE, k_cache, v_cache, table, block_size, row, kvh, next, last);
            else cp_async_commit();
            if (S >= 3) cp_async_wait<2>();
            else if (S == 2) cp_async_wait<1>();
            else cp_async_wait<0>();
            __syncthreads();
            const T* ks = smem + stage * 2 * TILE;
            decode_attend<T, D, PaddedKV<D>>(qa, ks, ks + TILE, warp, (unsigned int)key0, rows, a, st);
            __syncthreads();
            stage = stage + 1 == S ? 0 : stage + 1;
        }
    }
    finish_sum<D>(st);
    const bool single = keys.parts == 1;
    merge_warps<D>(st, reinterpret_cast<float*>(paged_smem), nrows, [] { __syncthreads(); },
                   [&](unsigned int r, unsigned int c, float4 o, float m, float l) {
                       const unsigned long long th = (unsigned long long)t * heads + h0 + r;
                       if (single) {
                           store_out4<T>(out + th * D + c, o, bad ? 0.0f : l);
                           return;
                       }
                       // paged_merge's state: the unnormalised output, the max in the natural-log
                       // domain and the sum; a bad partition's sum is -1, which zeroes the token.
                       float* pp = partial + (th * max_parts + part) * (D + 2);
                       if (bad) o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                       *reinterpret_cast<float2*>(pp + c) = make_float2(o.x, o.y);
                       *reinterpret_cast<float2*>(pp + c + 2) = make_float2(o.z, o.w);
                       if (c == 0) *reinterpret_cast<float2*>(pp + D) =
                           make_float2(bad ? 0.0f : m * 0.6931471805599453f, bad ? -1.0f : l);
                   });
}

#define PAGED_KERNELS(T, NAME)                                                                     \
extern "C" __global__ void paged_kv_write_##NAME(T* k_cache, T* v_cache, const T* k, const T* v, \
        const int* slots, unsigned int tokens, unsigned int row, unsigned long long num_slots,    \
        unsigned int* err) {                                                                      \
    paged_kv_write_impl<T>(k_cache, v_cache, k, v, slots, tokens, row, num_slots, err);           \
}                                                                                                 \
extern "C" __global__ void __launch_bounds__(PAGED_WARPS * 32) paged_attention_##NAME(T* out,     \
        float* partial, const T* q, const T* k_cache, const T* v_cache, const int* block_tables,  \
        const int* token_seq, const int* token_pos, unsigned int heads, unsigned int kv_heads,    \
        unsigned int head_dim, unsigned int block_size, unsigned int seqs, unsigned int max_blocks,\
        unsigned int num_blocks, float scale, unsigned int window, unsigned int max_parts,        \
        unsigned int* err) {                                                                      \
    paged_attention_impl<T>(out, partial, q, k_cache, v_cache, block_tables, token_seq, token_pos,\
                            heads, kv_heads, head_dim, block_size, seqs, max_blocks, num_blocks,  \
                            scale, window, max_parts, err);                                       \
}                                                                                                 \
extern "C" __global__ void __launch_bounds__(PAGED_MERGE_WARPS * 32) paged_merge_##NAME(T* out,   \
        const float* partial, const int* token_seq, const int* token_pos, unsigned int tokens,    \
        unsigned int heads, unsigned int head_dim, unsigned int block_size, unsigned int seqs,    \
        unsigned int max_blocks, unsigned int window, unsigned int max_parts) {                   \
    paged_merge_impl<T>(out, partial, token_seq, token_pos, tokens, heads, head_dim, block_size,  \
                        seqs, max_blocks, window, max_parts);                                     \
}

PAGED_KERNELS(float, f32)
PAGED_KERNELS(f16, f16)
PAGED_KERNELS(bf16, bf16)

#define PAGED_MMA_KERNEL(T, NAME, D)                                                               \
extern "C" __global__ void __launch_bounds__(SDPA_THREADS) paged_attention_mma_##NAME##_d##D(     \
        T* out, float* partial, const T* q, const T* k_cache, const T* v_cache,                   \
        const int* block_tables, const int* token_seq, const int* token_pos, unsigned int heads,  \
        unsigned int kv_heads, unsigned int block_size, unsigned int seqs, unsigned int max_blocks,\
        unsigned int num_blocks, float scale, unsigned int window, unsigned int max_parts,        \
        unsigned int stages, unsigned int* err) {                                                 \
    paged_attention_mma_impl<T, D>(out, partial, q, k_cache, v_cache, block_tables, token_seq,    \
                                   token_pos, heads, kv_heads, block_size, seqs, max_blocks,      \
                                   num_blocks, scale, window, max_parts, stages, err);            \
}
#define PAGED_MMA_KERNELS(T, NAME)                                                                \
    PAGED_MMA_KERNEL(T, NAME, 64)                                                                 \
    PAGED_MMA_KERNEL(T, NAME, 80)                                                                 \
    PAGED_MMA_KERNEL(T, NAME, 96)                                                                 \
    PAGED_MMA_KERNEL(T, NAME, 128)                                                                \
    PAGED_MMA_KERNEL(T, NAME, 256)
PAGED_MMA_KERNELS(f16, f16)
PAGED_MMA_KERNELS(bf16, bf16)
