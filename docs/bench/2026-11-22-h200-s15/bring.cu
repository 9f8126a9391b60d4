// Experiment: one block per SM, a producer warp fills a deep shared-memory ring with
// cp.async.bulk (one copy per stage of RPS whole rows), 8 consumer warps compute the rows with
// the persistent kernel's lane/warp/group arithmetic (bitwise the same sums).
#include "common.cuh"
#define MAXST 32
__device__ __forceinline__ unsigned sa(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mbar_init(unsigned long long* b, unsigned n) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(sa(b)), "r"(n) : "memory");
}
__device__ __forceinline__ void mbar_expect(unsigned long long* b, unsigned tx) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(sa(b)), "r"(tx) : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned long long* b) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(sa(b)) : "memory");
}
__device__ __forceinline__ void bulk_g2s(void* dst, const void* src, unsigned bytes, unsigned long long* b) {
#ifdef EVICT_FIRST
    asm volatile("{\n .reg .b64 pol;\n createpolicy.fractional.L2::evict_first.b64 pol, 1.0;\n"
                 " cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], pol;\n}"
                 ::"r"(sa(dst)), "l"(src), "r"(bytes), "r"(sa(b)) : "memory");
#else
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 ::"r"(sa(dst)), "l"(src), "r"(bytes), "r"(sa(b)) : "memory");
#endif
}
__device__ __forceinline__ void mbar_wait(unsigned long long* b, unsigned parity) {
#ifdef HINT
    asm volatile("{\n .reg .pred p;\n W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1, %2;\n @!p bra W;\n}"
                 ::"r"(sa(b)), "r"(parity), "n"(HINT) : "memory");
#else
    asm volatile("{\n .reg .pred p;\n W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra W;\n}"
                 ::"r"(sa(b)), "r"(parity) : "memory");
#endif
}
__device__ __forceinline__ void nbar(unsigned id, unsigned count) {
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}

#ifndef CW
#define CW 16
#endif
#ifndef UNR
#define UNR 4
#endif
template <typename T>
__device__ __forceinline__ void bring_impl(const T* __restrict__ x, const T* __restrict__ w,
        const T* __restrict__ bias, T* __restrict__ out, unsigned N, unsigned K, unsigned S,
        unsigned RPS, unsigned NST, unsigned PIECE) {
    extern __shared__ __align__(128) unsigned char smem[];
    __shared__ __align__(8) unsigned long long full[MAXST], empty[MAXST];
    __shared__ float slot[2][CW];
    __shared__ float slot2[2][CW];
    const unsigned warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const unsigned row_bytes = K * sizeof(T), stage_bytes = RPS * row_bytes;
    const unsigned stages = (N + RPS - 1) / RPS;
    const unsigned mine = blockIdx.x < stages ? (stages - 1 - blockIdx.x) / gridDim.x + 1 : 0;
    T* xs = reinterpret_cast<T*>(smem + NST * stage_bytes);
    if (threadIdx.x == 0) {
        for (unsigned i = 0; i < NST; ++i) { mbar_init(&full[i], 1); mbar_init(&empty[i], S); }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    }
    __syncthreads();
    if (warp == CW) {
        if (lane == 0) {
            for (unsigned t = 0; t < mine; ++t) {
                const unsigned s = t % NST;
                if (t >= NST) mbar_wait(&empty[s], ((t / NST) - 1) & 1);
                const unsigned long long r0 = (unsigned long long)(blockIdx.x + t * gridDim.x) * RPS;
                const unsigned nr = min((unsigned long long)RPS, N - r0);
                const unsigned bytes = nr * row_bytes;
                mbar_expect(&full[s], bytes);
                const unsigned char* src = reinterpret_cast<const unsigned char*>(w + r0 * K);
                for (unsigned o = 0; o < bytes; o += PIECE)
                    bulk_g2s(smem + s * stage_bytes + o, src + o, min(PIECE, bytes - o), &full[s]);
            }
        }
        return;
    }
    pdl_enter();
    const int V = Vec16<T>::N;
    for (unsigned i = threadIdx.x; i < K / V; i += CW * 32) store16(xs + i * V, load16(x + i * V));
    nbar(15, CW * 32);
    const unsigned G = CW / S, grp = warp / S, seg = warp % S;
    const unsigned step = S * 32 * V;
    unsigned it = 0;
#ifdef XREG
    // The lane's x packs, held across rows (at most XREG of them: K <= XREG * step).
    Pack<T> xv[XREG];
#pragma unroll
    for (int u = 0; u < XREG; ++u) {
        const unsigned k = (seg * 32 + lane) * V + u * step;
        if (k < K) xv[u] = load16(xs + k);
    }
#endif
    for (unsigned t = grp; grp < G && t < mine; t += G) {
        const unsigned s = t % NST;
#ifdef POLL1
        if (S > 1) {
            if (seg == 0) mbar_wait(&full[s], (t / NST) & 1);
            nbar(1 + grp, S * 32);
        } else {
            mbar_wait(&full[s], (t / NST) & 1);
        }
#else
        mbar_wait(&full[s], (t / NST) & 1);
#endif
        const unsigned long long r0 = (unsigned long long)(blockIdx.x + t * gridDim.x) * RPS;
        const unsigned nr = min((unsigned long long)RPS, N - r0);
        const unsigned char* buf = smem + s * stage_bytes;
#ifdef PAIR
        // Two rows at a time, interleaved: twice the independent load and FMA chains per warp.
        for (unsigned lj = 0; lj + 1 < nr; lj += 2) {
            const T* wa = reinterpret_cast<const T*>(buf + lj * row_bytes);
            const T* wb = reinterpret_cast<const T*>(buf + (lj + 1) * row_bytes);
            float acca = 0.0f, accb = 0.0f;
            Pack<T> va[XREG], vb[XREG];
#pragma unroll
            for (int u = 0; u < XREG; ++u) {
                const unsigned k = (seg * 32 + lane) * V + u * step;
                if (k < K) { va[u] = load16(wa + k); vb[u] = load16(wb + k); }
            }
#pragma unroll
            for (int u = 0; u < XREG; ++u) {
                const unsigned k = (seg * 32 + lane) * V + u * step;
                if (k < K) {
                    float sa = 0.0f, sb = 0.0f;
#pragma unroll
                    for (int j = 0; j < V; ++j) {
                        sa = fmaf(to_f32(xv[u].v[j]), to_f32(va[u].v[j]), sa);
                        sb = fmaf(to_f32(xv[u].v[j]), to_f32(vb[u].v[j]), sb);
                    }
                    acca += sa;
                    accb += sb;
                }
            }
            float a = warp_sum(acca), b = warp_sum(accb);
            if (S > 1) {
                if (lane == 0) { slot[it & 1][warp] = a; slot2[it & 1][warp] = b; }
                nbar(1 + grp, S * 32);
                if (seg == 0) {
                    a = 0.0f;
                    b = 0.0f;
                    for (unsigned j = 0; j < S; ++j) { a += slot[it & 1][grp * S + j]; b += slot2[it & 1][grp * S + j]; }
                }
            }
            if (seg == 0 && lane == 0) {
                const unsigned long long row = r0 + lj;
                out[row] = from_f32<T>(bias ? a + to_f32(bias[row]) : a);
                out[row + 1] = from_f32<T>(bias ? b + to_f32(bias[row + 1]) : b);
            }
            ++it;
        }
        for (unsigned lj = nr & ~1u; lj < nr; ++lj) {
#else
        for (unsigned lj = 0; lj < nr; ++lj) {
#endif
            const unsigned long long row = r0 + lj;
            const T* wr = reinterpret_cast<const T*>(buf + lj * row_bytes);
            float acc = 0.0f;
#ifdef XREG
            Pack<T> wv[XREG];
#pragma unroll
            for (int u = 0; u < XREG; ++u) {
                const unsigned k = (seg * 32 + lane) * V + u * step;
                if (k < K) wv[u] = load16(wr + k);
            }
#pragma unroll
            for (int u = 0; u < XREG; ++u) {
                const unsigned k = (seg * 32 + lane) * V + u * step;
                if (k < K) {
                    float sm = 0.0f;
#pragma unroll
                    for (int j = 0; j < V; ++j) sm = fmaf(to_f32(xv[u].v[j]), to_f32(wv[u].v[j]), sm);
                    acc += sm;
                }
            }
#else
            for (unsigned k0 = (seg * 32 + lane) * V; k0 < K; k0 += step * UNR) {
                Pack<T> wv[UNR], xv[UNR];
#pragma unroll
                for (int u = 0; u < UNR; ++u) {
                    const unsigned k = k0 + u * step;
                    if (k < K) { wv[u] = load16(wr + k); xv[u] = load16(xs + k); }
                }
#pragma unroll
                for (int u = 0; u < UNR; ++u) {
                    const unsigned k = k0 + u * step;
                    if (k < K) {
                        float sm = 0.0f;
#pragma unroll
                        for (int j = 0; j < V; ++j) sm = fmaf(to_f32(xv[u].v[j]), to_f32(wv[u].v[j]), sm);
                        acc += sm;
                    }
                }
            }
#endif
            float a = warp_sum(acc);
            if (S > 1) {
                if (lane == 0) slot[it & 1][warp] = a;
                nbar(1 + grp, S * 32);
                if (seg == 0) {
                    a = 0.0f;
                    for (unsigned j = 0; j < S; ++j) a += slot[it & 1][grp * S + j];
                }
            }
            if (seg == 0 && lane == 0) out[row] = from_f32<T>(bias ? a + to_f32(bias[row]) : a);
            ++it;
        }
        __syncwarp();
        if (lane == 0) mbar_arrive(&empty[s]);
    }
}
extern "C" __global__ void __launch_bounds__(CW * 32 + 32) gemv_bring_bf16(const bf16* x, const bf16* w,
        const bf16* bias, bf16* out, unsigned N, unsigned K, unsigned S, unsigned RPS, unsigned NST, unsigned PIECE) {
    bring_impl<bf16>(x, w, bias, out, N, K, S, RPS, NST, PIECE);
}

// Variant without a producer warp: CW2 consumer warps only (16 → ptxas may give 128 registers).
// Thread 0 fills the first NST stages before the PDL wait; afterwards the group that finished a
// stage refills its slot with the stage NST later (NST a multiple of G, so a slot always belongs
// to one group).
#ifndef CW2
#define CW2 16
#endif
#ifndef XREG2
#define XREG2 8
#endif
template <typename T>
__device__ __forceinline__ void bring2_impl(const T* __restrict__ x, const T* __restrict__ w,
        const T* __restrict__ bias, T* __restrict__ out, unsigned N, unsigned K, unsigned S,
        unsigned RPS, unsigned NST) {
    extern __shared__ __align__(128) unsigned char smem[];
    __shared__ __align__(8) unsigned long long full[MAXST];
    __shared__ float slot[2][CW2];
    const unsigned warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const unsigned row_bytes = K * sizeof(T), stage_bytes = RPS * row_bytes;
    const unsigned stages = (N + RPS - 1) / RPS;
    const unsigned mine = blockIdx.x < stages ? (stages - 1 - blockIdx.x) / gridDim.x + 1 : 0;
    T* xs = reinterpret_cast<T*>(smem + NST * stage_bytes);
    auto issue = [&](unsigned t) {
        const unsigned s = t % NST;
        const unsigned long long r0 = (unsigned long long)(blockIdx.x + t * gridDim.x) * RPS;
        const unsigned nr = min((unsigned long long)RPS, N - r0);
        const unsigned bytes = nr * row_bytes;
        mbar_expect(&full[s], bytes);
        bulk_g2s(smem + s * stage_bytes, w + r0 * K, bytes, &full[s]);
    };
    if (threadIdx.x == 0) {
        for (unsigned i = 0; i < NST; ++i) mbar_init(&full[i], 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        for (unsigned t = 0; t < NST && t < mine; ++t) issue(t);
    }
    __syncthreads();
    pdl_enter();
    const int V = Vec16<T>::N;
    for (unsigned i = threadIdx.x; i < K / V; i += CW2 * 32) store16(xs + i * V, load16(x + i * V));
    __syncthreads();
    const unsigned G = CW2 / S, grp = warp / S, seg = warp % S;
    const unsigned step = S * 32 * V;
    unsigned it = 0;
    Pack<T> xv[XREG2];
#pragma unroll
    for (int u = 0; u < XREG2; ++u) {
        const unsigned k = (seg * 32 + lane) * V + u * step;
        if (k < K) xv[u] = load16(xs + k);
    }
    for (unsigned t = grp; grp < G && t < mine; t += G) {
        const unsigned s = t % NST;
        mbar_wait(&full[s], (t / NST) & 1);
        const unsigned long long r0 = (unsigned long long)(blockIdx.x + t * gridDim.x) * RPS;
        const unsigned nr = min((unsigned long long)RPS, N - r0);
        const unsigned char* buf = smem + s * stage_bytes;
        for (unsigned lj = 0; lj < nr; ++lj) {
            const unsigned long long row = r0 + lj;
            const T* wr = reinterpret_cast<const T*>(buf + lj * row_bytes);
            float acc = 0.0f;
            Pack<T> wv[XREG2];
#pragma unroll
            for (int u = 0; u < XREG2; ++u) {
                const unsigned k = (seg * 32 + lane) * V + u * step;
                if (k < K) wv[u] = load16(wr + k);
            }
#pragma unroll
            for (int u = 0; u < XREG2; ++u) {
                const unsigned k = (seg * 32 + lane) * V + u * step;
                if (k < K) {
                    float sm = 0.0f;
#pragma unroll
                    for (int j = 0; j < V; ++j) sm = fmaf(to_f32(xv[u].v[j]), to_f32(wv[u].v[j]), sm);
                    acc += sm;
                }
            }
            float a = warp_sum(acc);
            if (S > 1) {
                if (lane == 0) slot[it & 1][warp] = a;
                nbar(1 + grp, S * 32);
                if (seg == 0) {
                    a = 0.0f;
                    for (unsigned j = 0; j < S; ++j) a += slot[it & 1][grp * S + j];
                }
            }
            if (seg == 0 && lane == 0) out[row] = from_f32<T>(bias ? a + to_f32(bias[row]) : a);
            ++it;
        }
        // Every warp of the group has read the stage (S > 1: the last row's barrier).
        __syncwarp();
        if (seg == 0 && lane == 0 && t + NST < mine) {
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            issue(t + NST);
        }
    }
}
extern "C" __global__ void __launch_bounds__(CW2 * 32) gemv_bring2_bf16(const bf16* x, const bf16* w,
        const bf16* bias, bf16* out, unsigned N, unsigned K, unsigned S, unsigned RPS, unsigned NST, unsigned PIECE) {
    bring2_impl<bf16>(x, w, bias, out, N, K, S, RPS, NST);
}
