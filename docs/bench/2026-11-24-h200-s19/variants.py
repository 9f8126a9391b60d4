#!/usr/bin/env python3
"""Writes patched copies of gemv.cu for gemv_probe.cu (session 19; timing only, not kept).

"nox" (the consumers skip loading x; probe 1) became the kept change: the producer copies x.
Probes 4-6 ran "main" with mma-consumer.diff applied (and "fma" = that diff with use_mma false).

Usage: variants.py SRC OUTDIR  ->  OUTDIR/gemv_<name>.cu for each variant."""
import sys

src, outdir = sys.argv[1], sys.argv[2]
base = open(src).read()
a = base.index("__device__ __forceinline__ void gemv_ring_impl")
b = base.index("#define GEMV_RING_BODY")
head, ring, tail = base[:a], base[a:b], base[b:]


def sub(text, old, new, count=1):
    assert text.count(old) == count, (old, text.count(old))
    return text.replace(old, new)


variants = {"main": ring}
# Consumers do not compute: they wait for each stage and release it (reductions stay).
variants["nocompute"] = sub(ring, """                if (nr == R)
                    ring_rows<T, R, true>(xs, buf, R, K, seg * 32 + lane, S * 32, acc + b * R);
                else
                    ring_rows<T, R, false>(xs, buf, nr, K, seg * 32 + lane, S * 32, acc + b * R);
""", """                acc[b * R] += (float)buf[threadIdx.x];
""")
# Compute only where tb + 4 < mine (skip the block's last ring of stages), or only there.
rows_call = """                if (nr == R)
                    ring_rows<T, R, true>(xs, buf, R, K, seg * 32 + lane, S * 32, acc + b * R);
                else
                    ring_rows<T, R, false>(xs, buf, nr, K, seg * 32 + lane, S * 32, acc + b * R);
"""
for name, cond in (("notail", "tb + 4 < mine"), ("nohead", "tb + 4 >= mine")):
    variants[name] = sub(ring, rows_call, "                if (" + cond + ") {\n" + rows_call
                         + "                } else {\n                    acc[b * R] += (float)buf[threadIdx.x];\n                }\n")
# Prefetch at most 4 stages before the wait, whatever the ring's length.
variants["pre4"] = sub(ring, "for (unsigned int t = 0; t < mine && t < nst; ++t) {",
                       "for (unsigned int t = 0; t < mine && t < nst && t < 4; ++t) {")
# Every thread lets the next kernel launch at entry.
variants["earlygo"] = sub(ring, """    T* xs = reinterpret_cast<T*>(ring + nst * stage_bytes);
""", """    T* xs = reinterpret_cast<T*>(ring + nst * stage_bytes);
    pdl_launch_dependents();
""")
# Each block takes a contiguous run of stages instead of every gridDim-th one.
c = sub(ring, "const unsigned int mine = blockIdx.x < stages ? (stages - 1 - blockIdx.x) / gridDim.x + 1 : 0;",
        "const unsigned int lo_s = (unsigned long long)blockIdx.x * stages / gridDim.x, "
        "mine = (unsigned long long)(blockIdx.x + 1) * stages / gridDim.x - lo_s;")
c = sub(c, "(blockIdx.x + t * gridDim.x)", "(lo_s + t)")
c = sub(c, "(blockIdx.x + tb * gridDim.x)", "(lo_s + tb)", 2)
c = sub(c, "unsigned long long r0 = (unsigned long long)blockIdx.x * R;", "unsigned long long r0 = (unsigned long long)lo_s * R;")
c = sub(c, "r0 += (unsigned long long)gridDim.x * R;", "r0 += R;")
variants["contig"] = c
# The producer waits for the previous kernel first (no L2 prefetch before the wait).
variants["waitfirst"] = sub(ring, """            for (unsigned int t = 0; t < mine && t < nst; ++t) {
                const unsigned long long r0 = (unsigned long long)(blockIdx.x + t * gridDim.x) * R;
                const unsigned int nr = (unsigned int)min((unsigned long long)R, N - r0);
                bulk_prefetch_l2(w + r0 * K, nr * row_bytes);
            }
""", "")
# The consumers compute their sums but skip the reduction and the writes (kept alive).
variants["nored"] = sub(ring, """        // Lane l now holds row l / 4 of the batch, summed over the warp; then over the group.
        float a = warp_sum_rows<GEMV_RING_BATCH>(acc, lane);""", """        float z = 0.0f;
#pragma unroll
        for (int i = 0; i < GEMV_RING_BATCH; ++i) z += acc[i];
        if (z == 1234.5f) out[blockIdx.x] = from_f32<T>(z);
        continue;
        // Lane l now holds row l / 4 of the batch, summed over the warp; then over the group.
        float a = warp_sum_rows<GEMV_RING_BATCH>(acc, lane);""")
# 16 consumer warps (the launch's S and ring stages are the probe's arguments).
w16 = sub(head, "#define GEMV_RING_WARPS 8", "#define GEMV_RING_WARPS 16")
heads = {name: head for name in variants}
variants["w16"] = ring
heads["w16"] = w16

# Timeline of each block's last launch (gemv_probe.cu -DGEMV_TRACE prints it): SM clocks at
# entry, after the producer's wait, at each stage's copy, wake, release and reduction.
tr = sub(ring, """    __syncthreads();
    if (warp == GEMV_RING_WARPS) {""", """    __syncthreads();
    if (threadIdx.x == 0) g_trace[blockIdx.x][0] = clock64();
    if (warp == GEMV_RING_WARPS) {""")
tr = sub(tr, """            pdl_wait();
            // x first""", """            pdl_wait();
            g_trace[blockIdx.x][1] = clock64();
            // x first""")
tr = sub(tr, """                bulk_load(ring + s * stage_bytes""", """                if (t < 8) g_trace[blockIdx.x][2 + t] = clock64();
                bulk_load(ring + s * stage_bytes""")
tr = sub(tr, """                mbar_wait(&full[s], phase);
""", """                mbar_wait(&full[s], phase);
                if (seg == 0 && lane == 0 && tb < 8) g_trace[blockIdx.x][10 + tb] = clock64();
""")
tr = sub(tr, """                mbar_arrive(&empty[s]);""", """                if (seg == 0 && lane == 0 && tb < 8) g_trace[blockIdx.x][18 + tb] = clock64();
                mbar_arrive(&empty[s]);""")
tr = sub(tr, """    mbar_wait(&sh.x_full, 0);
""", """    mbar_wait(&sh.x_full, 0);
    if (threadIdx.x == 0) g_trace[blockIdx.x][34] = clock64();
""")
tr = sub(tr, """        if (tb < mine && n < N) out[n] = from_f32<T>(bias ? a + to_f32(bias[n]) : a);
""", """        if (tb < mine && n < N) out[n] = from_f32<T>(bias ? a + to_f32(bias[n]) : a);
        if (lane == 0 && t < 8) g_trace[blockIdx.x][26 + t] = clock64();
""")
variants["trace"] = tr
heads["trace"] = head.replace('#include "common.cuh"', '#include "common.cuh"\n__device__ long long g_trace[132][48];')
# The trace with the consumers only reading the stage from shared memory (same addresses as
# ring_rows, XORed, no arithmetic): how long the reads take.
variants["trace_read"] = sub(tr, rows_call, """                {
                    const unsigned int packs = K / Vec16<T>::N;
                    unsigned int xr = 0;
                    for (int j = 0; j < R; ++j) {
                        if (j >= (int)nr) break;
                        for (unsigned int p = seg * 32 + lane; p < packs; p += S * 32) {
                            const uint4 q = *reinterpret_cast<const uint4*>(buf + ((size_t)j * K + p * Vec16<T>::N) * sizeof(T));
                            xr ^= q.x ^ q.y ^ q.z ^ q.w;
                        }
                    }
                    acc[b * R] += (float)(xr & 1u);
                }
""")
heads["trace_read"] = heads["trace"]
# More 16-byte loads in flight per lane in ring_rows (U packs of x and U · R of weights).
for name, u in (("u2", "R >= 8 ? 2 : 8 / R"), ("u16", "16 / R")):
    variants[name] = ring
    heads[name] = sub(head, "const int U = R >= 4 ? 1 : 4 / R;", "const int U = " + u + ";")
# ring_rows reading shared memory with ld.shared (32-bit addresses) instead of generic loads.
ra = head.index("__device__ __forceinline__ void ring_rows(")
rr = head[ra:].replace("load16(xs + ", "lds16(xs + ").replace("load16(wr + ", "lds16(wr + ")
heads["lds"] = sub(head[:ra], '#include "common.cuh"\n', """#include "common.cuh"
template <typename T> __device__ __forceinline__ Pack<T> lds16(const T* p) {
    uint4 r;
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "r"(smem_addr(p)));
    return *reinterpret_cast<Pack<T>*>(&r);
}
""") + rr
variants["lds"] = ring
for name, r in variants.items():
    open(f"{outdir}/gemv_{name}.cu", "w").write(heads[name] + r + tail)
    print(name)
