#!/usr/bin/env python3
"""Writes patched copies of gemv.cu for session 23's probe.cu (session 31; timing only).

main   gemv.cu as on main
xregp  each consumer lane keeps its packs of x in registers (bf16, 16 bytes a pack) from the
       start, instead of reading them from shared memory for every stage: NP packs a lane,
       NP = K / 8 / (32 S) in {4, 8, 14} (else main's path)
xregf  the same with x unpacked to f32 in registers (8 floats a pack)

Usage: gemv_variants.py SRC OUTDIR  ->  OUTDIR/gemv_<name>.cu for each variant."""
import sys

src, outdir = sys.argv[1], sys.argv[2]
base = open(src).read()
a = base.index("__device__ __forceinline__ void gemv_ring_impl")
a = base.rindex("template <typename T, int R>", 0, a)
b = base.index("#define GEMV_RING_BODY")
e = base.index("#else", b)
head, ring, body, tail = base[:a], base[a:b], base[b:e], base[e:]


def sub(text, old, new):
    assert text.count(old) == 1, (old, text.count(old))
    return text.replace(old, new)


rows_fn = """
// Session 31 probe: ring_rows with the lane's NP packs of x in registers (XF: as f32).
template <typename T, int NP, bool XF> struct XRegs {
    Pack<T> p[XF ? 1 : NP];
    float f[XF ? NP : 1][XF ? Vec16<T>::N : 1];
    __device__ __forceinline__ void load(const T* xs, unsigned int li, unsigned int step) {
#pragma unroll
        for (int i = 0; i < NP; ++i) {
            const Pack<T> v = load16(xs + (li + i * step) * Vec16<T>::N);
            if (XF) {
#pragma unroll
                for (int e = 0; e < Vec16<T>::N; ++e) f[XF ? i : 0][XF ? e : 0] = to_f32(v.v[e]);
            } else {
                p[XF ? 0 : i] = v;
            }
        }
    }
};
template <typename T, int R, bool FULL, int NP, bool XF>
__device__ __forceinline__ void ring_rows_x(const XRegs<T, NP, XF>& xr, const unsigned char* buf,
                                            unsigned int nr, unsigned int K, unsigned int li,
                                            unsigned int step, float* acc) {
    const int V = Vec16<T>::N;
    constexpr int U = R >= 4 ? 1 : 4 / R;
    const T* wr = reinterpret_cast<const T*>(buf);
#pragma unroll
    for (int i0 = 0; i0 < NP; i0 += U) {
        // No loads hoisted across groups (as ring_rows' loop keeps them): registers.
        asm volatile("" ::: "memory");
        Pack<T> wv[U][R];
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
            for (int j = 0; j < R; ++j)
                if (i0 + u < NP && (FULL || j < (int)nr))
                    wv[u][j] = load16(wr + (size_t)j * K + (li + (i0 + u) * step) * V);
#pragma unroll
        for (int u = 0; u < U; ++u) {
            if (i0 + u >= NP) continue;
            float xf[V];
#pragma unroll
            for (int e = 0; e < V; ++e) xf[e] = XF ? xr.f[XF ? i0 + u : 0][e] : to_f32(xr.p[XF ? 0 : i0 + u].v[e]);
#pragma unroll
            for (int j = 0; j < R; ++j) {
                if (FULL || j < (int)nr) {
                    float d = 0.0f;
#pragma unroll
                    for (int e = 0; e < V; ++e) d = fmaf(xf[e], to_f32(wv[u][j].v[e]), d);
                    acc[j] += d;
                }
            }
        }
    }
}

"""

rows_call = """                if (nr == R)
                    ring_rows<T, R, true>(xs, buf, R, K, seg * 32 + lane, S * 32, acc + b * R);
                else
                    ring_rows<T, R, false>(xs, buf, nr, K, seg * 32 + lane, S * 32, acc + b * R);
"""
rows_call_x = """                if (NP == 0) {
                    if (nr == R)
                        ring_rows<T, R, true>(xs, buf, R, K, seg * 32 + lane, S * 32, acc + b * R);
                    else
                        ring_rows<T, R, false>(xs, buf, nr, K, seg * 32 + lane, S * 32, acc + b * R);
                } else if (nr == R) {
                    ring_rows_x<T, R, true, NP ? NP : 1, XF>(xr, buf, R, K, seg * 32 + lane, S * 32, acc + b * R);
                } else {
                    ring_rows_x<T, R, false, NP ? NP : 1, XF>(xr, buf, nr, K, seg * 32 + lane, S * 32, acc + b * R);
                }
"""


def xreg(xf):
    r = sub(ring, "template <typename T, int R>", "template <typename T, int R, int NP, bool XF>")
    r = sub(r, "    mbar_wait(&sh.x_full, 0);\n",
            "    mbar_wait(&sh.x_full, 0);\n    XRegs<T, NP ? NP : 1, XF> xr;\n"
            "    if (NP) xr.load(xs, seg * 32 + lane, S * 32);\n")
    r = sub(r, rows_call, rows_call_x)
    disp = """template <typename T, int NP>
__device__ __forceinline__ void gemv_ring_r(const T* x, const T* w, const T* bias, T* out, unsigned int N,
        unsigned int K, unsigned int S, unsigned int R, unsigned int nst, unsigned int npre, GemvRingShared& sh) {
    switch (R) {
    case 1: gemv_ring_impl<T, 1, NP, %s>(x, w, bias, out, N, K, S, nst, npre, sh); break;
    case 2: gemv_ring_impl<T, 2, NP, %s>(x, w, bias, out, N, K, S, nst, npre, sh); break;
    case 4: gemv_ring_impl<T, 4, NP, %s>(x, w, bias, out, N, K, S, nst, npre, sh); break;
    default: gemv_ring_impl<T, 8, NP, %s>(x, w, bias, out, N, K, S, nst, npre, sh); break;
    }
}
""" % ((("true" if xf else "false"),) * 4)
    bd = """#define GEMV_RING_BODY(T)                                                                          \\
    __shared__ __align__(8) GemvRingShared sh;                                                     \\
    const unsigned int np_ = K / Vec16<T>::N % (S * 32) == 0 ? K / Vec16<T>::N / (S * 32) : 0;     \\
    switch (np_) {                                                                                 \\
    case 4: gemv_ring_r<T, 4>(x, w, bias, out, N, K, S, R, nst, npre, sh); break;                  \\
    case 8: gemv_ring_r<T, 8>(x, w, bias, out, N, K, S, R, nst, npre, sh); break;                  \\
    case 14: gemv_ring_r<T, 14>(x, w, bias, out, N, K, S, R, nst, npre, sh); break;                \\
    default: gemv_ring_r<T, 0>(x, w, bias, out, N, K, S, R, nst, npre, sh); break;                 \\
    }
"""
    return head + rows_fn + r + disp + bd + tail


out = {"main": base, "xregp": xreg(False), "xregf": xreg(True)}
for name, text in out.items():
    open(f"{outdir}/gemv_{name}.cu", "w").write(text)
    print(name)
