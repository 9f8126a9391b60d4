#!/usr/bin/env python3
"""Session 43: the ring GEMV's stage releases, on gemv.cu as of 4771fde (x in registers).

Every consumer thread of a group arrives on a stage's empty barrier after reading it (S · 32
arrivals on one shared-memory word, each with release semantics), also for the stages whose slot
is never refilled: a block's last nst stages. At (896, 4864) that is 8 of a block's 9–10 stages,
including the one the call ends on.

norel   a stage is released only where the producer will refill its slot (tb + nst < mine)
xg      where the 4-row kernel holds x in registers, its consumer lanes load their packs of x
        straight from global memory after the PDL wait (16-byte L2 loads; the next launch let in
        once they have landed, as main does once x's copy has) and the producer copies no x, so
        its first stage's copy is not queued behind x's; a last stage of fewer rows reads x from
        the same registers (written at the end of session 43 and compiled, 96 registers, but
        not run: the session's device time ran out)

Usage: tail_variants.py SRC OUTDIR -> OUTDIR/gemv_norel.cu, gemv_xg.cu."""
import sys

src, outdir = sys.argv[1:3]
t = open(src).read()
old = """                mbar_arrive(&empty[s]);
                ring_next(s, phase, nst, G);"""
assert t.count(old) == 1
t = t.replace(old, """                if (tb + nst < mine) mbar_arrive(&empty[s]);
                ring_next(s, phase, nst, G);""")
open(f"{outdir}/gemv_norel.cu", "w").write(t)


def sub(text, a, b):
    assert text.count(a) == 1, (a, text.count(a))
    return text.replace(a, b)


x = open(src).read()
# ring_rows_xr for a partial stage too (rows j < nr).
x = sub(x, """template <typename T, int R>
__device__ __forceinline__ void ring_rows_xr(const Pack<T> (&xr)[GEMV_RING_XR],
                                             const unsigned char* buf, unsigned int K,
                                             unsigned int li, unsigned int step, float* acc) {""",
        """template <typename T, int R>
__device__ __forceinline__ void ring_rows_xr(const Pack<T> (&xr)[GEMV_RING_XR],
                                             const unsigned char* buf, unsigned int K,
                                             unsigned int li, unsigned int step, float* acc,
                                             unsigned int nr = R) {""")
x = sub(x, """            for (int j = 0; j < R; ++j) wv[j] = load16(wr + (size_t)j * K + p * V);""",
        """            for (int j = 0; j < R; ++j)
                if (j < (int)nr) wv[j] = load16(wr + (size_t)j * K + p * V);""")
x = sub(x, """            for (int j = 0; j < R; ++j) {
                float wf[V];
                unpack_f32(wv[j], wf);""", """            for (int j = 0; j < R; ++j) {
                if (j >= (int)nr) continue;
                float wf[V];
                unpack_f32(wv[j], wf);""")
# The producer copies x only where the consumers do not load it themselves.
x = sub(x, """            bulk_load(xs, x, row_bytes, &sh.x_full);
            unsigned int s = 0, phase = 0;""", """            if (!(R == 4 && K / Vec16<T>::N <= GEMV_RING_XR * S * 32))
                bulk_load(xs, x, row_bytes, &sh.x_full);
            unsigned int s = 0, phase = 0;""")
x = sub(x, """    pdl_wait();
    mbar_wait(&sh.x_full, 0);
    pdl_launch_dependents();
""", """    pdl_wait();
""")
x = sub(x, """    Pack<T> xr[GEMV_RING_XR];
#pragma unroll
    for (int u = 0; u < GEMV_RING_XR; ++u)
        if (xreg && li + u * step < packs) xr[u] = load16(xs + (li + u * step) * Vec16<T>::N);
""", """    Pack<T> xr[GEMV_RING_XR];
    if (xreg) {
        unsigned int any = 0;
#pragma unroll
        for (int u = 0; u < GEMV_RING_XR; ++u)
            if (li + u * step < packs) {
                xr[u] = load16(x + (li + u * step) * Vec16<T>::N);
                any |= *reinterpret_cast<const unsigned int*>(&xr[u]);
            }
        asm volatile("" ::"r"(any));  // wait for the loads, as main waits for x's copy
    } else {
        mbar_wait(&sh.x_full, 0);
    }
    pdl_launch_dependents();
""")
x = sub(x, """                else if (nr == R)
                    ring_rows<T, R, true>""", """                else if (xreg)
                    ring_rows_xr<T, R>(xr, buf, K, li, step, acc + b * R, nr);
                else if (nr == R)
                    ring_rows<T, R, true>""")
open(f"{outdir}/gemv_xg.cu", "w").write(x)
print("norel xg")
