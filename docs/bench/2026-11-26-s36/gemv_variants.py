#!/usr/bin/env python3
"""Writes patched copies of gemv.cu for session 23's probe.cu (session 36; timing only).

main   gemv.cu as on main
pipe   ring_rows software-pipelined where R is 2 or 4: each lane issues the next pass's loads (U packs
       of x and U * R of weights) before the dot products of the current one
w1     one empty-barrier arrival per consumer warp (lane 0 after __syncwarp) instead of one per
       thread (matters most where S = 8: 256 arrivals a stage)
pw1    pipe and w1

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


out = {"main": base, "pipe": pipe(base), "w1": w1(base), "pw1": w1(pipe(base))}
for name, text in out.items():
    open(f"{outdir}/gemv_{name}.cu", "w").write(text)
    print(name)
