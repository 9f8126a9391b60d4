#!/usr/bin/env python3
"""Session 43: the small ring GEMV with each consumer lane's share of x held in registers.

Session 42 measured on the H200 that the dot products cost ~0.4 µs of (896, 4864)'s ~3.5 µs,
about what reading a block's weights and x out of shared memory takes at 128 B a clock; x is
~22% of those reads at 4-row stages. A lane of a group of S warps reads the same packs of x
(li, li + 32 S, …) for every stage, and where a row has at most XR · 32 S packs (K ≤ 2048 with
S = 2 and XR = 2: every small-ring shape but (3072, 1024)), they fit in 4 · XR registers.
Session 37's `xreg` held all of x for the large shapes (155–168 registers; 0.1 µs slower at
(8192, 2048)) and was not run on the small ring.

xr      after x lands each consumer lane loads its XR packs of x into registers once (where the
        row has at most XR · 32 S packs; else main's path); each full stage's R weight packs
        of a lane's pack of x are loaded together, as in main (U = 1), and summed in main's
        order (bitwise the same sums); -DGEMV_XF: the packs held unpacked to f32 (8 · XR
        registers), converted once
xr3     xr with the 4-row entry point compiled for three blocks an SM, as main's 72 registers
        give it (xr takes 94 for R = 4: two blocks an SM; xr3 spills 32 bytes)

Usage: xreg_variants.py SRC OUTDIR -> OUTDIR/gemv_xr.cu, gemv_xr3.cu (XR: nvcc -DGEMV_XR=…,
default 2)."""
import sys

src, outdir = sys.argv[1:3]
t = open(src).read()


def sub(text, old, new):
    assert text.count(old) == 1, (old, text.count(old))
    return text.replace(old, new)


t = sub(t, """// The ring's static shared memory:""", """#ifndef GEMV_XR
#define GEMV_XR 2
#endif
// ring_rows with the lane's packs of x in registers (xr[u]: pack li + u · step), all R rows.
#ifdef GEMV_XF
#define GEMV_XTYPE(T) float[Vec16<T>::N]
#else
#define GEMV_XTYPE(T) Pack<T>
#endif
template <typename T> using XPack = GEMV_XTYPE(T);
template <typename T, int R, int XR>
__device__ __forceinline__ void ring_rows_xr(const XPack<T> (&xr)[XR], const unsigned char* buf,
                                             unsigned int K, unsigned int li, unsigned int step,
                                             float* acc) {
    const int V = Vec16<T>::N;
    const unsigned int packs = K / V;
    const T* wr = reinterpret_cast<const T*>(buf);
#pragma unroll
    for (int u = 0; u < XR; ++u) {
        const unsigned int p = li + u * step;
        if (p < packs) {
            Pack<T> wv[R];
#pragma unroll
            for (int j = 0; j < R; ++j) wv[j] = load16(wr + (size_t)j * K + p * V);
#ifdef GEMV_XF
            const float (&xf)[V] = xr[u];
#else
            float xf[V];
            unpack_f32(xr[u], xf);
#endif
#pragma unroll
            for (int j = 0; j < R; ++j) {
                float wf[V];
                unpack_f32(wv[j], wf);
                float d = 0.0f;
#pragma unroll
                for (int e = 0; e < V; ++e) d = fmaf(xf[e], wf[e], d);
                acc[j] += d;
            }
        }
    }
}

// The ring's static shared memory:""")
t = sub(t, """    mbar_wait(&sh.x_full, 0);
    pdl_launch_dependents();
""", """    mbar_wait(&sh.x_full, 0);
    pdl_launch_dependents();
    const unsigned int xli = seg * 32 + lane, xstep = S * 32;
    const bool xreg = K / Vec16<T>::N <= GEMV_XR * xstep;
    XPack<T> xr[GEMV_XR];
#pragma unroll
    for (int u = 0; u < GEMV_XR; ++u)
        if (xreg && xli + u * xstep < K / Vec16<T>::N) {
#ifdef GEMV_XF
            unpack_f32(load16(xs + (xli + u * xstep) * Vec16<T>::N), xr[u]);
#else
            xr[u] = load16(xs + (xli + u * xstep) * Vec16<T>::N);
#endif
        }
""")
t = sub(t, """                if (nr == R)
                    ring_rows<T, R, true>""", """                if (xreg && nr == R)
                    ring_rows_xr<T, R, GEMV_XR>(xr, buf, K, xli, xstep, acc + b * R);
                else if (nr == R)
                    ring_rows<T, R, true>""")
open(f"{outdir}/gemv_xr.cu", "w").write(t)
open(f"{outdir}/gemv_xr3.cu", "w").write(
    sub(t, "GEMV_RING_ENTRY(T, NAME, 4, 2)", "GEMV_RING_ENTRY(T, NAME, 4, 3)"))
print("xr xr3")
