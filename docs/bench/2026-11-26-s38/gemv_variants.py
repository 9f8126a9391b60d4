#!/usr/bin/env python3
"""Session 38: copies of gemv.cu for probe.cu (docs/bench/2026-11-25-h200-s23).

main      gemv.cu as it is
timeline  main, recording per block (%globaltimer, ns; plain stores, no atomics) its producer's
          PDL wait returning, each stage's bulk copy issued (producer), seen landed and released
          by its group's first warp (lane 0; the release stamp waits on that lane's sums), and
          each group's end after its last store, into g_tl (probe.cu -DPROBE_TIMELINE prints them)
cvt       main with ring_rows widening each bf16 pack as four 32-bit words (low half: a shift; high
          half: a mask) instead of element by element (ptxas: a byte permute and a shift for each
          high half); the same f32 values, so the same sums bit for bit (gemv.cu before it
          became unpack_f32 in common.cuh)
mma       full stages of R >= 2 rows summed on the tensor cores: the R rows, each cut into
          P = 16 / R segments (32-element run r of a row in segment r mod P), are the 16 rows of
          an m16n8k16 A operand, x's runs the columns of B (column n: segment n mod P), so
          D[i][i mod 8] is row i's segment sum; 2 MMAs per 16 bytes a lane of two rows, 4
          accumulator chains (-DMMA_U=…, default 2: 4 spills at R 2 and 4 with two blocks an SM); K a multiple of 512 / R (else, and for the last partial stage
          and f32, the FMA path)
stagger   the producer copies its first STAGGER (-D…, default 2) stages after the PDL wait, and
          the rest of its first ring only once the first has landed: each block has less in
          flight at the start, so blocks whose wait returns later are not queued behind every
          other block's whole ring (call 1's timelines: their first stages landed ~2.5 µs after
          the median block's)
elem      after that change: gemv.cu's bf16 packs widened element by element again, as before it
          (its calls of unpack_f32 go to an element-wise copy)

Usage: gemv_variants.py SRC OUTDIR  ->  OUTDIR/gemv_<name>.cu for each variant."""
import sys

src, outdir = sys.argv[1], sys.argv[2]
base = open(src).read()


def sub(text, old, new):
    assert text.count(old) == 1, (old, text.count(old))
    return text.replace(old, new)


def timeline(t):
    # Declared outside the sm_90+ block, so the probe's host pass sees it too.
    t = sub(t, "#define GEMV_RING_THREADS (GEMV_RING_WARPS * 32 + 32)\n",
            "#define GEMV_RING_THREADS (GEMV_RING_WARPS * 32 + 32)\n"
            "#define TL_BLOCKS 264\n#define TL_STAGES 64\n"
            "// [block][0 issued, 1 landed, 2 released][stage]; [block][3][0] wait, [3][1 + g] group g's end\n"
            "__device__ unsigned long long g_tl[TL_BLOCKS][4][TL_STAGES];\n")
    t = sub(t, """template <typename T, int R>
__device__ __forceinline__ void gemv_ring_impl(""", """__device__ __forceinline__ unsigned long long now_ns() {
    unsigned long long v;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(v));
    return v;
}
// The same, after `f` is computed.
__device__ __forceinline__ unsigned long long now_ns_after(float f) {
    unsigned long long v;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(v) : "f"(f));
    return v;
}
template <typename T, int R>
__device__ __forceinline__ void gemv_ring_impl(""")
    t = sub(t, """        if (lane == 0) {
            pdl_wait();
""", """        if (lane == 0) {
            pdl_wait();
            if (blockIdx.x < TL_BLOCKS) g_tl[blockIdx.x][3][0] = now_ns();
""")
    t = sub(t, """                bulk_load(ring + s * stage_bytes, w + r0 * K, nr * row_bytes, &full[s]);
                r0 += (unsigned long long)gridDim.x * R;
""", """                bulk_load(ring + s * stage_bytes, w + r0 * K, nr * row_bytes, &full[s]);
                if (blockIdx.x < TL_BLOCKS && t < TL_STAGES) g_tl[blockIdx.x][0][t] = now_ns();
                r0 += (unsigned long long)gridDim.x * R;
""")
    t = sub(t, """                mbar_wait(&full[s], phase);
                const unsigned char* buf = ring + s * stage_bytes;
""", """                mbar_wait(&full[s], phase);
                const bool tl = seg == 0 && lane == 0 && blockIdx.x < TL_BLOCKS && tb < TL_STAGES;
                if (tl) g_tl[blockIdx.x][1][tb] = now_ns();
                const unsigned char* buf = ring + s * stage_bytes;
""")
    t = sub(t, """                mbar_arrive(&empty[s]);
                ring_next(s, phase, nst, G);
""", """                if (tl) g_tl[blockIdx.x][2][tb] = now_ns_after(acc[b * R] + acc[b * R + R - 1]);
                mbar_arrive(&empty[s]);
                ring_next(s, phase, nst, G);
""")
    return sub(t, """        if (tb < mine && n < N) out[n] = from_f32<T>(bias ? a + to_f32(bias[n]) : a);
    }
}
""", """        if (tb < mine && n < N) out[n] = from_f32<T>(bias ? a + to_f32(bias[n]) : a);
        if (seg == 0 && lane == 0 && blockIdx.x < TL_BLOCKS) g_tl[blockIdx.x][3][1 + grp] = now_ns_after(a);
    }
}
""")


CVT_HELPER = """// A pack of T as V f32 values; for bf16 two instructions a 32-bit word (a shift for the low
// half, a mask for the high) instead of three.
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

"""


def cvt(t):
    t = sub(t, """// One warp's share of one stage:""", CVT_HELPER + """// One warp's share of one stage:""")
    t = sub(t, """            float xf[V];
#pragma unroll
            for (int e = 0; e < V; ++e) xf[e] = to_f32(xv[u].v[e]);
#pragma unroll
            for (int j = 0; j < R; ++j) {
                if (FULL || j < (int)nr) {
                    float d = 0.0f;
#pragma unroll
                    for (int e = 0; e < V; ++e) d = fmaf(xf[e], to_f32(wv[u][j].v[e]), d);""", """            float xf[V];
            unpack_f32(xv[u], xf);
#pragma unroll
            for (int j = 0; j < R; ++j) {
                if (FULL || j < (int)nr) {
                    float wf[V];
                    unpack_f32(wv[u][j], wf);
                    float d = 0.0f;
#pragma unroll
                    for (int e = 0; e < V; ++e) d = fmaf(xf[e], wf[e], d);""")
    return sub(t, """        const Pack<T> xv = load16(xs + p * V);
#pragma unroll
        for (int j = 0; j < R; ++j) {
            if (FULL || j < (int)nr) {
                const Pack<T> wv = load16(wr + (size_t)j * K + p * V);
                float d = 0.0f;
#pragma unroll
                for (int e = 0; e < V; ++e) d = fmaf(to_f32(xv.v[e]), to_f32(wv.v[e]), d);""", """        float xf[V];
        unpack_f32(load16(xs + p * V), xf);
#pragma unroll
        for (int j = 0; j < R; ++j) {
            if (FULL || j < (int)nr) {
                float wf[V];
                unpack_f32(load16(wr + (size_t)j * K + p * V), wf);
                float d = 0.0f;
#pragma unroll
                for (int e = 0; e < V; ++e) d = fmaf(xf[e], wf[e], d);""")


def elem(t):
    # gemv.cu's calls of common.cuh's unpack_f32 go to an element-by-element copy.
    t = t.replace("unpack_f32(", "unpack_f32_elem(")
    return sub(t, """#include "common.cuh"
""", """#include "common.cuh"

template <typename T>
__device__ __forceinline__ void unpack_f32_elem(const Pack<T>& p, float (&f)[Vec16<T>::N]) {
#pragma unroll
    for (int e = 0; e < Vec16<T>::N; ++e) f[e] = to_f32(p.v[e]);
}
""")


MMA_FN = """// One warp's share of a full stage on the tensor cores (mma variant; see gemv_variants.py).
template <typename T, int R>
__device__ __forceinline__ void ring_rows_mma(const T* __restrict__ xs, const unsigned char* buf,
                                              unsigned int K, unsigned int seg, unsigned int S,
                                              unsigned int lane, float* acc) {
    if constexpr (sizeof(T) == 2 && R >= 2) {
        constexpr int P = 16 / R, STEP = P * 32;
#ifndef MMA_U
#define MMA_U 2
#endif
        constexpr int U = MMA_U;
        const unsigned int g = lane >> 2, t = lane & 3;
        const unsigned int ra = g / P, rb = R / 2 + g / P;
        const unsigned int off = (g % P) * 32 + t * 8;
        const T* w = reinterpret_cast<const T*>(buf);
        const T* wa = w + (size_t)ra * K + off;
        const T* wb = w + (size_t)rb * K + off;
        const T* xr = xs + off;
        const unsigned int steps = K / STEP;
        float c[U][4];
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
            for (int i = 0; i < 4; ++i) c[u][i] = 0.0f;
        unsigned int st = seg;
        for (; st + (U - 1) * S < steps; st += U * S) {
            uint4 va[U], vb[U], vx[U];
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const size_t at = (size_t)(st + u * S) * STEP;
                va[u] = *reinterpret_cast<const uint4*>(wa + at);
                vb[u] = *reinterpret_cast<const uint4*>(wb + at);
                vx[u] = *reinterpret_cast<const uint4*>(xr + at);
            }
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const unsigned a0[4] = {va[u].x, vb[u].x, va[u].y, vb[u].y};
                mma16816<T>(c[u], a0, vx[u].x, vx[u].y);
                const unsigned a1[4] = {va[u].z, vb[u].z, va[u].w, vb[u].w};
                mma16816<T>(c[u], a1, vx[u].z, vx[u].w);
            }
        }
        for (; st < steps; st += S) {
            const size_t at = (size_t)st * STEP;
            const uint4 a = *reinterpret_cast<const uint4*>(wa + at);
            const uint4 b = *reinterpret_cast<const uint4*>(wb + at);
            const uint4 x = *reinterpret_cast<const uint4*>(xr + at);
            const unsigned a0[4] = {a.x, b.x, a.y, b.y};
            mma16816<T>(c[0], a0, x.x, x.y);
            const unsigned a1[4] = {a.z, b.z, a.w, b.w};
            mma16816<T>(c[0], a1, x.z, x.w);
        }
        // Lane (g, g / 2) holds D[g][g] (row ra) in c[u][g & 1], D[g + 8][g] (row rb) in
        // c[u][2 + (g & 1)]; the other lanes add nothing.
        if (t == g / 2) {
            float da = 0.0f, db = 0.0f;
#pragma unroll
            for (int u = 0; u < U; ++u) {
                da += (g & 1) ? c[u][1] : c[u][0];
                db += (g & 1) ? c[u][3] : c[u][2];
            }
#pragma unroll
            for (int j = 0; j < R; ++j) acc[j] += j == (int)ra ? da : (j == (int)rb ? db : 0.0f);
        }
    }
}

"""


def mma(t):
    t = sub(t, """// The ring's static shared memory:""", MMA_FN + """// The ring's static shared memory:""")
    return sub(t, """                if (nr == R)
                    ring_rows<T, R, true>(xs, buf, R, K, seg * 32 + lane, S * 32, acc + b * R);""",
               """                if (nr == R && sizeof(T) == 2 && R >= 2 && K % (512 / R) == 0)
                    ring_rows_mma<T, R>(xs, buf, K, seg, S, lane, acc + b * R);
                else if (nr == R)
                    ring_rows<T, R, true>(xs, buf, R, K, seg * 32 + lane, S * 32, acc + b * R);""")


def stagger(t):
    return sub(t, """            for (unsigned int t = 0; t < mine; ++t) {
                if (t >= nst) mbar_wait(&empty[s], phase ^ 1);""", """#ifndef STAGGER
#define STAGGER 2
#endif
            for (unsigned int t = 0; t < mine; ++t) {
                if (t >= nst) mbar_wait(&empty[s], phase ^ 1);
                if (t == STAGGER && t < nst) mbar_wait(&full[0], 0);""")


variants = {"main": base, "timeline": timeline(base)}
if "unpack_f32(" in base:
    variants.update({"elem": elem(base), "mma": mma(base), "mmaline": timeline(mma(base)),
                     "stagger": stagger(base), "staggerline": timeline(stagger(base))})
else:
    variants.update({"cvt": cvt(base), "cvtline": timeline(cvt(base))})
for name, text in variants.items():
    open(f"{outdir}/gemv_{name}.cu", "w").write(text)
    print(name)
