#!/usr/bin/env python3
"""Writes patched copies of gemv.cu for gemv_probe.cu (session 19; timing only, not kept).

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
# The consumers skip x: no global load, no barrier before their first stage.
variants["nox"] = sub(ring, """    for (unsigned int i = threadIdx.x; i < K / V; i += GEMV_RING_WARPS * 32)
        store16(xs + i * V, load16(x + i * V));
    named_barrier(15, GEMV_RING_WARPS * 32);
""", "")
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
for name, r in variants.items():
    open(f"{outdir}/gemv_{name}.cu", "w").write(heads[name] + r + tail)
    print(name)
