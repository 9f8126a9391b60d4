#!/usr/bin/env python3
"""Session 44: where the 4-row ring kernel holds x in registers, its consumer lanes load their
packs of x straight from global memory after the PDL wait, and the producer copies no x (session
43's tail_variants.py xg, redone on gemv.cu as at 9e08fe7); a partial last stage reads x from
the same registers (ring_rows_xr gets FULL and nr, as ring_rows has).

xg    the next launch is let in as soon as the loads are issued
xgw   the next launch is let in only once the loads have landed (as HEAD does once x's copy
      has): a branch on the loaded bits, never taken, that the PDL trigger cannot move above

Usage: xg_variants.py SRC OUTDIR -> OUTDIR/gemv_xg.cu, gemv_xgw.cu. (As run in call 1, xg was
the working tree's gemv.cu: the same code, with comments.)"""
import sys

src, outdir = sys.argv[1:3]
t = open(src).read()


def sub(a, b):
    global t
    assert t.count(a) == 1, (a, t.count(a))
    t = t.replace(a, b)


sub("""template <typename T, int R>
__device__ __forceinline__ void ring_rows_xr(const Pack<T> (&xr)[GEMV_RING_XR],
                                             const unsigned char* buf, unsigned int K,
                                             unsigned int li, unsigned int step, float* acc) {""",
    """template <typename T, int R, bool FULL>
__device__ __forceinline__ void ring_rows_xr(const Pack<T> (&xr)[GEMV_RING_XR],
                                             const unsigned char* buf, unsigned int nr,
                                             unsigned int K, unsigned int li, unsigned int step,
                                             float* acc) {""")
sub("""            for (int j = 0; j < R; ++j) wv[j] = load16(wr + (size_t)j * K + p * V);
            float xf[V];
            unpack_f32(xr[u], xf);
#pragma unroll
            for (int j = 0; j < R; ++j) acc[j] += ring_pack_dot<T>(xf, wv[j]);""",
    """            for (int j = 0; j < R; ++j)
                if (FULL || j < (int)nr) wv[j] = load16(wr + (size_t)j * K + p * V);
            float xf[V];
            unpack_f32(xr[u], xf);
#pragma unroll
            for (int j = 0; j < R; ++j)
                if (FULL || j < (int)nr) acc[j] += ring_pack_dot<T>(xf, wv[j]);""")
sub("""    T* xs = reinterpret_cast<T*>(ring + nst * stage_bytes);
    if (warp == GEMV_RING_WARPS) {""", """    T* xs = reinterpret_cast<T*>(ring + nst * stage_bytes);
    const unsigned int packs = K / Vec16<T>::N;
    const bool xreg = R == 4 && packs <= GEMV_RING_XR * S * 32;
    if (warp == GEMV_RING_WARPS) {""")
sub("""            bulk_load(xs, x, row_bytes, &sh.x_full);""",
    """            if (!xreg) bulk_load(xs, x, row_bytes, &sh.x_full);""")
sub("""    pdl_wait();
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
""", """    const unsigned int li = seg * 32 + lane, step = S * 32;
    Pack<T> xr[GEMV_RING_XR];
    pdl_wait();
    if (xreg) {
#pragma unroll
        for (int u = 0; u < GEMV_RING_XR; ++u)
            if (li + u * step < packs) xr[u] = load16(x + (li + u * step) * Vec16<T>::N);
    } else {
        mbar_wait(&sh.x_full, 0);
    }
    pdl_launch_dependents();
""")
sub("""                if (xreg && nr == R)
                    ring_rows_xr<T, R>(xr, buf, K, li, step, acc + b * R);
                else if (nr == R)""", """                if (xreg && nr == R)
                    ring_rows_xr<T, R, true>(xr, buf, R, K, li, step, acc + b * R);
                else if (xreg)
                    ring_rows_xr<T, R, false>(xr, buf, nr, K, li, step, acc + b * R);
                else if (nr == R)""")
open(f"{outdir}/gemv_xg.cu", "w").write(t)
sub("""            if (li + u * step < packs) xr[u] = load16(x + (li + u * step) * Vec16<T>::N);
    } else {""", """            if (li + u * step < packs) xr[u] = load16(x + (li + u * step) * Vec16<T>::N);
        unsigned int any = 0;
#pragma unroll
        for (int u = 0; u < GEMV_RING_XR; ++u)
            if (li + u * step < packs) any |= *reinterpret_cast<const unsigned int*>(&xr[u]);
        if (any == 0x7fc00001u && N == 0) sh.part[0][0][0] = 1.0f;
    } else {""")
open(f"{outdir}/gemv_xgw.cu", "w").write(t)
print("xg xgw")
