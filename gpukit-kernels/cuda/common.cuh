// Shared definitions for gpukit's kernels. Device code only; compiled with NVRTC.
#pragma once
// Constants, op codes and argument structs shared with the Rust side, generated from
// gpukit-kernels/src/shared.rs.
#include "gpukit_shared.cuh"
#include <cuda_fp16.h>
#include <cuda_bf16.h>

typedef __half f16;
typedef __nv_bfloat16 bf16;
typedef long long i64;
typedef int i32;
typedef unsigned char u8;

// +infinity (NVRTC has no <math.h> INFINITY).
#define GPUKIT_INF __int_as_float(0x7f800000)

// Conversions through f32, the accumulation type of every float kernel.
__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(f16 x) { return __half2float(x); }
__device__ __forceinline__ float to_f32(bf16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_f32(i32 x) { return (float)x; }
__device__ __forceinline__ float to_f32(i64 x) { return (float)x; }
__device__ __forceinline__ float to_f32(u8 x) { return (float)x; }

template <typename T> __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ float from_f32<float>(float x) { return x; }
// Round to nearest even, like the CPU reference (half crate).
template <> __device__ __forceinline__ f16 from_f32<f16>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ bf16 from_f32<bf16>(float x) { return __float2bfloat16_rn(x); }

// Offsets of the three operands for output element `i` (row-major over `shape`).
__device__ __forceinline__ void strided_offsets(const StridedIndex& ix, unsigned long long i,
                                                long long& o0, long long& o1, long long& o2) {
    o0 = 0; o1 = 0; o2 = 0;
    for (int d = (int)ix.ndim - 1; d >= 0; --d) {
        unsigned long long n = ix.shape[d];
        unsigned long long c = i % n;
        i /= n;
        o0 += (long long)c * ix.stride[0][d];
        o1 += (long long)c * ix.stride[1][d];
        o2 += (long long)c * ix.stride[2][d];
    }
}

// The shared-memory address of a generic pointer into shared memory (for PTX operands).
__device__ __forceinline__ unsigned int smem_addr(const void* p) {
    return (unsigned int)__cvta_generic_to_shared(p);
}

// Elements of T per 16-byte vector.
template <typename T> struct Vec16 { static const int N = 16 / sizeof(T); };

// Loads/stores 16 bytes as a vector of 16/sizeof(T) elements (pointer 16-byte aligned).
template <typename T> struct Pack {
    T v[16 / sizeof(T)];
};
template <typename T> __device__ __forceinline__ Pack<T> load16(const T* p) {
    uint4 raw = *reinterpret_cast<const uint4*>(p);
    return *reinterpret_cast<Pack<T>*>(&raw);
}
template <typename T> __device__ __forceinline__ void store16(T* p, const Pack<T>& x) {
    *reinterpret_cast<uint4*>(p) = *reinterpret_cast<const uint4*>(&x);
}

// A pack's elements as f32. For bf16 the pack is widened a 32-bit word at a time: the low
// element is the word shifted up 16 bits, the high one the word with its low 16 bits cleared —
// two instructions a word, where converting element by element takes three (ptxas extracts each
// high half with a byte permute before shifting it). The values are the same, so sums over
// them are the same bit for bit; the ring GEMV runs 2–3% faster with it.
template <typename T>
__device__ __forceinline__ void unpack_f32(const Pack<T>& p, float (&f)[Vec16<T>::N]) {
#pragma unroll
    for (int e = 0; e < Vec16<T>::N; ++e) f[e] = to_f32(p.v[e]);
}
template <> __device__ __forceinline__ void unpack_f32<bf16>(const Pack<bf16>& p, float (&f)[8]) {
    const uint4 u = *reinterpret_cast<const uint4*>(&p);
    const unsigned int w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        f[2 * i] = __uint_as_float(w[i] << 16);
        f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
}

// The larger of two values (fmaxf for floats: a NaN loses to a number).
__device__ __forceinline__ float larger(float a, float b) { return fmaxf(a, b); }
__device__ __forceinline__ int larger(int a, int b) { return max(a, b); }
__device__ __forceinline__ unsigned int larger(unsigned int a, unsigned int b) { return max(a, b); }

// The sum (MAX: the maximum) of v (float, int or unsigned) over the warp, in every lane, in a
// fixed butterfly order (deterministic).
template <bool MAX, typename V> __device__ __forceinline__ V warp_reduce(V v) {
    for (int o = 16; o > 0; o >>= 1) {
        const V u = __shfl_xor_sync(0xffffffffu, v, o);
        v = MAX ? larger(v, u) : v + u;
    }
    return v;
}
__device__ __forceinline__ float warp_sum(float v) { return warp_reduce<false>(v); }

// warp_reduce over the `warps` warps from warp `first` (uniform per warp), in every thread of
// them: each warp's butterfly, the warp results through `scratch` (32 floats), then a second
// fixed butterfly over those. Deterministic. Every thread of the block must call it (two
// barriers).
template <bool MAX>
__device__ __forceinline__ float warps_reduce(float v, unsigned int first, unsigned int warps, float* scratch) {
    v = warp_reduce<MAX>(v);
    const unsigned int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    float r = lane < warps ? scratch[first + lane] : (MAX ? -GPUKIT_INF : 0.0f);
    r = warp_reduce<MAX>(r);
    __syncthreads();
    return r;
}
__device__ __forceinline__ float warps_sum(float v, unsigned int first, unsigned int warps, float* scratch) {
    return warps_reduce<false>(v, first, warps, scratch);
}

// Deterministic block sum / maximum (warps_reduce over the whole block, any block size).
// `scratch` holds 32 floats.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
    return warps_reduce<false>(v, 0, (blockDim.x + 31) >> 5, scratch);
}
__device__ __forceinline__ float block_max(float v, float* scratch) {
    return warps_reduce<true>(v, 0, (blockDim.x + 31) >> 5, scratch);
}

// Programmatic dependent launch (sm_90+; no-ops elsewhere and when the launch did not ask for
// it). A kernel launched with the programmatic-serialization attribute may start while the
// previous kernel on its stream is still running: it must call pdl_wait() before it reads
// anything an earlier kernel writes or writes anything an earlier kernel reads (pdl_wait
// returns once the previous grid has completed and its memory is visible). Work before it may
// only touch data no kernel of the step writes (weights). pdl_launch_dependents() lets the next
// kernel start launching once every block of this one has called it (or exited); kernels call
// it right after pdl_wait(), so at most one dependent grid waits at a time.
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
// Both, in that order: the prologue of every kernel that does nothing before its wait.
__device__ __forceinline__ void pdl_enter() {
    pdl_wait();
    pdl_launch_dependents();
}

// Synchronises the `count` threads (whole warps) that use barrier `id` (1..15; 0 is
// __syncthreads's).
__device__ __forceinline__ void named_barrier(unsigned int id, unsigned int count) {
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}

// Moves a position in a ring of nst slots on by `step` slots (step ≤ nst): slot s, and the
// parity of the phase its barriers are waited on with, which flips each time the ring wraps.
__device__ __forceinline__ void ring_next(unsigned int& s, unsigned int& phase, unsigned int nst,
                                          unsigned int step = 1) {
    s += step;
    if (s >= nst) {
        s -= nst;
        phase ^= 1;
    }
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// mbarriers (sm_90+): the completion counters of bulk asynchronous copies.
__device__ __forceinline__ void mbar_init(unsigned long long* b, unsigned int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(b)), "r"(count)
                 : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned long long* b) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(b)) : "memory");
}
// Blocks until the phase of parity `parity` of barrier b has completed.
__device__ __forceinline__ void mbar_wait(unsigned long long* b, unsigned int parity) {
    asm volatile("{\n .reg .pred p;\n"
                 "WAIT_%=: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
                 " @!p bra WAIT_%=;\n}" ::"r"(smem_addr(b)), "r"(parity)
                 : "memory");
}
// Counts `bytes` more expected on barrier b, with one arrival (the producer's).
__device__ __forceinline__ void mbar_expect_tx(unsigned long long* b, unsigned int bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(b)), "r"(bytes)
                 : "memory");
}
// Copies `bytes` (a multiple of 16, both addresses 16-byte aligned) from global memory into
// shared memory without registers, counting them on barrier b (no arrival: the bytes must have
// been announced with mbar_expect_tx); the lines are marked evict-first in L2 (read once).
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, unsigned int bytes, unsigned long long* b) {
    asm volatile("{\n .reg .b64 pol;\n"
                 " createpolicy.fractional.L2::evict_first.b64 pol, 1.0;\n"
                 " cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
                 ".L2::cache_hint [%0], [%1], %2, [%3], pol;\n}"
                 ::"r"(smem_addr(dst)), "l"(src), "r"(bytes), "r"(smem_addr(b))
                 : "memory");
}
// bulk_copy with its own announcement and arrival on b (weights are read once per step).
__device__ __forceinline__ void bulk_load(void* dst, const void* src, unsigned int bytes,
                                          unsigned long long* b) {
    mbar_expect_tx(b, bytes);
    bulk_copy(dst, src, bytes, b);
}
// Asks L2 for `bytes` (a multiple of 16, 16-byte aligned) from src, without waiting.
__device__ __forceinline__ void bulk_prefetch_l2(const void* src, unsigned int bytes) {
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(src), "r"(bytes) : "memory");
}
#endif

// 16 bytes global → shared, bypassing L1; zero-filled when !valid (nothing is read then).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
                 "r"(valid ? 16 : 0)
                 : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
// Four 8×8 b16 matrices from shared memory, transposed (lanes 8i..8i+7 address matrix i's rows).
__device__ __forceinline__ void ldsm_x4_trans(unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3,
                                              const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(smem_addr(p)));
}

// Four 8×8 b16 matrices from shared memory (lanes 8i..8i+7 address matrix i's rows).
__device__ __forceinline__ void ldsm_x4(unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3, const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(smem_addr(p)));
}

// Two 8×8 b16 matrices from shared memory (lanes 8i..8i+7 address matrix i's rows).
__device__ __forceinline__ void ldsm_x2(unsigned& r0, unsigned& r1, const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r0), "=r"(r1)
                 : "r"(smem_addr(p)));
}

// c (16×8 f32) += a (16×16, row) · b (16×8, col).
template <typename T> __device__ __forceinline__ void mma16816(float* c, const unsigned* a, unsigned b0, unsigned b1);
template <> __device__ __forceinline__ void mma16816<bf16>(float* c, const unsigned* a, unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
                 "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <> __device__ __forceinline__ void mma16816<f16>(float* c, const unsigned* a, unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
                 "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// RoPE's rotation of the pair (x0, x1) by the angle whose scaled cosine and sine are c, s:
// (x0·c − x1·s, x1·c + x0·s), each product and sum rounded on its own (no fused multiply-add,
// which the compiler would otherwise choose per kernel): every kernel that rotates gets the same
// bits, and so does the CPU reference.
__device__ __forceinline__ void rope_rotate(float x0, float x1, float c, float s, float& r0, float& r1) {
    r0 = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
    r1 = __fadd_rn(__fmul_rn(x1, c), __fmul_rn(x0, s));
}

// Column at which element c of key row `key` of a K or V row of head_dim elements is stored,
// in a KV cache laid out pre-swizzled (swizzled != 0; gpukit-ops' KvLayout::Swizzled): within
// each whole 128-byte block of the row, 16-byte chunk j lies at chunk j ^ (key mod 8); elements
// past the last whole block stay in place. A 1-d copy of rows starting at a multiple of 8 keys
// then lands in the 128-byte swizzle that ldmatrix reads without bank conflicts.
// kv_swizzle is that swizzle alone, for a column c inside a whole block.
template <typename T> __device__ __forceinline__ unsigned int kv_swizzle(unsigned long long key, unsigned int c) {
    return c ^ (((unsigned int)key & 7) * (16 / sizeof(T)));  // the chunk's index within its block
}
template <typename T>
__device__ __forceinline__ unsigned int kv_col(unsigned long long key, unsigned int c, unsigned int head_dim,
                                               unsigned int swizzled) {
    constexpr unsigned int B = 128 / sizeof(T);  // elements per 128-byte block
    if (!swizzled || c / B >= head_dim / B) return c;  // only whole blocks are swizzled
    return kv_swizzle<T>(key, c);
}

// Asks L2 to fetch the line holding p (no registers, no wait).
__device__ __forceinline__ void prefetch_l2(const void* p) {
    asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

// Lane `lane` of a warp asks L2 for lines lane, lane + 32, … of [p, p + bytes) for each range
// p, the ranges interleaved line by line (the warp together: every 128-byte line of each).
template <class... P>
__device__ __forceinline__ void prefetch_l2_lines(unsigned int bytes, unsigned int lane, const P*... p) {
    for (unsigned int o = 128 * lane; o < bytes; o += 32 * 128)
        (prefetch_l2(reinterpret_cast<const char*>(p) + o), ...);
}

// A running "first maximum": the largest value and, among equal values, the lowest index
// (GPUKIT_NO_INDEX: nothing seen yet). NaN counts as larger than every number, like
// torch.argmax (and `argmax` in reduce.cu), so the first NaN wins where there is one. The order
// (NaN above numbers, then value, then lower index) is total and merging is exact, so any merge
// order gives the same answer as a left-to-right scan.
#define GPUKIT_NO_INDEX 0xffffffffu
struct ArgmaxPart {
    float value;
    unsigned int index;
};
__device__ __forceinline__ void argmax_merge(float& best, unsigned int& at, float v, unsigned int i) {
    if (i == GPUKIT_NO_INDEX) return;
    const bool v_nan = v != v, best_nan = best != best;
    const bool wins = at == GPUKIT_NO_INDEX || (v_nan && (!best_nan || i < at)) ||
                      (!best_nan && (v > best || (v == best && i < at)));
    if (wins) {
        best = v;
        at = i;
    }
}
// Whether p may be read as 16-byte vectors.
__device__ __forceinline__ bool aligned16(const void* p) {
    return ((unsigned long long)p & 15ull) == 0;
}

// Calls use(load(k), k) for k = first, first + stride, … < n, in that order, B loads at a time:
// every load of a batch is issued before the first use, so B loads are in flight per thread
// (branches in `use` otherwise keep the compiler from overlapping consecutive iterations' loads).
template <int B, typename Load, typename Use>
__device__ __forceinline__ void batched_scan(unsigned int first, unsigned int stride, unsigned int n, Load load,
                                             Use use) {
    using V = decltype(load(0u));
    for (unsigned long long i = first; i < n; i += (unsigned long long)B * stride) {
        V v[B];
#pragma unroll
        for (int j = 0; j < B; ++j) {
            const unsigned long long k = i + (unsigned long long)j * stride;
            if (k < n) v[j] = load((unsigned int)k);
        }
#pragma unroll
        for (int j = 0; j < B; ++j) {
            const unsigned long long k = i + (unsigned long long)j * stride;
            if (k < n) use(v[j], (unsigned int)k);
        }
    }
}
// Merges x[i] = load(i) for i = first, first + stride, … < n into (best, at), in that order, B
// loads in flight per thread (batched_scan).
template <int B, typename Load>
__device__ __forceinline__ void argmax_scan(float& best, unsigned int& at, unsigned int first,
                                            unsigned int stride, unsigned int n, Load load) {
    batched_scan<B>(first, stride, n, load, [&](float v, unsigned int i) { argmax_merge(best, at, v, i); });
}
// The warp's first maximum, in every lane (fixed butterfly).
__device__ __forceinline__ void warp_argmax(float& best, unsigned int& at) {
    for (int o = 16; o > 0; o >>= 1) {
        const float v = __shfl_xor_sync(0xffffffffu, best, o);
        const unsigned int i = __shfl_xor_sync(0xffffffffu, at, o);
        argmax_merge(best, at, v, i);
    }
}
