// KV-cache append: new [tokens, kv_heads, head_dim] (a projection's output layout) written into
// the cache [kv_heads, max_len, head_dim] at rows pos .. pos + tokens of every head, where pos is
// read from device memory (so a captured decode step replays at the next position). A write
// that would pass max_len writes nothing and sets bit 0 of *err. With swizzled != 0 the cache is
// laid out pre-swizzled (kv_col).
#include "common.cuh"

#define KV_KERNELS(T, NAME)                                                                        \
extern "C" __global__ void kv_append_##NAME(T* __restrict__ cache, const T* __restrict__ fresh,    \
        const int* __restrict__ pos_ptr, unsigned int tokens, unsigned int kv_heads,               \
        unsigned int head_dim, unsigned int max_len, unsigned int swizzled,                        \
        unsigned int* __restrict__ err) {                                                          \
    pdl_enter();                                                                                   \
    const long long pos = (long long)*pos_ptr;                                                     \
    if (pos < 0 || pos + tokens > max_len) {                                                       \
        if (blockIdx.x == 0 && threadIdx.x == 0) atomicOr(err, 1u);                                \
        return;                                                                                    \
    }                                                                                              \
    unsigned long long total = (unsigned long long)tokens * kv_heads * head_dim;                   \
    for (unsigned long long t = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;         \
         t < total; t += (unsigned long long)gridDim.x * blockDim.x) {                             \
        unsigned int d = t % head_dim;                                                             \
        unsigned long long r = t / head_dim;                                                       \
        unsigned int h = r % kv_heads, tok = (unsigned int)(r / kv_heads);                         \
        const unsigned long long key = pos + tok;                                                  \
        const unsigned int col = kv_col<T>(key, d, head_dim, swizzled);                            \
        cache[((unsigned long long)h * max_len + key) * head_dim + col] = fresh[t];                \
    }                                                                                              \
}

KV_KERNELS(float, f32)
KV_KERNELS(f16, f16)
KV_KERNELS(bf16, bf16)
