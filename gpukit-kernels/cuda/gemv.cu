// GEMV for the decode path: out[m, n] = sum_k x[m, k] * w[n, k] (+ bias[n]) for M <= 8 rows of
// x, weights stored [N, K] (a linear layer's natural layout). Memory-bound: every weight byte is
// read once; each lane issues UNROLL 16-byte weight loads before using any, so many loads are in
// flight, and x (small) is read through L1 or shared memory. Sums combine in fixed orders
// (warp_sum, then across a row's warps), so results are deterministic for a given shape.
//
// M ≤ 8 (`gemv_<dt>`, `_vec`): a 256-thread block computes R output columns, each by W = 8 / R
// warps that split K (R chosen on the host). `_vec` needs K % VEC == 0 and 16-byte aligned rows;
// the plain variant handles any K. `gemv_swiglu` fuses SwiGLU's gate and up projections with
// silu(gate)·up in the same scheme.
//
// One row of x (the decode step): gemv_units_impl below, a persistent grid of groups of S warps
// per output unit — `_vec_m1`; the pre-norm `gemv_norm` / `gemv_swiglu_norm` /
// `gemv_norm_argmax`, which first compute the residual add and RMSNorm of their input row
// themselves (the argmax variant also reduces the LM head's logits to one first maximum per
// block for greedy sampling); `gemv_norm_rope_kv`, the QKV projection with RoPE and the KV
// append as its epilogue. On Hopper, one row of x against a large matrix takes the bulk-copy
// ring `gemv_ring` instead (below). Every kernel here supports programmatic dependent launch:
// it prefetches its weights into L2, then waits for the previous kernel.
#include "common.cuh"

// A 16-byte weight load marked streaming (evict-first): weights are read once per step.
template <typename T> __device__ __forceinline__ Pack<T> load16_stream(const T* p) {
    uint4 r;
    asm("ld.global.cs.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
    return *reinterpret_cast<Pack<T>*>(&r);
}

// One weight row's dot products with the M rows of x, this warp's share of it: warp `wi` of the
// W warps splitting the row. MAXM: rows of x handled (1 for the single-row kernels, GEMV_MAX_M
// otherwise); UNROLL: 16-byte weight loads each lane issues before using any of them. Measured
// on an H100: 4 loads at ~53 registers (4 blocks per SM) stream faster than 8
// loads at 80+ registers (2-3 blocks per SM) — occupancy hides latency better than per-thread
// depth here.
template <typename T, bool VEC, int MAXM, int UNROLL>
__device__ __forceinline__ void row_dot(const T* __restrict__ x, const T* __restrict__ wr,
                                        unsigned int M, unsigned int K, unsigned int W,
                                        unsigned int wi, unsigned int lane, float* acc) {
    if (VEC) {
        const int V = Vec16<T>::N;
        const unsigned int step = W * 32 * V;
        for (unsigned int k0 = (wi * 32 + lane) * V; k0 < K; k0 += step * UNROLL) {
            Pack<T> wv[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                const unsigned int k = k0 + u * step;
                if (k < K) wv[u] = load16_stream(wr + k);
            }
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                const unsigned int k = k0 + u * step;
                if (k < K) {
                    float wf[V];
                    unpack_f32(wv[u], wf);
#pragma unroll
                    for (int m = 0; m < MAXM; ++m) {
                        if (m < (int)M) {
                            float xf[V];
                            unpack_f32(load16(x + (unsigned long long)m * K + k), xf);
                            float s = 0.0f;
#pragma unroll
                            for (int j = 0; j < V; ++j) s = fmaf(xf[j], wf[j], s);
                            acc[m] += s;
                        }
                    }
                }
            }
        }
    } else {
        for (unsigned int k = wi * 32 + lane; k < K; k += W * 32) {
            float wk = to_f32(wr[k]);
#pragma unroll
            for (int m = 0; m < MAXM; ++m)
                if (m < (int)M) acc[m] = fmaf(to_f32(x[(unsigned long long)m * K + k]), wk, acc[m]);
        }
    }
}

// A warp's share of the dot products of x with two weight rows at once (SwiGLU's gate and up
// rows, or the two rows RoPE rotates together): warp `wi` of the W warps splitting them, 2 ×
// UNROLL 16-byte loads in flight per lane, so a warp waits on memory half as many times as two
// row_dot calls would. Sums per 16-byte pack, as row_dot.
template <typename T, int UNROLL>
__device__ __forceinline__ void row_dot2(const T* __restrict__ x, const T* __restrict__ wa,
                                         const T* __restrict__ wb, unsigned int K, unsigned int W,
                                         unsigned int wi, unsigned int lane, float& a, float& b) {
    const int V = Vec16<T>::N;
    const unsigned int step = W * 32 * V;
    for (unsigned int k0 = (wi * 32 + lane) * V; k0 < K; k0 += step * UNROLL) {
        Pack<T> va[UNROLL], vb[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const unsigned int k = k0 + u * step;
            if (k < K) {
                va[u] = load16_stream(wa + k);
                vb[u] = load16_stream(wb + k);
            }
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const unsigned int k = k0 + u * step;
            if (k < K) {
                float xf[V], af[V], bf[V];
                unpack_f32(load16(x + k), xf);
                unpack_f32(va[u], af);
                unpack_f32(vb[u], bf);
                float sa = 0.0f, sb = 0.0f;
#pragma unroll
                for (int j = 0; j < V; ++j) {
                    sa = fmaf(xf[j], af[j], sa);
                    sb = fmaf(xf[j], bf[j], sb);
                }
                a += sa;
                b += sb;
            }
        }
    }
}

// Before waiting on the previous kernel (programmatic dependent launch), a block asks L2 for the
// weights its warps will read: they do not depend on that kernel, so streaming them overlaps
// its tail. The main loop then finds them in L2.
template <typename T>
__device__ __forceinline__ void row_prefetch(const T* __restrict__ wr, unsigned int K,
                                             unsigned int W, unsigned int wi, unsigned int lane) {
    const int V = Vec16<T>::N;
    for (unsigned int k = (wi * 32 + lane) * V; k < K; k += W * 32 * V) prefetch_l2(wr + k);
}

template <typename T, bool VEC, int MAXM, int UNROLL>
__device__ __forceinline__ void gemv_impl(const T* __restrict__ x, const T* __restrict__ w,
                                          const T* __restrict__ bias, T* __restrict__ out,
                                          unsigned int M, unsigned int N, unsigned int K,
                                          unsigned int R) {
    __shared__ float part[8][GEMV_MAX_M];
    const unsigned int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const unsigned int W = 8 / R;
    const unsigned int r = warp / W, wi = warp % W;
    const unsigned long long n = (unsigned long long)blockIdx.x * R + r;
    if (VEC && n < N) row_prefetch(w + n * K, K, W, wi, lane);
    pdl_enter();
    float acc[MAXM];
#pragma unroll
    for (int m = 0; m < MAXM; ++m) acc[m] = 0.0f;
    if (n < N) row_dot<T, VEC, MAXM, UNROLL>(x, w + n * K, M, K, W, wi, lane, acc);
#pragma unroll
    for (int m = 0; m < MAXM; ++m) {
        if (m < (int)M) {
            float s = warp_sum(acc[m]);
            if (lane == 0) part[warp][m] = s;
        }
    }
    __syncthreads();
    if (wi == 0 && lane < M && n < N) {
        float s = 0.0f;
        for (unsigned int j = 0; j < W; ++j) s += part[r * W + j][lane];
        if (bias) s += to_f32(bias[n]);
        out[(unsigned long long)lane * N + n] = from_f32<T>(s);
    }
}

// SwiGLU's gate/up projection for one row of x (the decode step): w is [2N, K], the gate's N rows
// then the up projection's; out[n] = silu(x·w[n]) · (x·w[N + n]) (Shazeer 2020, "GLU Variants
// Improve Transformer"), in f32 and rounded once. A block computes R outputs from 2R weight
// rows, 8 / (2R) warps per row; the sums combine in a fixed order (deterministic for a given R).
template <typename T>
__device__ __forceinline__ void gemv_swiglu_impl(const T* __restrict__ x, const T* __restrict__ w,
                                                 T* __restrict__ out, unsigned int N,
                                                 unsigned int K, unsigned int R) {
    __shared__ float part[8];
    const unsigned int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const unsigned int W = 8 / (2 * R);
    const unsigned int vr = warp / W, wi = warp % W;
    const unsigned long long n = (unsigned long long)blockIdx.x * R + vr / 2;
    const T* wr = w + ((vr & 1) ? N + n : n) * K;
    if (n < N) row_prefetch(wr, K, W, wi, lane);
    pdl_enter();
    float acc[1] = {0.0f};
    if (n < N) row_dot<T, true, 1, 4>(x, wr, 1, K, W, wi, lane, acc);
    const float s = warp_sum(acc[0]);
    if (lane == 0) part[warp] = s;
    __syncthreads();
    if (threadIdx.x < R) {
        const unsigned long long c = (unsigned long long)blockIdx.x * R + threadIdx.x;
        if (c < N) {
            float g = 0.0f, u = 0.0f;
            for (unsigned int j = 0; j < W; ++j) {
                g += part[2 * threadIdx.x * W + j];
                u += part[(2 * threadIdx.x + 1) * W + j];
            }
            out[c] = from_f32<T>(g / (1.0f + expf(-g)) * u);
        }
    }
}

// x = rms_norm(residual + pending) · g (Zhang & Sennrich 2019) into shared memory `xs` (K
// elements in 16-byte vectors; no pending: residual alone), with add_rms_norm's arithmetic
// (norm.cu: the sum rounded to the dtype, f32 sum of squares in the same order, rounded once).
// Block 0 also stores residual + pending to residual_out (the next residual stream). Every block
// computes the norm itself: K is a hidden size, a few KiB read from L2, so the step needs no
// separate norm kernel and no grid-wide barrier.
template <typename T>
__device__ __forceinline__ void rms_norm_prologue(const T* __restrict__ pending,
        const T* __restrict__ residual, const T* __restrict__ g, T* __restrict__ residual_out,
        float eps, unsigned int K, T* xs, float* scratch) {
    const int V = Vec16<T>::N;
    const unsigned int nvec = K / V;
    float ss = 0.0f;
    for (unsigned int i = threadIdx.x; i < nvec; i += blockDim.x) {
        Pack<T> p = load16(residual + i * V);
        if (pending) {
            const Pack<T> y = load16(pending + i * V);
#pragma unroll
            for (int j = 0; j < V; ++j) p.v[j] = from_f32<T>(to_f32(y.v[j]) + to_f32(p.v[j]));
            if (blockIdx.x == 0) store16(residual_out + i * V, p);
        }
#pragma unroll
        for (int j = 0; j < V; ++j) { const float f = to_f32(p.v[j]); ss += f * f; }
        store16(xs + i * V, p);
    }
    const float inv = rsqrtf(block_sum(ss, scratch) / (float)K + eps);
    for (unsigned int i = threadIdx.x; i < nvec; i += blockDim.x) {
        Pack<T> p = load16(xs + i * V);
        const Pack<T> wv = load16(g + i * V);
#pragma unroll
        for (int j = 0; j < V; ++j) p.v[j] = from_f32<T>(to_f32(p.v[j]) * inv * to_f32(wv.v[j]));
        store16(xs + i * V, p);
    }
    __syncthreads();
}

// The decode step's persistent GEMVs (one row of x). A grid of one wave (sized on the host from
// the occupancy) whose 256-thread blocks hold 8 / S groups of S warps; a group owns one output
// unit at a time and strides over the units, its S warps splitting the unit's weight rows (S
// from the row size: 2 KiB of a row per warp). The group's S partial sums meet in shared
// memory behind a named barrier of the group's warps alone (no block-wide barrier), so a
// group streams its next rows while others still reduce. Each output is the fixed-order sum of
// S fixed warp sums, whatever the grid size: deterministic on any device.
//
// A unit is, by EPI: GEMV_ROW, one weight row (out[n] = x·w[n] + bias[n]); GEMV_SWIGLU, the
// gate row n and up row N + n of a [2N, K] weight (out[n] = silu(x·w[n]) · (x·w[N + n]),
// Shazeer 2020); GEMV_ROPE_KV, two rows of one head of a fused QKV projection that RoPE rotates
// together (Su et al. 2021; pairs (i, i + half) or (2i, 2i + 1) by layout; the unrotated dims
// and the value heads in adjacent pairs): the queries go to out [nq, head_dim], the keys and
// values into the caches [nkv, max_len, head_dim] at row *pos — the QKV projection, RoPE and the
// KV append in one kernel, with rope_kv_append's arithmetic on the projection's rounded
// outputs. A position past the cache writes no cache row and sets bit 0 of *err. With
// swizzled != 0 the caches are laid out pre-swizzled (kv_col).
//
// NORM: x = rms_norm(residual + pending)·g computed by every block into shared memory first
// (rms_norm_prologue); else x is read from global memory. ARGMAX (the LM head with greedy
// sampling): each block also writes the first maximum of its outputs, as rounded to the dtype,
// to parts[blockIdx.x] for sample_argmax_parts.
#define GEMV_ROW 0
#define GEMV_SWIGLU 1
#define GEMV_ROPE_KV 2

template <typename T> struct RopeKvArgs {
    T* k_cache;
    T* v_cache;
    const int* pos;
    const float* inv_freq;
    float scale;
    unsigned int half;
    int layout;
    unsigned int nq, nkv, head_dim, max_len, swizzled;
    unsigned int* err;
};

// The weight rows of unit u (rb unused for GEMV_ROW) and, for GEMV_ROPE_KV, whether RoPE
// rotates them.
template <int EPI, typename T>
__device__ __forceinline__ void unit_rows(unsigned long long u, unsigned int N,
                                          const RopeKvArgs<T>& rk, unsigned long long& ra,
                                          unsigned long long& rb, bool& rotate) {
    rotate = false;
    if (EPI == GEMV_ROW) {
        ra = u;
        rb = u;
    } else if (EPI == GEMV_SWIGLU) {
        ra = u;
        rb = N + u;
    } else {
        // 32-bit: N < 2^32 rows (64-bit division would cost registers in the streaming loop).
        const unsigned int P = rk.head_dim / 2;
        const unsigned int h = (unsigned int)u / P;
        const unsigned int j = (unsigned int)u % P;
        unsigned int ia, ib;
        if (j < rk.half) {
            ia = rk.layout ? 2 * j : j;
            ib = rk.layout ? 2 * j + 1 : j + rk.half;
            rotate = h < rk.nq + rk.nkv;
        } else {
            ia = 2 * rk.half + 2 * (j - rk.half);
            ib = ia + 1;
        }
        ra = h * rk.head_dim + ia;
        rb = h * rk.head_dim + ib;
    }
}

template <typename T, int EPI, bool NORM, bool ARGMAX>
__device__ __forceinline__ void gemv_units_impl(const T* __restrict__ pending,
        const T* __restrict__ residual, const T* __restrict__ g, T* __restrict__ residual_out,
        float eps, const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
        T* __restrict__ out, unsigned int N, unsigned int K, unsigned int S,
        ArgmaxPart* __restrict__ parts, const RopeKvArgs<T> rk) {
    extern __shared__ __align__(16) unsigned char gemv_smem[];
    __shared__ float scratch[32];
    // GEMV_ROPE_KV: the scaled cosine and sine of each rotated pair's angle at *pos, computed
    // once per block before the loop (2·half ≤ head_dim ≤ 256): the trigonometry stays out of
    // the streaming loop's registers.
    __shared__ float2 rope_cs[EPI == GEMV_ROPE_KV ? 128 : 1];
    __shared__ float slot[2][2][8];
    __shared__ ArgmaxPart best[8];
    const unsigned int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const unsigned int groups_per_block = 8 / S, grp = warp / S, seg = warp % S;
    const unsigned long long units = EPI == GEMV_ROPE_KV ? N / 2 : N;
    const unsigned long long groups = (unsigned long long)gridDim.x * groups_per_block;
    unsigned long long u = (unsigned long long)blockIdx.x * groups_per_block + grp;
    unsigned long long ra, rb;
    bool rotate;
    if (u < units) {
        unit_rows<EPI>(u, N, rk, ra, rb, rotate);
        row_prefetch(w + ra * K, K, S, seg, lane);
        if (EPI != GEMV_ROW) row_prefetch(w + rb * K, K, S, seg, lane);
    }
    const T* xr = x;
    if (NORM) {
        pdl_wait();
        T* xs = reinterpret_cast<T*>(gemv_smem);
        rms_norm_prologue(pending, residual, g, residual_out, eps, K, xs, scratch);
        pdl_launch_dependents();
        xr = xs;
    } else {
        pdl_enter();
    }
    long long pos = 0;
    bool cache_ok = true;
    if (EPI == GEMV_ROPE_KV) {
        pos = (long long)*rk.pos;
        cache_ok = pos >= 0 && pos < (long long)rk.max_len;
        if (!cache_ok && blockIdx.x == 0 && threadIdx.x == 0) atomicOr(rk.err, 1u);
        for (unsigned int j = threadIdx.x; j < rk.half; j += blockDim.x) {
            const float angle = (float)pos * rk.inv_freq[j];
            rope_cs[j] = make_float2(cosf(angle) * rk.scale, sinf(angle) * rk.scale);
        }
        __syncthreads();
    }
    float bv = -GPUKIT_INF;
    unsigned int bi = GPUKIT_NO_INDEX;
    for (unsigned int it = 0; u < units; u += groups, ++it) {
        unit_rows<EPI>(u, N, rk, ra, rb, rotate);
        float a = 0.0f, b = 0.0f;
        if (EPI == GEMV_ROW) {
            float acc[1] = {0.0f};
            row_dot<T, true, 1, 4>(xr, w + ra * K, 1, K, S, seg, lane, acc);
            a = warp_sum(acc[0]);
        } else {
            row_dot2<T, 2>(xr, w + ra * K, w + rb * K, K, S, seg, lane, a, b);
            a = warp_sum(a);
            b = warp_sum(b);
        }
        if (S > 1) {
            if (lane == 0) {
                slot[it & 1][0][warp] = a;
                slot[it & 1][1][warp] = b;
            }
            named_barrier(1 + grp, S * 32);
            if (seg == 0) {
                a = 0.0f;
                b = 0.0f;
                for (unsigned int j = 0; j < S; ++j) {
                    a += slot[it & 1][0][grp * S + j];
                    b += slot[it & 1][1][grp * S + j];
                }
            }
        }
        if (seg != 0 || lane != 0) continue;
        if (EPI == GEMV_ROW) {
            const T o = from_f32<T>(bias ? a + to_f32(bias[ra]) : a);
            out[ra] = o;
            if (ARGMAX) argmax_merge(bv, bi, to_f32(o), (unsigned int)ra);
        } else if (EPI == GEMV_SWIGLU) {
            out[u] = from_f32<T>(a / (1.0f + expf(-a)) * b);
        } else {
            float x0 = to_f32(from_f32<T>(bias ? a + to_f32(bias[ra]) : a));
            float x1 = to_f32(from_f32<T>(bias ? b + to_f32(bias[rb]) : b));
            if (rotate) {
                const float2 cs = rope_cs[(unsigned int)u % (rk.head_dim / 2)];
                float r0, r1;
                rope_rotate(x0, x1, cs.x, cs.y, r0, r1);
                x0 = r0;
                x1 = r1;
            }
            const unsigned int h = (unsigned int)ra / rk.head_dim;
            unsigned int ia = (unsigned int)ra % rk.head_dim, ib = (unsigned int)rb % rk.head_dim;
            T* dst;
            if (h < rk.nq) {
                dst = out + (unsigned long long)h * rk.head_dim;
            } else if (!cache_ok) {
                continue;
            } else {
                const unsigned int kvh = h - rk.nq;  // keys, then values
                dst = (kvh < rk.nkv ? rk.k_cache : rk.v_cache) +
                      ((unsigned long long)(kvh < rk.nkv ? kvh : kvh - rk.nkv) * rk.max_len + pos) * rk.head_dim;
                ia = kv_col<T>(pos, ia, rk.head_dim, rk.swizzled);
                ib = kv_col<T>(pos, ib, rk.head_dim, rk.swizzled);
            }
            dst[ia] = from_f32<T>(x0);
            dst[ib] = from_f32<T>(x1);
        }
    }
    if (ARGMAX) {
        if (lane == 0) best[warp] = ArgmaxPart{bv, bi};
        __syncthreads();
        if (threadIdx.x == 0) {
            float b = best[0].value;
            unsigned int at = best[0].index;
            for (unsigned int i = 1; i < 8; ++i) argmax_merge(b, at, best[i].value, best[i].index);
            parts[blockIdx.x] = ArgmaxPart{b, at};
        }
    }
}

// One row of x on Hopper (sm_90+; `gemv_ring_<dt>_r<R>`), for weight matrices of 4 MiB or more:
// a grid of at most one block per multiprocessor (from 4 to 16 MiB, gemv::ring's
// small-matrix ring, two or three blocks fit on one, so the next launch's start beside them),
// whose producer warp streams whole weight rows into a shared-memory ring with bulk
// asynchronous copies (`cp.async.bulk`, completion counted on an mbarrier per stage) while
// GEMV_RING_WARPS consumer warps compute them — the shape of cuBLASLt's GEMV. A stage holds R consecutive rows (R a power of two ≤ 8). The consumers form
// G = GEMV_RING_WARPS / S groups of S warps; stage t of a block belongs to group t mod G,
// whose lanes split each row's 16-byte packs (x read once per pack for the R rows; the 4-row
// kernel holds a lane's packs of x in registers where there are at most two). Each thread
// releases a stage as soon as it has read it, and keeps its sums in registers for a batch of
// GEMV_RING_BATCH rows, which it then reduces at once: across the warp with a transposing
// butterfly, across the group through shared memory. Before the PDL wait the producer only asks
// L2 for its first npre stages (line by line, at the block's entry: overlaps the previous
// kernel's tail, and never reads data that kernel may still write, as copying into shared
// memory would); after the wait it copies x (one bulk copy, its own barrier: 0.9 µs faster at
// (K, N) = (14336, 4096) than the consumers loading it), then the stages. Sums combine in a
// fixed order: deterministic for a given (K, S, R).
#define GEMV_RING_THREADS (GEMV_RING_WARPS * 32 + 32)

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900

// The sums of R values per lane over the warp, transposed: lane l ends with the full sum of
// value l / (32 / R) (a fixed butterfly: R − 1 + 5 − log2 R shuffles instead of 5 R).
template <int R> __device__ __forceinline__ float warp_sum_rows(float (&v)[R], unsigned int lane) {
#pragma unroll
    for (int h = R / 2, o = 16; h >= 1; h /= 2, o /= 2) {
        const bool up = lane & o;
#pragma unroll
        for (int i = 0; i < h; ++i) {
            const float send = up ? v[i] : v[i + h];
            const float keep = up ? v[i + h] : v[i];
            v[i] = keep + __shfl_xor_sync(0xffffffffu, send, o);
        }
    }
    float r = v[0];
#pragma unroll
    for (int o = 16 / R; o >= 1; o /= 2) r += __shfl_xor_sync(0xffffffffu, r, o);
    return r;
}

// Rows a ring group sums before reducing them across its lanes and warps at once.
#define GEMV_RING_BATCH 8

// The ring's dot product of one 16-byte pack of x (widened: xf) with the same pack of a weight
// row, summed in element order (the ring's fixed order).
template <typename T>
__device__ __forceinline__ float ring_pack_dot(const float (&xf)[Vec16<T>::N], const Pack<T>& w) {
    float wf[Vec16<T>::N];
    unpack_f32(w, wf);
    float d = 0.0f;
#pragma unroll
    for (int e = 0; e < Vec16<T>::N; ++e) d = fmaf(xf[e], wf[e], d);
    return d;
}

// One warp's share of one stage: the dot products of x (`xs`, shared) with R rows of K elements
// at `buf`, lane packs li, li + step, … of each row, added into acc[0 … R − 1]. FULL: all R
// rows are there (else only nr, the matrix's last stage).
template <typename T, int R, bool FULL>
__device__ __forceinline__ void ring_rows(const T* __restrict__ xs, const unsigned char* buf,
                                          unsigned int nr, unsigned int K, unsigned int li,
                                          unsigned int step, float* acc) {
    const int V = Vec16<T>::N;
    // Packs each lane loads before using them: U of x and U · R of weights.
    const int U = R >= 4 ? 1 : 4 / R;
    const unsigned int packs = K / V;
    const T* wr = reinterpret_cast<const T*>(buf);
    unsigned int p = li;
    for (; p + (U - 1) * step < packs; p += U * step) {
        Pack<T> xv[U], wv[U][R];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            xv[u] = load16(xs + (p + u * step) * V);
#pragma unroll
            for (int j = 0; j < R; ++j)
                if (FULL || j < (int)nr) wv[u][j] = load16(wr + (size_t)j * K + (p + u * step) * V);
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            float xf[V];
            unpack_f32(xv[u], xf);
#pragma unroll
            for (int j = 0; j < R; ++j)
                if (FULL || j < (int)nr) acc[j] += ring_pack_dot<T>(xf, wv[u][j]);
        }
    }
    for (; p < packs; p += step) {
        float xf[V];
        unpack_f32(load16(xs + p * V), xf);
#pragma unroll
        for (int j = 0; j < R; ++j)
            if (FULL || j < (int)nr)
                acc[j] += ring_pack_dot<T>(xf, load16(wr + (size_t)j * K + p * V));
    }
}

// Packs of x a lane of the 4-row ring kernel holds in registers (ring_rows_xr).
#define GEMV_RING_XR 2

// ring_rows for a full stage with the lane's packs of x in registers: xr[u] is pack li + u ·
// step of x (the same packs for every stage), used where a row has at most GEMV_RING_XR · step
// packs. Each pack's R weight loads are issued together, and the sums are ring_rows' in its
// order, so the results are bitwise the same; what it saves is reading x out of shared memory
// again at every stage: at (K, N) = (896, 4864) ~22% of the consumers' shared-memory reads,
// and 3–4% of the call on an H200 and an H100.
template <typename T, int R>
__device__ __forceinline__ void ring_rows_xr(const Pack<T> (&xr)[GEMV_RING_XR],
                                             const unsigned char* buf, unsigned int K,
                                             unsigned int li, unsigned int step, float* acc) {
    const int V = Vec16<T>::N;
    const unsigned int packs = K / V;
    const T* wr = reinterpret_cast<const T*>(buf);
#pragma unroll
    for (int u = 0; u < GEMV_RING_XR; ++u) {
        const unsigned int p = li + u * step;
        if (p < packs) {
            Pack<T> wv[R];
#pragma unroll
            for (int j = 0; j < R; ++j) wv[j] = load16(wr + (size_t)j * K + p * V);
            float xf[V];
            unpack_f32(xr[u], xf);
#pragma unroll
            for (int j = 0; j < R; ++j) acc[j] += ring_pack_dot<T>(xf, wv[j]);
        }
    }
}

// The ring's static shared memory: its full and empty barriers, x's barrier and the batch
// partial sums. Declared once in the entry point (not per instantiation of gemv_ring_impl,
// which would give each R its own copy): 1032 bytes, and the ring (128-byte aligned) starts at
// 1152, as the launch rule assumes.
struct GemvRingShared {
    unsigned long long full[GEMV_RING_MAX_STAGES], empty[GEMV_RING_MAX_STAGES], x_full;
    float part[2][GEMV_RING_WARPS][GEMV_RING_BATCH];
};

template <typename T, int R>
__device__ __forceinline__ void gemv_ring_impl(const T* __restrict__ x, const T* __restrict__ w,
        const T* __restrict__ bias, T* __restrict__ out, unsigned int N, unsigned int K,
        unsigned int S, unsigned int nst, unsigned int npre, GemvRingShared& sh) {
    extern __shared__ __align__(128) unsigned char ring[];
    unsigned long long* full = sh.full;
    unsigned long long* empty = sh.empty;
    auto& part = sh.part;
    constexpr int NB = GEMV_RING_BATCH / R;  // stages per batch
    const unsigned int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const unsigned int G = GEMV_RING_WARPS / S, grp = warp / S, seg = warp % S;
    const unsigned int row_bytes = K * sizeof(T), stage_bytes = R * row_bytes;
    const unsigned int stages = N == 0 ? 0 : (N - 1) / R + 1;
    const unsigned int mine = blockIdx.x < stages ? (stages - 1 - blockIdx.x) / gridDim.x + 1 : 0;
    T* xs = reinterpret_cast<T*>(ring + nst * stage_bytes);
    if (warp == GEMV_RING_WARPS) {
        // Before the PDL wait only L2 prefetches of the first npre stages: they overlap the
        // previous kernel's tail, and cannot read data that kernel may still be writing (L2 is
        // where its writes land). The copies after the wait then hit L2. The producer warp's 32
        // lanes ask for the stages' 128-byte lines at the block's entry, before the barriers'
        // setup and the block barrier: 0.1–0.2 µs faster at the 32 MiB shapes on the H200 than
        // one bulk prefetch per stage after them (0.3 µs at (896, 4864) with one block an SM).
        for (unsigned int t = 0; t < mine && t < npre; ++t) {
            const unsigned long long r0 = (unsigned long long)(blockIdx.x + t * gridDim.x) * R;
            const unsigned int nr = (unsigned int)min((unsigned long long)R, N - r0);
            prefetch_l2_lines(nr * row_bytes, lane, w + r0 * K);
        }
    }
    if (threadIdx.x == 0) {
        for (unsigned int i = 0; i < nst; ++i) {
            mbar_init(&full[i], 1);
            mbar_init(&empty[i], S * 32);
        }
        mbar_init(&sh.x_full, 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    if (warp == GEMV_RING_WARPS) {
        // The producer: stage t into slot t mod nst once its previous use was released.
        if (lane == 0) {
            pdl_wait();
            // x first (one copy; the consumers need it for every stage), then the stages.
            bulk_load(xs, x, row_bytes, &sh.x_full);
            unsigned int s = 0, phase = 0;
            unsigned long long r0 = (unsigned long long)blockIdx.x * R;
            for (unsigned int t = 0; t < mine; ++t) {
                if (t >= nst) mbar_wait(&empty[s], phase ^ 1);
                const unsigned int nr = (unsigned int)min((unsigned long long)R, N - r0);
                bulk_load(ring + s * stage_bytes, w + r0 * K, nr * row_bytes, &full[s]);
                r0 += (unsigned long long)gridDim.x * R;
                ring_next(s, phase, nst);
            }
        }
        return;
    }
    pdl_wait();
    mbar_wait(&sh.x_full, 0);
    pdl_launch_dependents();
    // The 4-row kernel (the small ring's) keeps the lane's packs of x in registers where a row
    // has at most GEMV_RING_XR of them a lane; other R would gain nothing (their rows are
    // longer) and keep their registers.
    const unsigned int li = seg * 32 + lane, step = S * 32, packs = K / Vec16<T>::N;
    const bool xreg = R == 4 && packs <= GEMV_RING_XR * step;
    Pack<T> xr[GEMV_RING_XR];
#pragma unroll
    for (int u = 0; u < GEMV_RING_XR; ++u)
        if (xreg && li + u * step < packs) xr[u] = load16(xs + (li + u * step) * Vec16<T>::N);
    // Group grp takes stages grp, grp + G, …: with nst a multiple of G, slot t mod nst is always
    // its own, so waiting on its next phase is never ambiguous; with nst at least the block's
    // stages (gemv::ring's small ring, where they all fit) each slot is filled once.
    unsigned int s = grp, phase = 0, it = 0;
    for (unsigned int t = grp; t < mine; t += NB * G, ++it) {
        float acc[GEMV_RING_BATCH];
#pragma unroll
        for (int i = 0; i < GEMV_RING_BATCH; ++i) acc[i] = 0.0f;
#pragma unroll
        for (int b = 0; b < NB; ++b) {
            const unsigned int tb = t + b * G;
            if (tb < mine) {
                const unsigned long long r0 = (unsigned long long)(blockIdx.x + tb * gridDim.x) * R;
                const unsigned int nr = (unsigned int)min((unsigned long long)R, N - r0);
                mbar_wait(&full[s], phase);
                const unsigned char* buf = ring + s * stage_bytes;
                if (xreg && nr == R)
                    ring_rows_xr<T, R>(xr, buf, K, li, step, acc + b * R);
                else if (nr == R)
                    ring_rows<T, R, true>(xs, buf, R, K, li, step, acc + b * R);
                else
                    ring_rows<T, R, false>(xs, buf, nr, K, li, step, acc + b * R);
                // Every consumer thread releases the slot after its own reads (release
                // semantics), so the producer's next copy into it is ordered after all of them.
                mbar_arrive(&empty[s]);
                ring_next(s, phase, nst, G);
            }
        }
        // Lane l now holds row l / 4 of the batch, summed over the warp; then over the group.
        float a = warp_sum_rows<GEMV_RING_BATCH>(acc, lane);
        const unsigned int i = lane / (32 / GEMV_RING_BATCH);
        if (S > 1) {
            if (lane % (32 / GEMV_RING_BATCH) == 0) part[it & 1][warp][i] = a;
            named_barrier(1 + grp, S * 32);
            if (seg != 0 || lane >= GEMV_RING_BATCH) continue;
            a = 0.0f;
            for (unsigned int j = 0; j < S; ++j) a += part[it & 1][grp * S + j][lane];
        } else if (lane % (32 / GEMV_RING_BATCH) != 0) {
            continue;
        }
        // Batch row `row`: row % R of stage t + (row / R) · G.
        const unsigned int row = S > 1 ? lane : i;
        const unsigned int tb = t + row / R * G;
        const unsigned long long n = (unsigned long long)(blockIdx.x + tb * gridDim.x) * R + row % R;
        if (tb < mine && n < N) out[n] = from_f32<T>(bias ? a + to_f32(bias[n]) : a);
    }
}

#define GEMV_RING_BODY(T, R)                                                                       \
    __shared__ __align__(8) GemvRingShared sh;                                                     \
    gemv_ring_impl<T, R>(x, w, bias, out, N, K, S, nst, npre, sh);
#else
// Entry points exist in every image; only sm_90+ ones have a body (the launcher picks them only
// there).
#define GEMV_RING_BODY(T, R) __trap();
#endif

// One entry point per R, each holding only its own instantiation: one kernel switching over all
// four took the registers of the largest (142), while R ≤ 4 alone need at most 94 (ptxas: 63–68
// for R 1 and 2, 75–94 for R = 4, which keeps x in registers), so two of their blocks
// fit on a multiprocessor, as gemv::ring's small-matrix rings (R 2 or 4) ask (MINB = 2:
// the next launch's blocks start beside the previous launch's and ask L2 for their stages before
// it ends).
#define GEMV_RING_ENTRY(T, NAME, R, MINB)                                                          \
extern "C" __global__ void __launch_bounds__(GEMV_RING_THREADS, MINB) gemv_ring_##NAME##_r##R(     \
        const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,              \
        T* __restrict__ out, unsigned int N, unsigned int K, unsigned int S, unsigned int nst,     \
        unsigned int npre) {                                                                       \
    GEMV_RING_BODY(T, R)                                                                           \
}

#define GEMV_KERNELS(T, NAME)                                                                      \
extern "C" __global__ void gemv_##NAME(const T* __restrict__ x, const T* __restrict__ w,           \
        const T* __restrict__ bias, T* __restrict__ out, unsigned int M, unsigned int N,           \
        unsigned int K, unsigned int R) {                                                          \
    gemv_impl<T, false, GEMV_MAX_M, 1>(x, w, bias, out, M, N, K, R);                               \
}                                                                                                  \
extern "C" __global__ void gemv_##NAME##_vec(const T* __restrict__ x, const T* __restrict__ w,     \
        const T* __restrict__ bias, T* __restrict__ out, unsigned int M, unsigned int N,           \
        unsigned int K, unsigned int R) {                                                          \
    gemv_impl<T, true, GEMV_MAX_M, 4>(x, w, bias, out, M, N, K, R);                                \
}                                                                                                  \
/* M = 1 (decode): the persistent kernel; S warps per row, grid from the occupancy.   */           \
extern "C" __global__ void __launch_bounds__(256, 4) gemv_##NAME##_vec_m1(const T* __restrict__ x,    \
        const T* __restrict__ w, const T* __restrict__ bias, T* __restrict__ out,                  \
        unsigned int N, unsigned int K, unsigned int S) {                                          \
    gemv_units_impl<T, GEMV_ROW, false, false>(nullptr, nullptr, nullptr, nullptr, 0.0f, x, w,     \
                                               bias, out, N, K, S, nullptr, RopeKvArgs<T>{});     \
}                                                                                                  \
/* M = 1 on sm_90+: the bulk-copy ring, R rows per stage in the name (…, N, K, S warps per    */ \
/* group, ring stages, stages prefetched into L2 before the PDL wait). Dynamic shared memory:  */ \
/* stages · R · K + K elements.                                                                */ \
GEMV_RING_ENTRY(T, NAME, 1, 2)                                                                     \
GEMV_RING_ENTRY(T, NAME, 2, 2)                                                                     \
GEMV_RING_ENTRY(T, NAME, 4, 2)                                                                     \
GEMV_RING_ENTRY(T, NAME, 8, 1)                                                                     \
/* x [1, K] (16-byte aligned, K a multiple of 16 bytes), w [2N, K]: out [1, N].   */             \
extern "C" __global__ void gemv_swiglu_##NAME(const T* __restrict__ x, const T* __restrict__ w,    \
        T* __restrict__ out, unsigned int N, unsigned int K, unsigned int R) {                     \
    gemv_swiglu_impl<T>(x, w, out, N, K, R);                                                       \
}                                                                                                  \
/* Pre-norm variants (dynamic shared memory: K elements). pending may be null.        */           \
extern "C" __global__ void __launch_bounds__(256, 4) gemv_norm_##NAME(const T* pending,               \
        const T* residual, const T* g, T* residual_out, float eps, const T* w, const T* bias,      \
        T* out, unsigned int N, unsigned int K, unsigned int S) {                                  \
    gemv_units_impl<T, GEMV_ROW, true, false>(pending, residual, g, residual_out, eps, nullptr,    \
                                              w, bias, out, N, K, S, nullptr, RopeKvArgs<T>{});   \
}                                                                                                  \
extern "C" __global__ void __launch_bounds__(256, 4) gemv_norm_argmax_##NAME(const T* pending,        \
        const T* residual, const T* g, T* residual_out, float eps, const T* w, const T* bias,      \
        T* out, unsigned int N, unsigned int K, unsigned int S, ArgmaxPart* parts) {               \
    gemv_units_impl<T, GEMV_ROW, true, true>(pending, residual, g, residual_out, eps, nullptr, w,  \
                                             bias, out, N, K, S, parts, RopeKvArgs<T>{});         \
}                                                                                                  \
extern "C" __global__ void __launch_bounds__(256, 4) gemv_swiglu_norm_##NAME(const T* pending,        \
        const T* residual, const T* g, T* residual_out, float eps, const T* w, T* out,             \
        unsigned int N, unsigned int K, unsigned int S) {                                          \
    gemv_units_impl<T, GEMV_SWIGLU, true, false>(pending, residual, g, residual_out, eps, nullptr, \
                                                 w, nullptr, out, N, K, S, nullptr,               \
                                                 RopeKvArgs<T>{});                                 \
}                                                                                                  \
/* QKV projection + RoPE + KV append: w [(nq + 2 nkv)·head_dim, K], q_out [nq, head_dim].   */      \
extern "C" __global__ void __launch_bounds__(256, 4) gemv_norm_rope_kv_##NAME(const T* pending,       \
        const T* residual, const T* g, T* residual_out, float eps, const T* w, const T* bias,      \
        T* q_out, unsigned int N, unsigned int K, unsigned int S, T* k_cache, T* v_cache,          \
        const int* pos, const float* inv_freq, float scale, unsigned int half, int layout,         \
        unsigned int nq, unsigned int nkv, unsigned int head_dim, unsigned int max_len,            \
        unsigned int swizzled, unsigned int* err) {                                                \
    gemv_units_impl<T, GEMV_ROPE_KV, true, false>(pending, residual, g, residual_out, eps,         \
            nullptr, w, bias, q_out, N, K, S, nullptr,                                             \
            RopeKvArgs<T>{k_cache, v_cache, pos, inv_freq, scale, half, layout, nq, nkv,           \
                          head_dim, max_len, swizzled, err});                                      \
}

GEMV_KERNELS(float, f32)
GEMV_KERNELS(f16, f16)
GEMV_KERNELS(bf16, bf16)
