// Rotary position embeddings, in place on x [tokens, heads, head_dim] (the layout of a QKV
// projection's output), one thread per (token, head, pair). Positions come from device memory
// (one per token), so a captured graph replays with new positions. inv_freq holds half = rotated
// dims / 2 f32 values; cos and sin are scaled by `scale` (YaRN's mscale, else 1). layout 0 pairs
// element i with i + half (HF), 1 pairs 2i with 2i + 1 (GGUF). Same arithmetic as the CPU
// reference (gpukit-ops/src/rope.rs): angle = f32(pos) · inv_freq.
#include "common.cuh"

#define ROPE_KERNELS(T, NAME)                                                                      \
extern "C" __global__ void rope_##NAME(T* __restrict__ x, const int* __restrict__ positions,       \
        const float* __restrict__ inv_freq, float scale, unsigned int tokens, unsigned int heads,  \
        unsigned int head_dim, unsigned int half, int layout) {                                    \
    pdl_enter();                                                                                   \
    unsigned long long total = (unsigned long long)tokens * heads * half;                          \
    for (unsigned long long t = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;         \
         t < total; t += (unsigned long long)gridDim.x * blockDim.x) {                             \
        unsigned int i = t % half;                                                                 \
        unsigned long long row = t / half;                                                         \
        unsigned int token = (unsigned int)(row / heads);                                          \
        float angle = (float)positions[token] * inv_freq[i];                                       \
        float c = cosf(angle) * scale, s = sinf(angle) * scale;                                    \
        T* r = x + row * head_dim;                                                                 \
        unsigned int a = layout ? 2 * i : i, b = layout ? 2 * i + 1 : i + half;                    \
        float y0, y1;                                                                              \
        rope_rotate(to_f32(r[a]), to_f32(r[b]), c, s, y0, y1);                                     \
        r[a] = from_f32<T>(y0);                                                                    \
        r[b] = from_f32<T>(y1);                                                                    \
    }                                                                                              \
}

ROPE_KERNELS(float, f32)
ROPE_KERNELS(f16, f16)
ROPE_KERNELS(bf16, bf16)

// The decode step's attention input in one kernel: from a fused QKV projection's output
// qkv [tokens, (nq + 2 nkv) · head_dim] (per token: the query heads, then the key heads, then the
// value heads), optionally RMS-normalise each query and key head (Qwen3's q_norm / k_norm:
// weights [head_dim], null for none; rounded to T as the separate norm would), rotate them as
// rope_ does (half pairs from inv_freq, none when half = 0), write the queries to
// q_out [tokens, nq, head_dim] and the keys and values into the caches [nkv, max_len, head_dim]
// at row pos + token, pos read from device memory. One block (ROPE_KV_THREADS threads) per
// (token, head) over the nq query heads and nkv key/value heads; head_dim ≤ 256. A write that
// would pass max_len writes nothing and sets bit 0 of *err. With swizzled != 0 the caches are
// laid out pre-swizzled (kv_col).

template <typename T>
__device__ __forceinline__ void rope_kv_append_impl(const T* __restrict__ qkv, T* __restrict__ q_out,
        T* __restrict__ k_cache, T* __restrict__ v_cache, const int* __restrict__ pos_ptr,
        const float* __restrict__ inv_freq, float scale, unsigned int half, int layout,
        const T* __restrict__ q_norm, const T* __restrict__ k_norm, float eps, unsigned int tokens,
        unsigned int nq, unsigned int nkv, unsigned int head_dim, unsigned int max_len,
        unsigned int swizzled, unsigned int* __restrict__ err) {
    __shared__ float buf[256];
    __shared__ float scratch[32];
    pdl_enter();
    const long long pos = (long long)*pos_ptr;
    if (pos < 0 || pos + tokens > max_len) {
        if (blockIdx.x == 0 && threadIdx.x == 0) atomicOr(err, 1u);
        return;
    }
    const unsigned int heads = nq + nkv;
    const unsigned int slot = blockIdx.x % heads, tok = blockIdx.x / heads;
    const bool is_q = slot < nq;
    const unsigned int kvh = slot - nq;
    const T* row = qkv + (unsigned long long)tok * (nq + 2 * nkv) * head_dim;
    const T* src = row + (unsigned long long)slot * head_dim;
    const T* nw = is_q ? q_norm : k_norm;
    const unsigned long long key = pos + tok, cache_row = ((unsigned long long)kvh * max_len + key) * head_dim;
    // Where element i of this head's row goes (the cache's layout; queries in order).
    const auto col = [&](unsigned int i) { return is_q ? i : kv_col<T>(key, i, head_dim, swizzled); };
    T* dst = is_q ? q_out + ((unsigned long long)tok * nq + slot) * head_dim : k_cache + cache_row;
    float ss = 0.0f;
    for (unsigned int i = threadIdx.x; i < head_dim; i += blockDim.x) {
        const float v = to_f32(src[i]);
        buf[i] = v;
        ss += v * v;
    }
    if (nw) {
        const float inv = rsqrtf(block_sum(ss, scratch) / (float)head_dim + eps);
        for (unsigned int i = threadIdx.x; i < head_dim; i += blockDim.x)
            buf[i] = to_f32(from_f32<T>(buf[i] * inv * to_f32(nw[i])));
    }
    __syncthreads();
    const float p = (float)(pos + tok);
    for (unsigned int i = threadIdx.x; i < half; i += blockDim.x) {
        const float angle = p * inv_freq[i];
        const float c = cosf(angle) * scale, s = sinf(angle) * scale;
        const unsigned int a = layout ? 2 * i : i, b = layout ? 2 * i + 1 : i + half;
        float y0, y1;
        rope_rotate(buf[a], buf[b], c, s, y0, y1);
        dst[col(a)] = from_f32<T>(y0);
        dst[col(b)] = from_f32<T>(y1);
    }
    for (unsigned int i = 2 * half + threadIdx.x; i < head_dim; i += blockDim.x)
        dst[col(i)] = from_f32<T>(buf[i]);
    if (!is_q) {
        const T* vs = row + (unsigned long long)(nq + nkv + kvh) * head_dim;
        for (unsigned int i = threadIdx.x; i < head_dim; i += blockDim.x) v_cache[cache_row + col(i)] = vs[i];
    }
}

#define ROPE_KV_KERNELS(T, NAME)                                                                   \
extern "C" __global__ void __launch_bounds__(ROPE_KV_THREADS) rope_kv_append_##NAME(               \
        const T* __restrict__ qkv, T* __restrict__ q_out, T* __restrict__ k_cache,                 \
        T* __restrict__ v_cache, const int* __restrict__ pos_ptr,                                  \
        const float* __restrict__ inv_freq, float scale, unsigned int half, int layout,            \
        const T* __restrict__ q_norm, const T* __restrict__ k_norm, float eps,                     \
        unsigned int tokens, unsigned int nq, unsigned int nkv, unsigned int head_dim,             \
        unsigned int max_len, unsigned int swizzled, unsigned int* __restrict__ err) {             \
    rope_kv_append_impl<T>(qkv, q_out, k_cache, v_cache, pos_ptr, inv_freq, scale, half, layout,   \
                           q_norm, k_norm, eps, tokens, nq, nkv, head_dim, max_len, swizzled, err); \
}

ROPE_KV_KERNELS(float, f32)
ROPE_KV_KERNELS(f16, f16)
ROPE_KV_KERNELS(bf16, bf16)
