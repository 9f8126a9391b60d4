// Tensor-core attention pieces shared by the dense kernels (attention.cu) and the paged ones
// (paged.cu): the online-softmax state of a warp's 16 query rows, the QK/PV steps on
// mma.sync m16n8k16 over K/V tiles in shared memory, and the fixed-order merge of a decode
// block's four warps.
#pragma once
#include "common.cuh"

#define LOG2E 1.4426950408889634f

// 2^x by the special-function unit (flush-to-zero; 2^-inf = 0).
__device__ __forceinline__ float fast_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// Two floats as a packed pair of T (first in the low half), round to nearest even.
template <typename T> __device__ __forceinline__ unsigned pack2(float lo, float hi);
template <> __device__ __forceinline__ unsigned pack2<bf16>(float lo, float hi) {
    __nv_bfloat162 r = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<unsigned*>(&r);
}
template <> __device__ __forceinline__ unsigned pack2<f16>(float lo, float hi) {
    __half2 r = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<unsigned*>(&r);
}

// Four outputs o / l (0 where l is 0) at dst as T, in one 8-byte store (dst 8-byte aligned).
template <typename T> __device__ __forceinline__ void store_out4(T* dst, float4 o, float l) {
    const bool any = l > 0.0f;
    *reinterpret_cast<uint2*>(dst) = make_uint2(pack2<T>(any ? o.x / l : 0.0f, any ? o.y / l : 0.0f),
                                                pack2<T>(any ? o.z / l : 0.0f, any ? o.w / l : 0.0f));
}

// The two query rows a thread's fragments cover (g and g + 8 of its warp's 16).
struct Rows {
    int pos[2];       // query position (for the causal mask and ALiBi)
    float slope[2];   // ALiBi slope · log2(e), or 0
};

// One warp's running softmax state for its 16 rows: max and sum (log2 domain; l is this
// thread's partial over its columns until finish), and the output accumulator (16 × D).
template <int D> struct State {
    float m[2], l[2];
    float o[D / 8][4];
    __device__ __forceinline__ void init() {
        m[0] = m[1] = -GPUKIT_INF;
        l[0] = l[1] = 0.0f;
#pragma unroll
        for (int i = 0; i < D / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
    }
};

// The keys a query at position pos sees: [lo, hi] (none when hi < lo). Computed once per row,
// a key's test is then two compares without branches.
struct KeyRange {
    int lo, hi;
    __device__ __forceinline__ bool has(unsigned key) const { return (int)key >= lo && (int)key <= hi; }
};
__device__ __forceinline__ KeyRange visible_keys(const AttnArgs& a, int pos) {
    const int last = (int)a.kv_len - 1;
    if (!a.causal) return {0, last};
    const bool cut = a.window != 0 && pos >= 0 && (unsigned)pos >= a.window;
    return {cut ? pos - (int)a.window + 1 : 0, min(pos, last)};
}
__device__ __forceinline__ bool visible(const AttnArgs& a, unsigned key, int pos) {
    return visible_keys(a, pos).has(key);
}

// The online-softmax step for a thread's two rows, given their maxima over this thread's scores
// of the new tile (mx; in units of the scores, sc > 0 to the log2 domain): the maxima over the
// four threads of each row, the new running max m, the exponent base (0 while nothing is visible,
// to keep exp2 finite) and alpha, the factor that rescales the old sum and output.
__device__ __forceinline__ void softmax_rows(float (&mx)[2], float sc, float (&m)[2], float (&base)[2],
                                             float (&alpha)[2]) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
        const float mn = fmaxf(m[r], mx[r] * sc);
        base[r] = mn == -GPUKIT_INF ? 0.0f : mn;
        alpha[r] = fast_exp2(m[r] - base[r]);
        m[r] = mn;
    }
}

// Q fragments (A operands, 16 rows × 16 dims) of a warp's one m-tile, held in registers.
template <int D> struct QRegs {
    const unsigned (&qa)[D / 16][4];
    __device__ __forceinline__ void get(int, int kk, unsigned (&f)[4]) const {
        f[0] = qa[kk][0];
        f[1] = qa[kk][1];
        f[2] = qa[kk][2];
        f[3] = qa[kk][3];
    }
};

// Where (row, column) of a K or V tile lives in shared memory: rows of D + SDPA_TILE_PAD elements
// (the cp.async kernels; the pad keeps ldmatrix free of bank conflicts).
template <int D> struct PaddedKV {
    static __device__ __forceinline__ int at(int r, int c) { return r * (D + SDPA_TILE_PAD) + c; }
};

// Independent MMA accumulators the scores of a warp's tile are spread over, at least: where the
// warp's MT · NT fragments are fewer (decode: one m-tile, 16 keys), each fragment's sum over the
// head dimension alternates between ATTN_QK_CHAINS / (MT · NT) accumulators by 16-dim step, so
// the dependent chain of D / 16 MMAs is that many times shorter: two chains of four instead of
// one of eight at head_dim 128 made the decode ring 0.05–0.17 µs faster on the H200.
#ifndef ATTN_QK_CHAINS
#define ATTN_QK_CHAINS 4
#endif

// Attends one warp's MT m-tiles of 16 rows over NT·8 keys of the shared-memory tile starting at
// row kb (key index key0 + kb): scores on tensor cores (each K and V fragment loaded once for all
// MT tiles), mask (MASK: only tiles that need it) and ALiBi bias, online-softmax update, then
// P·V. Without ALiBi the row maximum is taken on the raw scores and the scale folds into the
// exponent's FMA (as FlashAttention-2 does).
template <typename T, int D, int NT, int MT, bool MASK, bool ALIBI, class KV, class QF>
__device__ __forceinline__ void attend_tiles(const QF& qf, const T* ks, const T* vs, int kb, unsigned key0,
                                             const Rows* rows, const AttnArgs& a, State<D>* st) {
    const int lane = threadIdx.x & 31, t = lane & 3;
    constexpr int CH = MT * NT >= ATTN_QK_CHAINS ? 1 : ATTN_QK_CHAINS / (MT * NT);
    float sc_acc[CH][MT][NT][4];
#pragma unroll
    for (int c = 0; c < CH; ++c)
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int j = 0; j < NT; ++j)
                sc_acc[c][mt][j][0] = sc_acc[c][mt][j][1] = sc_acc[c][mt][j][2] = sc_acc[c][mt][j][3] = 0.0f;
    // K fragments by ldmatrix: matrices (keys 8j.., d lo), (8j.., d hi), (8j+8.., lo), (8j+8.., hi).
    const int krow = kb + (lane & 7) + (lane >> 4) * 8, kcol = ((lane >> 3) & 1) * 8;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
        unsigned qa[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) qf.get(mt, kk, qa[mt]);
#pragma unroll
        for (int j = 0; j < NT; j += 2) {
            unsigned b0, b1, b2, b3;
            ldsm_x4(b0, b1, b2, b3, ks + KV::at(krow + 8 * j, 16 * kk + kcol));
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                mma16816<T>(sc_acc[kk % CH][mt][j], qa[mt], b0, b1);
                mma16816<T>(sc_acc[kk % CH][mt][j + 1], qa[mt], b2, b3);
            }
        }
    }
    // The chains' sums in a fixed order.
    float (&s)[MT][NT][4] = sc_acc[0];
#pragma unroll
    for (int c = 1; c < CH; ++c)
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int j = 0; j < NT; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) s[mt][j][e] += sc_acc[c][mt][j][e];
    // Scores are in the log2 domain with ALiBi, raw (scale still to apply, > 0) without.
    const float sc = ALIBI ? 1.0f : a.scale_log2;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
        float mx[2] = {-GPUKIT_INF, -GPUKIT_INF};
#pragma unroll
        for (int j = 0; j < NT; ++j) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int r = e >> 1;
                const unsigned key = key0 + kb + 8 * j + 2 * t + (e & 1);
                float v = s[mt][j][e];
                if (ALIBI) v = fmaf(v, a.scale_log2, rows[mt].slope[r] * (float)((int)key - rows[mt].pos[r]));
                if (MASK && !visible(a, key, rows[mt].pos[r])) v = -GPUKIT_INF;
                s[mt][j][e] = v;
                mx[r] = fmaxf(mx[r], v);
            }
        }
        float base[2], alpha[2], sum[2] = {0.0f, 0.0f};
        softmax_rows(mx, sc, st[mt].m, base, alpha);
#pragma unroll
        for (int j = 0; j < NT; ++j) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                s[mt][j][e] = fast_exp2(fmaf(s[mt][j][e], sc, -base[e >> 1]));
                sum[e >> 1] += s[mt][j][e];
            }
        }
#pragma unroll
        for (int r = 0; r < 2; ++r) st[mt].l[r] = st[mt].l[r] * alpha[r] + sum[r];
        // Once the running maxima settle, alpha is exactly 1 for every row of the warp: the
        // rescale would change nothing, so it is skipped.
        if (__any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f)) {
#pragma unroll
            for (int i = 0; i < D / 8; ++i) {
                st[mt].o[i][0] *= alpha[0];
                st[mt].o[i][1] *= alpha[0];
                st[mt].o[i][2] *= alpha[1];
                st[mt].o[i][3] *= alpha[1];
            }
        }
    }
#pragma unroll
    for (int c = 0; c < NT / 2; ++c) {
        unsigned pa[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
            pa[mt][0] = pack2<T>(s[mt][2 * c][0], s[mt][2 * c][1]);
            pa[mt][1] = pack2<T>(s[mt][2 * c][2], s[mt][2 * c][3]);
            pa[mt][2] = pack2<T>(s[mt][2 * c + 1][0], s[mt][2 * c + 1][1]);
            pa[mt][3] = pack2<T>(s[mt][2 * c + 1][2], s[mt][2 * c + 1][3]);
        }
        const int vr = kb + 16 * c + (lane & 7) + ((lane >> 3) & 1) * 8;
#pragma unroll
        for (int nd = 0; nd < D / 16; ++nd) {
            unsigned b0, b1, b2, b3;
            ldsm_x4_trans(b0, b1, b2, b3, vs + KV::at(vr, 16 * nd + (lane >> 4) * 8));
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                mma16816<T>(st[mt].o[2 * nd], pa[mt], b0, b1);
                mma16816<T>(st[mt].o[2 * nd + 1], pa[mt], b2, b3);
            }
        }
    }
}

// One m-tile with Q fragments in registers.
template <typename T, int D, int NT, bool MASK, bool ALIBI, class KV = PaddedKV<D>>
__device__ __forceinline__ void attend(const unsigned (&qa)[D / 16][4], const T* ks, const T* vs, int kb,
                                       unsigned key0, const Rows& rows, const AttnArgs& a, State<D>& st) {
    attend_tiles<T, D, NT, 1, MASK, ALIBI, KV>(QRegs<D>{qa}, ks, vs, kb, key0, &rows, a, &st);
}

// Sums each row's l over the four threads that share it (fixed order).
template <int D> __device__ __forceinline__ void finish_sum(State<D>& st) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        st.l[r] += __shfl_xor_sync(0xffffffffu, st.l[r], 1);
        st.l[r] += __shfl_xor_sync(0xffffffffu, st.l[r], 2);
    }
}

// Q fragments (A operand) of one row pair, straight from global memory; absent rows are zero.
template <typename T, int D>
__device__ __forceinline__ void load_q(unsigned (&qa)[D / 16][4], const T* r0, const T* r1) {
    const int t = threadIdx.x & 3;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
        const int c = 16 * kk + 2 * t;
        qa[kk][0] = r0 ? *reinterpret_cast<const unsigned*>(r0 + c) : 0u;
        qa[kk][1] = r1 ? *reinterpret_cast<const unsigned*>(r1 + c) : 0u;
        qa[kk][2] = r0 ? *reinterpret_cast<const unsigned*>(r0 + c + 8) : 0u;
        qa[kk][3] = r1 ? *reinterpret_cast<const unsigned*>(r1 + c + 8) : 0u;
    }
}

// How a warp's rows see a key tile [lo, hi]: 0 = not at all (skip), 1 = partly (mask), 2 = all.
__device__ __forceinline__ int tile_view(const AttnArgs& a, unsigned lo, unsigned hi, int pos_min, int pos_max) {
    if (a.causal) {
        if ((int)lo > pos_max) return 0;
        if (a.window && (int)hi + (int)a.window <= pos_min) return 0;
    }
    const bool all = hi < a.kv_len && (!a.causal || ((int)hi <= pos_min &&
                     (a.window == 0 || (int)lo + (int)a.window > pos_max)));
    return all ? 2 : 1;
}

// Warp `warp` of a decode block attends its 16 keys of the 64-key tile at key0 (masked only
// where some row sees the tile in part: with a causal mask, the last tile).
template <typename T, int D, class KV>
__device__ __forceinline__ void decode_attend(const unsigned (&qa)[D / 16][4], const T* ks, const T* vs, int warp,
                                              unsigned key0, const Rows& rows, const AttnArgs& a, State<D>& st) {
    const int shift = (int)a.kv_len - (int)a.q_len;
    const bool all = tile_view(a, key0, key0 + 63, shift, shift + (int)a.q_len - 1) == 2;
    if (a.alibi) {
        if (all) attend<T, D, 2, false, true, KV>(qa, ks, vs, 16 * warp, key0, rows, a, st);
        else attend<T, D, 2, true, true, KV>(qa, ks, vs, 16 * warp, key0, rows, a, st);
    } else {
        if (all) attend<T, D, 2, false, false, KV>(qa, ks, vs, 16 * warp, key0, rows, a, st);
        else attend<T, D, 2, true, false, KV>(qa, ks, vs, 16 * warp, key0, rows, a, st);
    }
}

// Merges the four warps (threads 0–127) of a decode block in a fixed order through shared
// memory at `red` (o as [warp][16 rows][D + SDPA_TILE_PAD] f32 — a row stride of 8 words mod 32 makes the
// float2 stores conflict-free — then each row's m and l per warp; the launch sizes it). Only the
// rows below nrows are stored. `sync()` synchronises the 128 threads; the first call lets the
// caller's last reads of whatever `red` overlaps finish. Then emit(r, c, o, m, l) runs once for
// every row r < nrows and every fourth column c, spread over the threads: o the four
// unnormalised outputs of columns c … c + 3, m the row's max (log2 domain), l its sum. Each
// thread weighs the four warps of its row itself (the same few exp2 in every thread of the row,
// so one barrier fewer than a pass that shares them), by the special-function unit's exp2 as
// the attention itself does (with the split merge's, 0.3–0.4 µs less a decode ring call).
template <int D, class Sync, class Emit>
__device__ __forceinline__ void merge_warps(State<D>& st, float* red, unsigned nrows, Sync sync, Emit emit) {
    constexpr int OS = D + SDPA_TILE_PAD, CV = D / 4;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    float* red_o = red;
    float* red_m = red_o + 64 * OS;
    float* red_l = red_m + 64;
    sync();
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        if (g + 8 * r >= (int)nrows) continue;
        const int row = warp * 16 + g + 8 * r;
        if (t == 0) {
            red_m[row] = st.m[r];
            red_l[row] = st.l[r];
        }
#pragma unroll
        for (int n = 0; n < D / 8; ++n)
            *reinterpret_cast<float2*>(red_o + row * OS + 8 * n + 2 * t) = make_float2(st.o[n][2 * r], st.o[n][2 * r + 1]);
    }
    sync();
    for (unsigned idx = threadIdx.x; idx < nrows * CV; idx += SDPA_THREADS) {
        const unsigned r = idx / CV, c = (idx % CV) * 4;
        float mm = -GPUKIT_INF;
#pragma unroll
        for (int w = 0; w < 4; ++w) mm = fmaxf(mm, red_m[w * 16 + r]);
        const float base = mm == -GPUKIT_INF ? 0.0f : mm;
        float l = 0.0f;
        float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
        for (int w = 0; w < 4; ++w) {
            const float f = fast_exp2(red_m[w * 16 + r] - base);
            l += red_l[w * 16 + r] * f;
            const float4 v = *reinterpret_cast<const float4*>(red_o + (w * 16 + r) * OS + c);
            o.x += v.x * f;
            o.y += v.y * f;
            o.z += v.z * f;
            o.w += v.w * f;
        }
        emit(r, c, o, mm, l);
    }
}
