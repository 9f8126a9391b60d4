#!/usr/bin/env python3
"""Session 43: the small ring GEMV's L2 prefetch before the PDL wait, paced. Session 42 found
that a launch's stages, asked of L2 before its wait, land slower while the next launch's
prefetches are in flight (reads that hit L2 wait behind the HBM reads). Main asks L2 for all of
a block's first npre stages at once at its entry, so ~7.5 MB of prefetches reach the memory
system together at (896, 4864). These copies spread them out.

pace    the producer asks for the first PACE_P0 stages at the block's entry; after the block
        barrier consumer warp c (before its PDL wait) asks for stage PACE_P0 + c at
        entry + (c + 1) · PACE_D ns (%globaltimer; legal before the wait: prefetches only)
tpace   pace on session 37's trig (the next launch let in at the kernel's entry, so its blocks
        enter about a call ahead and their paced prefetches can spread over it)
        (pace variants: the 4-row entry point compiled for three blocks an SM, as main's
        registers give it)
pevl    main with its prefetches marked evict-last in L2 (prefetch.global.L2::evict_last)
chainp, chaintp
        pace and tpace with session 42's per-block stamps (chain_variants.py's chain)

Usage: pace_variants.py SRC PROBE OUTDIR -> OUTDIR/gemv_<name>.cu (PACE_P0, PACE_D: nvcc -D)."""
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


def pace(t):
    t = sub(t, """template <typename T, int R>
__device__ __forceinline__ void gemv_ring_impl(""", """#ifndef PACE_P0
#define PACE_P0 2
#endif
#ifndef PACE_D
#define PACE_D 250
#endif
__device__ __forceinline__ unsigned long long pace_now() {
    unsigned long long v;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(v));
    return v;
}
template <typename T, int R>
__device__ __forceinline__ void gemv_ring_impl(""")
    t = sub(t, """    const unsigned int mine = blockIdx.x < stages ? (stages - 1 - blockIdx.x) / gridDim.x + 1 : 0;
""", """    const unsigned int mine = blockIdx.x < stages ? (stages - 1 - blockIdx.x) / gridDim.x + 1 : 0;
    const unsigned long long pace_t0 = pace_now();
""")
    t = sub(t, "        for (unsigned int t = 0; t < mine && t < npre; ++t) {\n",
            "        for (unsigned int t = 0; t < mine && t < npre && t < PACE_P0; ++t) {\n")
    return sub(t, """    __syncthreads();
    if (warp == GEMV_RING_WARPS) {
        // The producer: stage t""", """    __syncthreads();
    if (warp < GEMV_RING_WARPS) {
        const unsigned int t = PACE_P0 + warp;
        if (t < mine && t < npre) {
            const unsigned long long due = pace_t0 + (unsigned long long)(warp + 1) * PACE_D;
            while (pace_now() < due) __nanosleep(64);
            const unsigned long long pr = (unsigned long long)R * (blockIdx.x + t * gridDim.x);
            prefetch_l2_lines((unsigned int)min((unsigned long long)R, N - pr) * row_bytes, lane,
                              w + pr * K);
        }
    }
    if (warp == GEMV_RING_WARPS) {
        // The producer: stage t""")


def three(t):
    # The 4-row entry point held to three blocks an SM, as main's 72 registers allow (tpace
    # took 80, which leaves two).
    return sub(t, "GEMV_RING_ENTRY(T, NAME, 4, 2)", "GEMV_RING_ENTRY(T, NAME, 4, 3)")


def pevl(t):
    return sub(t, """            prefetch_l2_lines(nr * row_bytes, lane, w + r0 * K);
""", """            for (unsigned int o = 128 * lane; o < nr * row_bytes; o += 32 * 128)
                asm volatile("prefetch.global.L2::evict_last [%0];" ::"l"(
                    reinterpret_cast<const char*>(w + r0 * K) + o));
""")


# chain_variants.py on the paced source gives its trig and chain copies of it.
with tempfile.TemporaryDirectory() as tmp:
    psrc = os.path.join(tmp, "gemv_pace_src.cu")
    open(psrc, "w").write(pace(base))
    os.mkdir(os.path.join(tmp, "out"))
    subprocess.run([sys.executable, os.path.join(here, "..", "2026-11-27-s42", "chain_variants.py"),
                    psrc, probe, os.path.join(tmp, "out")], check=True, stdout=subprocess.DEVNULL)
    for theirs, ours in (("main", "pace"), ("trig", "tpace"), ("chain", "chainp"),
                         ("chaint", "chaintp")):
        text = open(os.path.join(tmp, "out", f"gemv_{theirs}.cu")).read()
        open(f"{outdir}/gemv_{ours}.cu", "w").write(three(text))
open(f"{outdir}/gemv_pevl.cu", "w").write(pevl(base))
print("pace tpace chainp chaintp pevl")
