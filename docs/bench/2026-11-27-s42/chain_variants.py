#!/usr/bin/env python3
"""Session 42: patched copies of gemv.cu for session 23's probe.cu (timing only), and a copy of
that probe which prints the cross-launch chain (probe_chain.cu).

main    gemv.cu as given
wearly  session 37's variant (its gemv_variants.py): the first ring of stages copied into shared
        memory before the PDL wait (legal only for weights nothing writes while the GEMV runs)
trig    session 37's: the next launch let in at the kernel's entry (call 5 runs it with two
        blocks an SM, so at most two launches' blocks share an SM)
trigw   session 37's: the next launch let in right after the PDL wait, before x lands
ldpre   before the PDL wait the producer warp asks for its first npre stages with 16-byte
        cp.async copies (L2::256B, bypassing L1: one per 256 bytes) into a scratch area of
        shared memory that nothing reads, instead of prefetch.global.L2 line by line: a demand
        read that L2 cannot drop, still legal before the wait (the values are discarded and L2
        is where the previous kernel's writes land)
bulkpre the first npre stages asked of L2 with one cp.async.bulk.prefetch.L2 each (lane 0)
        instead of prefetch.global.L2 line by line
trigld  trig with ldpre; trigbp trig with bulkpre
xld     x read by the consumer warps (16-byte L2 loads, a named barrier) after the PDL wait instead
        of a bulk copy the producer issues before its stages (wearly's copies of the stages, in
        flight when the wait returns, delay x's bulk copy behind them: call 1)
wearlyx wearly with xld
nodot   the consumers wait for each stage and release it without reading it (a bound; wrong sums)
chain*  the same kernels recording, per block and per launch (slot: the weight copy's index
        mod 16, from g_wbase / g_wbytes, which probe_chain.cu sets), %globaltimer at its entry,
        its producer's PDL wait returning, x landing, each group's first and last stage landing
        and each group's end; probe_chain.cu prints the last three launches of the timed graph
        relative to the middle one's first PDL wait; with PROBE_COPIES=c (environment) it rotates
        c copies of the weights instead of the ops bench's count (1: the weights stay in L2)

Usage: chain_variants.py SRC PROBE OUTDIR -> OUTDIR/gemv_<name>.cu, OUTDIR/probe_chain.cu."""
import os
import subprocess
import sys
import tempfile

src, probe, outdir = sys.argv[1:4]
base = open(src).read()
here = os.path.dirname(os.path.abspath(__file__))


def sub(text, old, new):
    assert text.count(old) == 1, (old, text.count(old))
    return text.replace(old, new)


with tempfile.TemporaryDirectory() as tmp:
    s37 = os.path.join(here, "..", "2026-11-26-s37", "gemv_variants.py")
    subprocess.run([sys.executable, s37, src, tmp], check=True, stdout=subprocess.DEVNULL)
    wearly, trig, trigw = (open(os.path.join(tmp, f"gemv_{v}.cu")).read()
                           for v in ("wearly", "trig", "trigw"))

PREFETCH = """            prefetch_l2_lines(nr * row_bytes, lane, w + r0 * K);
"""


def ldpre(t):
    t = sub(t, """    float part[2][GEMV_RING_WARPS][GEMV_RING_BATCH];
};""", """    float part[2][GEMV_RING_WARPS][GEMV_RING_BATCH];
    __align__(16) unsigned char scratch[32][16];
};""")
    return sub(t, PREFETCH, """            const char* p = reinterpret_cast<const char*>(w + r0 * K);
            const unsigned int d = (unsigned int)__cvta_generic_to_shared(&sh.scratch[lane][0]);
            for (unsigned int o = 256 * lane; o < nr * row_bytes; o += 32 * 256)
                asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16;" ::"r"(d), "l"(p + o)
                             : "memory");
""")


def bulkpre(t):
    return sub(t, PREFETCH, """            if (lane == 0) bulk_prefetch_l2(w + r0 * K, nr * row_bytes);
""")


def xld(t):
    if "if (t == early) {" in t:
        t = sub(t, """                    bulk_load(xs, x, row_bytes, &sh.x_full);
""", "")
    else:
        t = sub(t, """            // x first (one copy; the consumers need it for every stage), then the stages.
            bulk_load(xs, x, row_bytes, &sh.x_full);
""", "")
    return sub(t, """    pdl_wait();
    mbar_wait(&sh.x_full, 0);
""", """    pdl_wait();
    for (unsigned int i = threadIdx.x; i < row_bytes / 16; i += GEMV_RING_WARPS * 32)
        reinterpret_cast<uint4*>(xs)[i] = __ldcg(reinterpret_cast<const uint4*>(x) + i);
    named_barrier(15, GEMV_RING_WARPS * 32);
""")


def nodot(t):
    return sub(t, """                if (nr == R)
                    ring_rows""", """                if (K != 0x7fffffffu) {
                } else if (nr == R)
                    ring_rows""")


def chain(t):
    t = sub(t, "#define GEMV_RING_THREADS (GEMV_RING_WARPS * 32 + 32)\n",
            "#define GEMV_RING_THREADS (GEMV_RING_WARPS * 32 + 32)\n"
            "#define CH_SLOTS 16\n#define CH_BLOCKS 264\n#define CH_F 15\n"
            "// [slot][block]: 0 entry, 1 wait, 2 x landed, 3 + g group g's first stage landed,\n"
            "// 7 + g its last, 11 + g its end\n"
            "__device__ unsigned long long g_ch[CH_SLOTS][CH_BLOCKS][CH_F];\n"
            "__device__ const char* g_wbase;\n__device__ unsigned long long g_wbytes;\n")
    t = sub(t, """template <typename T, int R>
__device__ __forceinline__ void gemv_ring_impl(""", """__device__ __forceinline__ unsigned long long ch_now() {
    unsigned long long v;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(v));
    return v;
}
__device__ __forceinline__ unsigned long long ch_now_after(float f) {
    unsigned long long v;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(v) : "f"(f));
    return v;
}
template <typename T, int R>
__device__ __forceinline__ void gemv_ring_impl(""")
    t = sub(t, """    T* xs = reinterpret_cast<T*>(ring + nst * stage_bytes);
""", """    T* xs = reinterpret_cast<T*>(ring + nst * stage_bytes);
    const bool ch = blockIdx.x < CH_BLOCKS;
    unsigned long long* chb =
        g_ch[(unsigned int)(((const char*)w - g_wbase) / g_wbytes) % CH_SLOTS][ch ? blockIdx.x : 0];
    if (ch && threadIdx.x == 0) chb[0] = ch_now();
""")
    # The producer's wait (wearly waits inside its copy loop).
    wait = ("if (t == early) {\n" + " " * 20 if "if (t == early) {" in t
            else "if (lane == 0) {\n" + " " * 12) + "pdl_wait();\n"
    t = sub(t, wait, wait + " " * (wait.count(" ") - 4) + "if (ch) chb[1] = ch_now();\n")
    t = sub(t, """    // Group grp takes""", """    if (ch && threadIdx.x == 0) chb[2] = ch_now();
    // Group grp takes""")
    t = sub(t, """                mbar_wait(&full[s], phase);
                const unsigned char* buf = ring + s * stage_bytes;
""", """                mbar_wait(&full[s], phase);
                if (ch && seg == 0 && lane == 0) {
                    const unsigned long long v = ch_now();
                    if (tb == grp) chb[3 + grp] = v;
                    chb[7 + grp] = v;
                }
                const unsigned char* buf = ring + s * stage_bytes;
""")
    return sub(t, """        if (tb < mine && n < N) out[n] = from_f32<T>(bias ? a + to_f32(bias[n]) : a);
    }
}
""", """        if (tb < mine && n < N) out[n] = from_f32<T>(bias ? a + to_f32(bias[n]) : a);
        if (ch && seg == 0 && lane == 0) chb[11 + grp] = ch_now_after(a);
    }
}
""")


PRINT = r"""#ifdef PROBE_CHAIN
        if (R && grid <= CH_BLOCKS) {
            static unsigned long long chv[CH_SLOTS][CH_BLOCKS][CH_F];
            CK(cudaMemcpyFromSymbol(chv, g_ch, sizeof chv));
            const unsigned G = GEMV_RING_WARPS / S;
            // The timed graph's launches 47, 48, 49 (of 50) read copies i mod `copies`.
            unsigned long long t0 = ~0ull;
            for (unsigned b = 0; b < grid; ++b) t0 = std::min(t0, chv[48 % copies % CH_SLOTS][b][1]);
            printf("%-8s chain k=%u n=%u (ns after launch 48's first PDL wait; min/median/max over blocks)\n",
                   variant, K, N);
            for (int l = 47; l <= 49; ++l) {
                auto& c = chv[l % copies % CH_SLOTS];
                auto stat = [&](auto f) {
                    std::vector<long long> v;
                    for (unsigned b = 0; b < grid; ++b) v.push_back(f(c[b]));
                    std::sort(v.begin(), v.end());
                    printf(" %lld/%lld/%lld", v.front(), v[v.size() / 2], v.back());
                };
                auto rel = [&](unsigned long long x) { return (long long)(x - t0); };
                printf("  launch %d: entry", l);
                stat([&](auto& r) { return rel(r[0]); });
                printf(" wait");
                stat([&](auto& r) { return rel(r[1]); });
                printf(" x");
                stat([&](auto& r) { return rel(r[2]); });
                printf(" first");
                stat([&](auto& r) { unsigned long long m = ~0ull; for (unsigned g = 0; g < G; ++g) m = std::min(m, r[3 + g]); return rel(m); });
                printf(" last");
                stat([&](auto& r) { unsigned long long m = 0; for (unsigned g = 0; g < G; ++g) m = std::max(m, r[7 + g]); return rel(m); });
                printf(" end");
                stat([&](auto& r) { unsigned long long m = 0; for (unsigned g = 0; g < G; ++g) m = std::max(m, r[11 + g]); return rel(m); });
                printf("\n");
            }
        }
#endif
"""

p = open(probe).read()
p = sub(p, """        double us = 0;
""", """#ifdef PROBE_CHAIN
        {
            const char* wb = reinterpret_cast<const char*>(w);
            const unsigned long long nb = bytes;
            CK(cudaMemcpyToSymbol(g_wbase, &wb, sizeof wb));
            CK(cudaMemcpyToSymbol(g_wbytes, &nb, sizeof nb));
        }
#endif
        double us = 0;
""")
p = sub(p, """        CK(cudaMemset(out, 0xff, N * 2));
""", PRINT + """        CK(cudaMemset(out, 0xff, N * 2));
""")
# PROBE_COPIES=c rotates c copies of the weights instead of the ops bench's count (1: all in L2).
p = sub(p, """const size_t bytes = size_t(N) * K * 2, copies = rotation(bytes);""",
        """const size_t bytes = size_t(N) * K * 2,
                     copies = getenv("PROBE_COPIES") ? atoi(getenv("PROBE_COPIES")) : rotation(bytes);""")
p = p.replace('#include "../2026-11-24-h200-s19/harness.cuh"',
              '#include "%s"' % os.path.abspath(os.path.join(os.path.dirname(probe), "..",
                                                             "2026-11-24-h200-s19", "harness.cuh")))

out = {"main": base, "wearly": wearly, "ldpre": ldpre(base), "xld": xld(base),
       "wearlyx": xld(wearly), "chain": chain(base), "chainw": chain(wearly),
       "chainl": chain(ldpre(base)), "chainx": chain(xld(base)), "chainwx": chain(xld(wearly)), "nodot": nodot(base),
       "chainn": chain(nodot(base)), "trig": trig, "trigw": trigw, "chaint": chain(trig),
       "trigld": ldpre(trig), "trigbp": bulkpre(trig),
       "chaintld": chain(ldpre(trig)), "chaintbp": chain(bulkpre(trig))}
for name, text in out.items():
    open(f"{outdir}/gemv_{name}.cu", "w").write(text)
open(f"{outdir}/probe_chain.cu", "w").write(p)
print(" ".join(out))
