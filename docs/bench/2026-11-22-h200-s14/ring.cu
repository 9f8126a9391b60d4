// Session 14 experiment (not part of the build): a per-warp cp.async.bulk ring GEMV, timed by
// ring_sweep.py against the persistent kernel; slower at every configuration (ring-sweep.txt).
#include "common.cuh"
#ifndef RING_D
#define RING_D 6
#endif
#ifndef PIECE
#define PIECE 2048
#endif
__device__ __forceinline__ unsigned sa(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mbar_init(unsigned long long* b, unsigned n) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(sa(b)), "r"(n) : "memory");
}
__device__ __forceinline__ void mbar_expect(unsigned long long* b, unsigned tx) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(sa(b)), "r"(tx) : "memory");
}
__device__ __forceinline__ void bulk_g2s(void* dst, const void* src, unsigned bytes, unsigned long long* b) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 ::"r"(sa(dst)), "l"(src), "r"(bytes), "r"(sa(b)) : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned long long* b, unsigned parity) {
    asm volatile("{\n .reg .pred p;\n W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra W;\n}"
                 ::"r"(sa(b)), "r"(parity) : "memory");
}
__device__ __forceinline__ void named_barrier(unsigned id, unsigned count) {
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}

template <typename T>
__device__ __forceinline__ void ring_impl(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
                                          T* __restrict__ out, unsigned N, unsigned K, unsigned S) {
    extern __shared__ __align__(128) unsigned char ring_smem[];
    __shared__ __align__(8) unsigned long long bar[8][RING_D];
    __shared__ float slot[2][8];
    const unsigned warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const unsigned gpb = 8 / S, grp = warp / S, seg = warp % S;
    unsigned char* ring = ring_smem + warp * RING_D * PIECE;
    const unsigned rowbytes = K * sizeof(T), segbytes = rowbytes / S;
    const unsigned ppu = (segbytes + PIECE - 1) / PIECE;
    const unsigned long long groups = (unsigned long long)gridDim.x * gpb;
    const unsigned long long u0 = (unsigned long long)blockIdx.x * gpb + grp;
    const unsigned long long mine = u0 < N ? (N - 1 - u0) / groups + 1 : 0;
    const unsigned long long total = mine * ppu;
    const unsigned char* wseg = reinterpret_cast<const unsigned char*>(w) + u0 * rowbytes + seg * segbytes;
    const unsigned long long ustride = groups * rowbytes;
    if (lane == 0) {
        for (int d = 0; d < RING_D; ++d) mbar_init(&bar[warp][d], 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        for (unsigned long long i = 0; i < total && i < RING_D; ++i) {
            const unsigned off = (unsigned)(i % ppu) * PIECE;
            const unsigned bytes = min((unsigned)PIECE, segbytes - off);
            mbar_expect(&bar[warp][i], bytes);
            bulk_g2s(ring + i * PIECE, wseg + (i / ppu) * ustride + off, bytes, &bar[warp][i]);
        }
    }
    __syncwarp();
    pdl_enter();
    const int V = Vec16<T>::N;
    float acc = 0.0f;
    unsigned st = 0, phase = 0, p = 0, it = 0;
    unsigned long long u = u0;
    for (unsigned long long i = 0; i < total; ++i) {
        mbar_wait(&bar[warp][st], phase);
        const unsigned off = p * PIECE;
        const unsigned nvec = min((unsigned)PIECE, segbytes - off) / 16;
        const T* xs = x + (seg * segbytes + off) / sizeof(T);
        const unsigned char* buf = ring + st * PIECE;
        for (unsigned v = lane; v < nvec; v += 32) {
            const Pack<T> wv = *reinterpret_cast<const Pack<T>*>(buf + v * 16);
            const Pack<T> xv = load16(xs + v * V);
            float s = 0.0f;
#pragma unroll
            for (int j = 0; j < V; ++j) s = fmaf(to_f32(xv.v[j]), to_f32(wv.v[j]), s);
            acc += s;
        }
        __syncwarp();
        if (lane == 0 && i + RING_D < total) {
            const unsigned long long n = i + RING_D;
            const unsigned o2 = (unsigned)(n % ppu) * PIECE;
            const unsigned bytes = min((unsigned)PIECE, segbytes - o2);
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            mbar_expect(&bar[warp][st], bytes);
            bulk_g2s(ring + st * PIECE, wseg + (n / ppu) * ustride + o2, bytes, &bar[warp][st]);
        }
        if (++st == RING_D) { st = 0; phase ^= 1; }
        if (++p == ppu) {
            p = 0;
            float a = warp_sum(acc);
            acc = 0.0f;
            if (S > 1) {
                if (lane == 0) slot[it & 1][warp] = a;
                named_barrier(1 + grp, S * 32);
                if (seg == 0) { a = 0.0f; for (unsigned j = 0; j < S; ++j) a += slot[it & 1][grp * S + j]; }
            }
            if (seg == 0 && lane == 0) out[u] = from_f32<T>(bias ? a + to_f32(bias[u]) : a);
            u += groups;
            ++it;
        }
    }
}
extern "C" __global__ void __launch_bounds__(256) gemv_ring_bf16(const bf16* x, const bf16* w, const bf16* bias, bf16* out,
                                                       unsigned N, unsigned K, unsigned S) {
    ring_impl<bf16>(x, w, bias, out, N, K, S);
}
