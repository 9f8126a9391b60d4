#!/usr/bin/env python3
"""Writes patched copies of gemv.cu for session 23's probe.cu (session 36; timing only).

main   gemv.cu as on main
pipe   ring_rows software-pipelined where R is 2 or 4: each lane issues the next pass's loads (U packs
       of x and U * R of weights) before the dot products of the current one
w1     one empty-barrier arrival per consumer warp (lane 0 after __syncwarp) instead of one per
       thread (matters most where S = 8: 256 arrivals a stage)
pw1    pipe and w1
u1     one pack of x a pass whatever R (at R = 2: 3 loads a pass instead of 6; R = 1: 2, not 8)
half   8-row stages summed as two passes over 4 rows each (5 loads a pass instead of 9)
u1h    u1 and half
lines  the first npre stages asked of L2 per 128-byte line (prefetch.global.L2) by the producer
       warp's 32 lanes instead of one bulk prefetch per stage by lane 0 (as the decode ring since
       session 36)
early  lines, issued at the kernel's entry, before the barriers' setup

Usage: gemv_variants.py SRC OUTDIR  ->  OUTDIR/gemv_<name>.cu for each variant."""
import sys

src, outdir = sys.argv[1], sys.argv[2]
base = open(src).read()


def sub(text, old, new):
    assert text.count(old) == 1, (old, text.count(old))
    return text.replace(old, new)


LOOP_OLD = """    unsigned int p = li;
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
"""
LOOP_NEW = """    unsigned int p = li;
    Pack<T> xv[U], wv[U][R];
    const auto fetch = [&](unsigned int q, Pack<T> (&xd)[U], Pack<T> (&wd)[U][R]) {
#pragma unroll
        for (int u = 0; u < U; ++u) {
            xd[u] = load16(xs + (q + u * step) * V);
#pragma unroll
            for (int j = 0; j < R; ++j)
                if (FULL || j < (int)nr) wd[u][j] = load16(wr + (size_t)j * K + (q + u * step) * V);
        }
    };
    // Only at R = 2 and 4: at R = 8 (nine packs) and R = 1 (eight) ptxas spills at its
    // 168-register cap.
    constexpr bool PIPE = R == 2 || R == 4;
    if (p + (U - 1) * step < packs) fetch(p, xv, wv);
#pragma unroll 1
    for (; p + (U - 1) * step < packs; p += U * step) {
        Pack<T> xn[U], wn[U][R];
        if (!PIPE && p != li) fetch(p, xv, wv);
        const bool more = PIPE && p + U * step + (U - 1) * step < packs;
        if (more) fetch(p + U * step, xn, wn);
#pragma unroll
        for (int u = 0; u < U; ++u) {
"""
LOOP_END_OLD = """                    acc[j] += d;
                }
            }
        }
    }
    for (; p < packs; p += step) {"""
LOOP_END_NEW = """                    acc[j] += d;
                }
            }
        }
        if (more) {
#pragma unroll
            for (int u = 0; u < U; ++u) {
                xv[u] = xn[u];
#pragma unroll
                for (int j = 0; j < R; ++j) wv[u][j] = wn[u][j];
            }
        }
    }
    for (; p < packs; p += step) {"""


def pipe(t):
    t = sub(t, LOOP_OLD, LOOP_NEW)
    return sub(t, LOOP_END_OLD, LOOP_END_NEW)


def w1(t):
    t = sub(t, "            mbar_init(&empty[i], S * 32);\n", "            mbar_init(&empty[i], S);\n")
    return sub(t, "                mbar_arrive(&empty[s]);\n                ring_next(s, phase, nst, G);",
               "                __syncwarp();\n                if (lane == 0) mbar_arrive(&empty[s]);\n"
               "                ring_next(s, phase, nst, G);")


def u1(t):
    return sub(t, "    const int U = R >= 4 ? 1 : 4 / R;\n", "    const int U = 1;\n")


CALL = """                if (nr == R)
                    ring_rows<T, R, true>(xs, buf, R, K, seg * 32 + lane, S * 32, acc + b * R);
                else
                    ring_rows<T, R, false>(xs, buf, nr, K, seg * 32 + lane, S * 32, acc + b * R);
"""
CALL_HALF = """                if (R == 8) {
                    // Two passes of four rows (session 36 probe).
                    constexpr int H = R == 8 ? 4 : R;
                    const unsigned char* buf2 = buf + H * (size_t)K * sizeof(T);
                    if (nr == R) {
                        ring_rows<T, H, true>(xs, buf, H, K, seg * 32 + lane, S * 32, acc + b * R);
                        ring_rows<T, H, true>(xs, buf2, H, K, seg * 32 + lane, S * 32, acc + b * R + H);
                    } else {
                        ring_rows<T, H, false>(xs, buf, min(nr, (unsigned)H), K, seg * 32 + lane, S * 32, acc + b * R);
                        if (nr > (unsigned)H)
                            ring_rows<T, H, false>(xs, buf2, nr - H, K, seg * 32 + lane, S * 32, acc + b * R + H);
                    }
                } else if (nr == R) {
                    ring_rows<T, R, true>(xs, buf, R, K, seg * 32 + lane, S * 32, acc + b * R);
                } else {
                    ring_rows<T, R, false>(xs, buf, nr, K, seg * 32 + lane, S * 32, acc + b * R);
                }
"""


def half(t):
    return sub(t, CALL, CALL_HALF)


PF_OLD = """        if (lane == 0) {
            // Before the PDL wait only L2 prefetches of the first npre stages: they overlap the
            // previous kernel's tail, and cannot read data that kernel may still be writing (L2
            // is where its writes land). The copies after the wait then hit L2.
            for (unsigned int t = 0; t < mine && t < npre; ++t) {
                const unsigned long long r0 = (unsigned long long)(blockIdx.x + t * gridDim.x) * R;
                const unsigned int nr = (unsigned int)min((unsigned long long)R, N - r0);
                bulk_prefetch_l2(w + r0 * K, nr * row_bytes);
            }
            pdl_wait();"""
PF_LINES = """        for (unsigned int t = 0; t < mine && t < npre; ++t) {
            const unsigned long long r0 = (unsigned long long)(blockIdx.x + t * gridDim.x) * R;
            const unsigned int nr = (unsigned int)min((unsigned long long)R, N - r0);
            const char* p = reinterpret_cast<const char*>(w + r0 * K);
            for (unsigned int o = 128 * lane; o < nr * row_bytes; o += 32 * 128) prefetch_l2(p + o);
        }
        if (lane == 0) {
            pdl_wait();"""
PF_NONE = """        if (lane == 0) {
            pdl_wait();"""
ENTRY_OLD = """    T* xs = reinterpret_cast<T*>(ring + nst * stage_bytes);
    if (threadIdx.x == 0) {"""
ENTRY_NEW = """    T* xs = reinterpret_cast<T*>(ring + nst * stage_bytes);
    if (warp == GEMV_RING_WARPS) {
        for (unsigned int t = 0; t < mine && t < npre; ++t) {
            const unsigned long long r0 = (unsigned long long)(blockIdx.x + t * gridDim.x) * R;
            const unsigned int nr = (unsigned int)min((unsigned long long)R, N - r0);
            const char* p = reinterpret_cast<const char*>(w + r0 * K);
            for (unsigned int o = 128 * lane; o < nr * row_bytes; o += 32 * 128) prefetch_l2(p + o);
        }
    }
    if (threadIdx.x == 0) {"""


def lines(t):
    return sub(t, PF_OLD, PF_LINES)


def early(t):
    return sub(sub(t, PF_OLD, PF_NONE), ENTRY_OLD, ENTRY_NEW)


out = {"main": base, "lines": lines(base), "early": early(base), "pipe": pipe(base), "w1": w1(base), "pw1": w1(pipe(base)), "u1": u1(base),
       "half": half(base), "u1h": u1(half(base))}
for name, text in out.items():
    open(f"{outdir}/gemv_{name}.cu", "w").write(text)
    print(name)
