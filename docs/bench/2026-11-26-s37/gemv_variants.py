#!/usr/bin/env python3
"""Writes patched copies of gemv.cu for session 23's probe.cu (session 37; timing only).

main   gemv.cu as given
one    the ring kernel instantiated for one R only (-DRING_R=…), the baseline for xreg (calls
       1–3, on gemv.cu as it was before this session's per-R entry points: one and xreg need
       its switch over R and are skipped on later sources)
xreg   session 31's x-in-registers consumer (docs/bench/2026-11-26-s31/gemv_variants.py "xregp")
       instantiated for one R and one NP only (-DRING_R=… -DRING_NP=…), so no other
       instantiation's register pressure reaches it (session 31's copy of all of them spilled)
taper  each block's last TAPER_L(nst) stages (default nst: its whole last ring) carry
       R / TAPER_Q rows (default 4, at least 1) instead of R, so the burst that lands at the
       end and is summed after the last byte is smaller
trig   the consumers let the next launch start at the kernel's entry (griddepcontrol.launch_
       dependents before the PDL wait) instead of after x has landed
wearly the producer copies its first min(stages, nst) stages into shared memory before the PDL
       wait, then waits and copies x (legal only for weights no kernel writes while the GEMV
       may run: a model's; session 33 probed it with the next launch let in at entry)
trigl  the consumers let the next launch start once their last stage is read (before the last
       batch's reduction) instead of after x has landed
trigf  the consumers let the next launch start once their group's first stage has landed
trigw  the consumers let the next launch start right after their PDL wait (before x lands)
stamp  main, recording per block (%globaltimer, ns) its entry, its producer's PDL wait
       returning, the last stage a consumer warp saw land, and its last consumer warp's end into
       g_stamp (the probe prints them with -DPROBE_STAMPS)
uscale each lane's passes over a stage load RING_U_SCALE (-D…, default 2) times as many packs
       (U = (R >= 4 ? 1 : 4 / R) * RING_U_SCALE): more shared-memory loads in flight, which
       session 19 found spilled in the one kernel for every R
uscale1 uscale with every entry point compiled for one block an SM (room for the registers)
dyn    each block's first stages fixed (stage b + t grid) except the last RING_DYN_ROUNDS (-D…,
       default 1) rounds of the grid, which producers claim one stage at a time from a grid-wide
       counter (g_dyn_ctr; the last block to stop claiming resets it), so blocks whose stream
       runs ahead take more of the end; stage ids pass to the consumers through shared memory,
       and one end mark per group closes the ring (timing only: one launch at a time)
r8co2  the 8-row entry point compiled for two blocks an SM, as those of R <= 4 (ptxas: 96
       registers and spills)
r8half the same with each 8-row stage summed as two passes of four rows (registers of R = 4)

Usage: gemv_variants.py SRC OUTDIR  ->  OUTDIR/gemv_<name>.cu for each variant."""
import os
import subprocess
import sys

src, outdir = sys.argv[1], sys.argv[2]
base = open(src).read()
here = os.path.dirname(os.path.abspath(__file__))


def sub(text, old, new):
    assert text.count(old) == 1, (old, text.count(old))
    return text.replace(old, new)


def body(text, call):
    a = text.index("#define GEMV_RING_BODY(T)")
    e = text.index("#else", a)
    return text[:a] + ("#define GEMV_RING_BODY(T) \\\n    __shared__ __align__(8) GemvRingShared sh; \\\n"
                       "    %s(x, w, bias, out, N, K, S, nst, npre, sh);\n" % call) + text[e:]


def taper(t):
    t = sub(t, "#define GEMV_RING_WARPS 8\n", """#define GEMV_RING_WARPS 8
#ifndef TAPER_Q
#define TAPER_Q 4
#endif
#ifndef TAPER_L
#define TAPER_L(nst) (nst)
#endif
""")
    t = sub(t, """    const unsigned int stages = N == 0 ? 0 : (N - 1) / R + 1;
    const unsigned int mine = blockIdx.x < stages ? (stages - 1 - blockIdx.x) / gridDim.x + 1 : 0;
""", """    // Stage g < F: rows g R … (all full); g >= F: rows n1 + (g − F) RS …, nr ≤ RS.
    constexpr int RS = R / TAPER_Q > 0 ? R / TAPER_Q : 1;
    const unsigned long long small_cap = (unsigned long long)TAPER_L(nst) * gridDim.x * RS;
    const unsigned int F = N > small_cap ? (unsigned int)((N - small_cap + R - 1) / R) : 0;
    const unsigned int n1 = F * R;
    const unsigned int stages = F + (N - n1 + RS - 1) / RS;
    const unsigned int mine = blockIdx.x < stages ? (stages - 1 - blockIdx.x) / gridDim.x + 1 : 0;
    const auto rows_of = [&](unsigned long long g, unsigned long long& r0, unsigned int& nr) {
        if (g < F) {
            r0 = g * R;
            nr = R;
        } else {
            r0 = n1 + (g - F) * RS;
            nr = (unsigned int)min((unsigned long long)RS, N - r0);
        }
    };
""")
    t = sub(t, """            const unsigned long long r0 = (unsigned long long)(blockIdx.x + t * gridDim.x) * R;
            const unsigned int nr = (unsigned int)min((unsigned long long)R, N - r0);
            prefetch_l2_lines(""", """            unsigned long long r0;
            unsigned int nr;
            rows_of(blockIdx.x + (unsigned long long)t * gridDim.x, r0, nr);
            prefetch_l2_lines(""")
    t = sub(t, """            unsigned int s = 0, phase = 0;
            unsigned long long r0 = (unsigned long long)blockIdx.x * R;
            for (unsigned int t = 0; t < mine; ++t) {
                if (t >= nst) mbar_wait(&empty[s], phase ^ 1);
                const unsigned int nr = (unsigned int)min((unsigned long long)R, N - r0);
                bulk_load(ring + s * stage_bytes, w + r0 * K, nr * row_bytes, &full[s]);
                r0 += (unsigned long long)gridDim.x * R;
""", """            unsigned int s = 0, phase = 0;
            for (unsigned int t = 0; t < mine; ++t) {
                if (t >= nst) mbar_wait(&empty[s], phase ^ 1);
                unsigned long long r0;
                unsigned int nr;
                rows_of(blockIdx.x + (unsigned long long)t * gridDim.x, r0, nr);
                bulk_load(ring + s * stage_bytes, w + r0 * K, nr * row_bytes, &full[s]);
""")
    t = sub(t, """                const unsigned long long r0 = (unsigned long long)(blockIdx.x + tb * gridDim.x) * R;
                const unsigned int nr = (unsigned int)min((unsigned long long)R, N - r0);
                mbar_wait(&full[s], phase);
                const unsigned char* buf = ring + s * stage_bytes;
                if (nr == R)
                    ring_rows<T, R, true>(xs, buf, R, K, seg * 32 + lane, S * 32, acc + b * R);
                else
                    ring_rows<T, R, false>(xs, buf, nr, K, seg * 32 + lane, S * 32, acc + b * R);
""", """                const unsigned long long g = blockIdx.x + (unsigned long long)tb * gridDim.x;
                unsigned long long r0;
                unsigned int nr;
                rows_of(g, r0, nr);
                mbar_wait(&full[s], phase);
                const unsigned char* buf = ring + s * stage_bytes;
                if (g < F)
                    ring_rows<T, R, true>(xs, buf, R, K, seg * 32 + lane, S * 32, acc + b * R);
                else if (nr == RS)
                    ring_rows<T, RS, true>(xs, buf, RS, K, seg * 32 + lane, S * 32, acc + b * R);
                else
                    ring_rows<T, RS, false>(xs, buf, nr, K, seg * 32 + lane, S * 32, acc + b * R);
""")
    return sub(t, """        const unsigned int tb = t + row / R * G;
        const unsigned long long n = (unsigned long long)(blockIdx.x + tb * gridDim.x) * R + row % R;
        if (tb < mine && n < N) out[n] = from_f32<T>(bias ? a + to_f32(bias[n]) : a);
""", """        const unsigned int tb = t + row / R * G;
        if (tb >= mine) continue;
        unsigned long long r0;
        unsigned int nr;
        rows_of(blockIdx.x + (unsigned long long)tb * gridDim.x, r0, nr);
        const unsigned long long n = r0 + row % R;
        if (row % R < nr) out[n] = from_f32<T>(bias ? a + to_f32(bias[n]) : a);
""")


def trig(t):
    t = sub(t, """    if (threadIdx.x == 0) {
        for (unsigned int i = 0; i < nst; ++i) {""", """    if (warp < GEMV_RING_WARPS) pdl_launch_dependents();
    if (threadIdx.x == 0) {
        for (unsigned int i = 0; i < nst; ++i) {""")
    return sub(t, """    mbar_wait(&sh.x_full, 0);
    pdl_launch_dependents();
""", """    mbar_wait(&sh.x_full, 0);
""")


def wearly(t):
    return sub(t, """            pdl_wait();
            // x first (one copy; the consumers need it for every stage), then the stages.
            bulk_load(xs, x, row_bytes, &sh.x_full);
            unsigned int s = 0, phase = 0;
            unsigned long long r0 = (unsigned long long)blockIdx.x * R;
            for (unsigned int t = 0; t < mine; ++t) {
                if (t >= nst) mbar_wait(&empty[s], phase ^ 1);""", """            unsigned int s = 0, phase = 0;
            unsigned long long r0 = (unsigned long long)blockIdx.x * R;
            const unsigned int early = min(mine, nst);
            for (unsigned int t = 0; t <= mine; ++t) {
                if (t == early) {
                    pdl_wait();
                    bulk_load(xs, x, row_bytes, &sh.x_full);
                }
                if (t == mine) break;
                if (t >= nst) mbar_wait(&empty[s], phase ^ 1);""")


def trigl(t):
    t = sub(t, """    mbar_wait(&sh.x_full, 0);
    pdl_launch_dependents();
""", """    mbar_wait(&sh.x_full, 0);
""")
    t = sub(t, """                mbar_arrive(&empty[s]);
                ring_next(s, phase, nst, G);
            }
        }
""", """                mbar_arrive(&empty[s]);
                ring_next(s, phase, nst, G);
            }
        }
        if (t + NB * G >= mine) pdl_launch_dependents();
""")
    # A group with no stage never enters the loop: it lets the next launch start at once.
    return sub(t, """    unsigned int s = grp, phase = 0, it = 0;
""", """    unsigned int s = grp, phase = 0, it = 0;
    if (grp >= mine) pdl_launch_dependents();
""")


def trigf(t):
    t = sub(t, """    mbar_wait(&sh.x_full, 0);
    pdl_launch_dependents();
""", """    mbar_wait(&sh.x_full, 0);
""")
    t = sub(t, """                mbar_wait(&full[s], phase);
                const unsigned char* buf = ring + s * stage_bytes;
""", """                mbar_wait(&full[s], phase);
                if (it == 0 && b == 0) pdl_launch_dependents();
                const unsigned char* buf = ring + s * stage_bytes;
""")
    return sub(t, """    unsigned int s = grp, phase = 0, it = 0;
""", """    unsigned int s = grp, phase = 0, it = 0;
    if (grp >= mine) pdl_launch_dependents();
""")


def trigw(t):
    return sub(t, """    pdl_wait();
    mbar_wait(&sh.x_full, 0);
    pdl_launch_dependents();
""", """    pdl_wait();
    pdl_launch_dependents();
    mbar_wait(&sh.x_full, 0);
""")


def stamp(t):
    # Declared outside the sm_90+ block, so the probe's host pass sees it too.
    t = sub(t, "#define GEMV_RING_THREADS (GEMV_RING_WARPS * 32 + 32)\n",
            "#define GEMV_RING_THREADS (GEMV_RING_WARPS * 32 + 32)\n"
            "__device__ unsigned long long g_stamp[4][1024];\n")
    t = sub(t, """template <typename T, int R>
__device__ __forceinline__ void gemv_ring_impl(""", """__device__ __forceinline__ unsigned long long now_ns() {
    unsigned long long v;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(v));
    return v;
}
template <typename T, int R>
__device__ __forceinline__ void gemv_ring_impl(""")
    t = sub(t, """    T* xs = reinterpret_cast<T*>(ring + nst * stage_bytes);
""", """    T* xs = reinterpret_cast<T*>(ring + nst * stage_bytes);
    if (threadIdx.x == 0) g_stamp[0][blockIdx.x] = now_ns();
""")
    t = sub(t, """        if (lane == 0) {
            pdl_wait();
""", """        if (lane == 0) {
            pdl_wait();
            g_stamp[1][blockIdx.x] = now_ns();
""")
    t = sub(t, """                mbar_wait(&full[s], phase);
                const unsigned char* buf = ring + s * stage_bytes;
""", """                mbar_wait(&full[s], phase);
                if (lane == 0) atomicMax(&g_stamp[2][blockIdx.x], now_ns());
                const unsigned char* buf = ring + s * stage_bytes;
""")
    return sub(t, """        if (tb < mine && n < N) out[n] = from_f32<T>(bias ? a + to_f32(bias[n]) : a);
    }
}
""", """        if (tb < mine && n < N) out[n] = from_f32<T>(bias ? a + to_f32(bias[n]) : a);
    }
    if (lane == 0) atomicMax(&g_stamp[3][blockIdx.x], now_ns());
}
""")


def uscale(t):
    return sub(t, "    const int U = R >= 4 ? 1 : 4 / R;\n",
               "#ifndef RING_U_SCALE\n#define RING_U_SCALE 2\n#endif\n"
               "    const int U = (R >= 4 ? 1 : 4 / R) * RING_U_SCALE;\n")


def one_block(t):
    for r in (1, 2, 4):
        t = sub(t, "GEMV_RING_ENTRY(T, NAME, %d, 2)" % r, "GEMV_RING_ENTRY(T, NAME, %d, 1)" % r)
    return t


DYN_PRODUCER = """    if (warp == GEMV_RING_WARPS) {
        if (lane == 0) {
            pdl_wait();
            bulk_load(xs, x, row_bytes, &sh.x_full);
            unsigned int s = 0, phase = 0, t = 0;
            for (;; ++t) {
                unsigned int g;
                if (t < fixed) {
                    g = blockIdx.x + t * gridDim.x;
                } else {
                    g = fixed * gridDim.x + atomicAdd(&g_dyn_ctr[0], 1u);
                    if (g >= stages) break;
                }
                if (t >= nst) mbar_wait(&empty[s], phase ^ 1);
                dyn_id[s] = g;
                const unsigned long long r0 = (unsigned long long)g * R;
                const unsigned int nr = (unsigned int)min((unsigned long long)R, N - r0);
                bulk_load(ring + s * stage_bytes, w + r0 * K, nr * row_bytes, &full[s]);
                ring_next(s, phase, nst);
            }
            for (unsigned int k = 0; k < G; ++k, ++t) {
                if (t >= nst) mbar_wait(&empty[s], phase ^ 1);
                dyn_id[s] = DYN_END;
                mbar_arrive(&full[s]);
                ring_next(s, phase, nst);
            }
            if (atomicAdd(&g_dyn_ctr[1], 1u) == gridDim.x - 1) {
                g_dyn_ctr[0] = 0;
                g_dyn_ctr[1] = 0;
            }
        }
        return;
    }
    pdl_wait();
    mbar_wait(&sh.x_full, 0);
    pdl_launch_dependents();
    unsigned int s = grp, phase = 0, it = 0;
    bool more = true;
    for (; more; ++it) {
        float acc[GEMV_RING_BATCH];
#pragma unroll
        for (int i = 0; i < GEMV_RING_BATCH; ++i) acc[i] = 0.0f;
        unsigned int ids[NB];
#pragma unroll
        for (int b = 0; b < NB; ++b) {
            ids[b] = DYN_END;
            if (more) {
                mbar_wait(&full[s], phase);
                const unsigned int g = dyn_id[s];
                if (g == DYN_END) {
                    more = false;
                } else {
                    ids[b] = g;
                    const unsigned long long r0 = (unsigned long long)g * R;
                    const unsigned int nr = (unsigned int)min((unsigned long long)R, N - r0);
                    const unsigned char* buf = ring + s * stage_bytes;
                    if (nr == R)
                        ring_rows<T, R, true>(xs, buf, R, K, seg * 32 + lane, S * 32, acc + b * R);
                    else
                        ring_rows<T, R, false>(xs, buf, nr, K, seg * 32 + lane, S * 32, acc + b * R);
                    mbar_arrive(&empty[s]);
                }
                ring_next(s, phase, nst, G);
            }
        }
        if (ids[0] == DYN_END) break;
        float a = warp_sum_rows<GEMV_RING_BATCH>(acc, lane);
        const unsigned int i = lane / (32 / GEMV_RING_BATCH);
        if (S > 1) {
            if (lane % (32 / GEMV_RING_BATCH) == 0) part[it & 1][warp][i] = a;
            named_barrier(1 + grp, S * 32);
            if (seg != 0 || lane >= GEMV_RING_BATCH) continue;
            a = 0.0f;
            for (unsigned int j = 0; j < S; ++j) a += part[it & 1][grp * S + j][lane];
        } else if (lane % (32 / GEMV_RING_BATCH) != 0) {
            continue;
        }
        const unsigned int row = S > 1 ? lane : i;
        unsigned int g = DYN_END;
#pragma unroll
        for (int b = 0; b < NB; ++b)
            if (row / R == (unsigned int)b) g = ids[b];
        const unsigned long long n = (unsigned long long)g * R + row % R;
        if (g != DYN_END && n < N) out[n] = from_f32<T>(bias ? a + to_f32(bias[n]) : a);
    }
}

#define GEMV_RING_BODY"""


def dyn(t):
    # Declared outside the sm_90+ block, so the probe's host pass registers it too.
    t = sub(t, "#define GEMV_RING_THREADS (GEMV_RING_WARPS * 32 + 32)\n",
            "#define GEMV_RING_THREADS (GEMV_RING_WARPS * 32 + 32)\n"
            "__device__ unsigned int g_dyn_ctr[2];\n")
    t = sub(t, """template <typename T, int R>
__device__ __forceinline__ void gemv_ring_impl(""", """#ifndef RING_DYN_ROUNDS
#define RING_DYN_ROUNDS 1
#endif
#define DYN_END 0xffffffffu
template <typename T, int R>
__device__ __forceinline__ void gemv_ring_impl(""")
    t = sub(t, """    T* xs = reinterpret_cast<T*>(ring + nst * stage_bytes);
""", """    T* xs = reinterpret_cast<T*>(ring + nst * stage_bytes);
    __shared__ unsigned int dyn_id[GEMV_RING_MAX_STAGES];
    const unsigned int rounds = stages / gridDim.x;
    const unsigned int fixed = rounds > RING_DYN_ROUNDS ? rounds - RING_DYN_ROUNDS : 0;
""")
    a = t.index("""    if (warp == GEMV_RING_WARPS) {
        // The producer: stage t into slot t mod nst""")
    b = t.index("#define GEMV_RING_BODY")
    return t[:a] + DYN_PRODUCER + t[b + len("#define GEMV_RING_BODY"):]


def r8co2(t):
    return sub(t, "GEMV_RING_ENTRY(T, NAME, 8, 1)", "GEMV_RING_ENTRY(T, NAME, 8, 2)")


def r8half(t):
    return sub(r8co2(t), """                if (nr == R)
                    ring_rows<T, R, true>(xs, buf, R, K, seg * 32 + lane, S * 32, acc + b * R);
                else
                    ring_rows<T, R, false>(xs, buf, nr, K, seg * 32 + lane, S * 32, acc + b * R);
""", """                if constexpr (R == 8) {
                    for (unsigned int h = 0; h < 2; ++h) {
                        const unsigned int nh = nr > 4 * h ? min(nr - 4 * h, 4u) : 0u;
                        const unsigned char* bh = buf + 4 * h * (size_t)K * sizeof(T);
                        float* ah = acc + b * R + 4 * h;
                        if (nh == 4)
                            ring_rows<T, 4, true>(xs, bh, 4, K, seg * 32 + lane, S * 32, ah);
                        else if (nh > 0)
                            ring_rows<T, 4, false>(xs, bh, nh, K, seg * 32 + lane, S * 32, ah);
                    }
                } else if (nr == R) {
                    ring_rows<T, R, true>(xs, buf, R, K, seg * 32 + lane, S * 32, acc + b * R);
                } else {
                    ring_rows<T, R, false>(xs, buf, nr, K, seg * 32 + lane, S * 32, acc + b * R);
                }
""")


out = {"main": base, "taper": taper(base), "trig": trig(base), "wearly": wearly(base),
       "trigl": trigl(base), "trigf": trigf(base), "trigw": trigw(base), "stamp": stamp(base), "uscale": uscale(base), "uscale1": one_block(uscale(base)), "dyn": dyn(base), "r8co2": r8co2(base), "r8half": r8half(base)}
if "switch (R) {" in base:
    s31 = os.path.join(here, "..", "2026-11-26-s31", "gemv_variants.py")
    subprocess.run([sys.executable, s31, src, outdir], check=True, stdout=subprocess.DEVNULL)
    xreg = open(f"{outdir}/gemv_xregp.cu").read()
    out["one"] = body(base, "gemv_ring_impl<T, RING_R>")
    out["xreg"] = body(xreg, "gemv_ring_impl<T, RING_R, RING_NP, false>")
for name, text in out.items():
    open(f"{outdir}/gemv_{name}.cu", "w").write(text)
    print(name)
