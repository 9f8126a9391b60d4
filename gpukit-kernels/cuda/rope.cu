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
        float x0 = to_f32(r[a]), x1 = to_f32(r[b]);                                                \
        r[a] = from_f32<T>(x0 * c - x1 * s);                                                       \
        r[b] = from_f32<T>(x1 * c + x0 * s);                                                       \
    }                                                                                              \
}

ROPE_KERNELS(float, f32)
ROPE_KERNELS(f16, f16)
ROPE_KERNELS(bf16, bf16)
