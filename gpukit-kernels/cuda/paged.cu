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
// table: out[t, h] = softmax(scale · q[t, h] · K[0..=pos]ᵀ) · V[0..=pos].
//
// One warp per (token, query head); the query head's KV head is h / (heads / kv_heads). Keys go
// by in tiles of 32 from the window's start: the warp scores them one by one (coalesced reads of
// the key's row, each lane's share of the dot product, a fixed butterfly), the tile's maximum
// and sum come from fixed butterflies, and the running output (each lane owning head_dim / 32 of
// its values) is rescaled and accumulated key by key in order — the online softmax of Milakov &
// Gimelshein 2018. Nothing depends on the other
// tokens of the batch. A sequence row outside the block tables, a position past them or a
// block id outside [0, num_blocks) sets bit 0 of *err and the token's output is zero.
template <typename T>
__device__ __forceinline__ void paged_attention_impl(
    T* __restrict__ out, const T* __restrict__ q, const T* __restrict__ k_cache,
    const T* __restrict__ v_cache, const int* __restrict__ block_tables,
    const int* __restrict__ token_seq, const int* __restrict__ token_pos, unsigned int tokens,
    unsigned int heads, unsigned int kv_heads, unsigned int head_dim, unsigned int block_size,
    unsigned int seqs, unsigned int max_blocks, unsigned int num_blocks, float scale,
    unsigned int window, unsigned int* __restrict__ err) {
    const unsigned int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const unsigned long long item = (unsigned long long)blockIdx.x * PAGED_WARPS + warp;
    pdl_enter();
    if (item >= (unsigned long long)tokens * heads) return;
    const unsigned int t = (unsigned int)(item / heads), h = (unsigned int)(item % heads);
    const unsigned int kvh = h / (heads / kv_heads);
    const unsigned long long row = (unsigned long long)kv_heads * head_dim;
    const T* qr = q + ((unsigned long long)t * heads + h) * head_dim;
    constexpr int PER = PAGED_MAX_HEAD_DIM / 32;
    // Lane l holds elements l, l + 32, … of the query (and of the output).
    float qv[PER], acc[PER];
#pragma unroll
    for (int i = 0; i < PER; ++i) {
        const unsigned int d = lane + 32 * i;
        qv[i] = d < head_dim ? to_f32(qr[d]) : 0.0f;
        acc[i] = 0.0f;
    }
    const int pos = token_pos[t], seq = token_seq[t];
    bool bad = seq < 0 || (unsigned int)seq >= seqs || pos < 0 ||
               (unsigned int)pos / block_size >= max_blocks;
    const int* table = block_tables + (unsigned long long)(bad ? 0 : seq) * max_blocks;
    const int lo = (window > 0 && pos + 1 > (int)window) ? pos + 1 - (int)window : 0;
    float m = -GPUKIT_INF, l = 0.0f;
    for (int base = lo; !bad && base <= pos; base += 32) {
        const int key = base + (int)lane;
        unsigned long long slot = 0;  // keys past pos read slot 0 (in bounds) and are masked
        if (key <= pos) {
            const int b = table[key / (int)block_size];
            if (b < 0 || (unsigned int)b >= num_blocks) bad = true;
            else slot = (unsigned long long)b * block_size + key % (int)block_size;
        }
        if (__any_sync(0xffffffffu, bad)) {
            bad = true;
            break;
        }
        // Scores, key by key: the warp reads the key's row (coalesced), each lane dots its
        // elements, a fixed butterfly sums them; lane j keeps key j's score.
        float s = -GPUKIT_INF;
#pragma unroll 4
        for (int j = 0; j < 32; ++j) {
            const unsigned long long sj = __shfl_sync(0xffffffffu, slot, j);
            const T* kr = k_cache + sj * row + (unsigned long long)kvh * head_dim;
            float part = 0.0f;
#pragma unroll
            for (int i = 0; i < PER; ++i) {
                const unsigned int d = lane + 32 * i;
                if (d < head_dim) part = fmaf(qv[i], to_f32(kr[d]), part);
            }
            part = warp_sum(part);
            if ((int)lane == j && key <= pos) s = part * scale;
        }
        const float m_new = fmaxf(m, warp_reduce<true>(s));
        const float corr = expf(m - m_new);
        const float p = key <= pos ? expf(s - m_new) : 0.0f;
        l = l * corr + warp_sum(p);
#pragma unroll
        for (int i = 0; i < PER; ++i) acc[i] *= corr;
        const int n = min(32, pos - base + 1);
#pragma unroll 4
        for (int j = 0; j < n; ++j) {
            const float pj = __shfl_sync(0xffffffffu, p, j);
            const unsigned long long sj = __shfl_sync(0xffffffffu, slot, j);
            const T* vr = v_cache + sj * row + (unsigned long long)kvh * head_dim;
#pragma unroll
            for (int i = 0; i < PER; ++i) {
                const unsigned int d = lane + 32 * i;
                if (d < head_dim) acc[i] = fmaf(pj, to_f32(vr[d]), acc[i]);
            }
        }
        m = m_new;
    }
    if (bad && lane == 0) atomicOr(err, 1u);
    T* o = out + ((unsigned long long)t * heads + h) * head_dim;
    const float inv = (bad || l == 0.0f) ? 0.0f : 1.0f / l;
#pragma unroll
    for (int i = 0; i < PER; ++i) {
        const unsigned int d = lane + 32 * i;
        if (d < head_dim) o[d] = from_f32<T>(acc[i] * inv);
    }
}

#define PAGED_KERNELS(T, NAME)                                                                     \
extern "C" __global__ void paged_kv_write_##NAME(T* k_cache, T* v_cache, const T* k, const T* v, \
        const int* slots, unsigned int tokens, unsigned int row, unsigned long long num_slots,    \
        unsigned int* err) {                                                                      \
    paged_kv_write_impl<T>(k_cache, v_cache, k, v, slots, tokens, row, num_slots, err);           \
}                                                                                                 \
extern "C" __global__ void __launch_bounds__(PAGED_WARPS * 32) paged_attention_##NAME(T* out,     \
        const T* q, const T* k_cache, const T* v_cache, const int* block_tables,                  \
        const int* token_seq, const int* token_pos, unsigned int tokens, unsigned int heads,      \
        unsigned int kv_heads, unsigned int head_dim, unsigned int block_size, unsigned int seqs, \
        unsigned int max_blocks, unsigned int num_blocks, float scale, unsigned int window,       \
        unsigned int* err) {                                                                      \
    paged_attention_impl<T>(out, q, k_cache, v_cache, block_tables, token_seq, token_pos, tokens, \
                            heads, kv_heads, head_dim, block_size, seqs, max_blocks, num_blocks,  \
                            scale, window, err);                                                  \
}

PAGED_KERNELS(float, f32)
PAGED_KERNELS(f16, f16)
PAGED_KERNELS(bf16, bf16)
