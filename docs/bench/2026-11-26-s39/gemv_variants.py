#!/usr/bin/env python3
"""Session 39: copies of gemv.cu for probe.cu (docs/bench/2026-11-25-h200-s23).

main   gemv.cu as it is
jl     the block's last stage read by all of its consumer warps together (each lane a 1/256
       share of its packs, where one group of S warps read all of it), then reduced across the
       eight warps through shared memory by warp 0: session 38's timelines showed a block ending
       ~0.9 µs after its last stage landed, ~500 ns of it one group reading that stage. The group
       that owns the stage waits on its barrier and signals the others with a named barrier
       (bar.arrive), so it starts reading at once; the others join when their own batches are done.
pfm    at its entry, each block of the grid's first half also asks L2 for the first npre stages of
       its mirror block (grid − 1 − b): session 38's timelines showed the blocks that end a call
       are the highest-numbered (their multiprocessors free last), whose first stages land 3–4 µs
       after their copies, queued behind every earlier block's first ring
pfi    where the grid leaves multiprocessors idle (%nsmid − grid = I > 0), blocks 0 … I − 1 (which
       start on them, long before the previous call ends) ask L2 for the first npre stages of the
       grid's last quarter of blocks, block b for blocks grid − 1 − b − k·I
nored  (diagnostic, wrong outputs) no batch reduction: each thread adds its batch's sums and lane
       0 of each group's first warp stores that (no shuffles, no barrier, no cross-warp sums)
nolast (diagnostic, wrong outputs) each group waits for and releases its last stage of the
       block without reading it

Usage: gemv_variants.py SRC OUTDIR  ->  OUTDIR/gemv_<name>.cu for each variant."""
import sys

src, outdir = sys.argv[1], sys.argv[2]
base = open(src).read()


def sub(text, old, new):
    assert text.count(old) == 1, (old, text.count(old))
    return text.replace(old, new)


def jl(t):
    t = sub(t, """    float part[2][GEMV_RING_WARPS][GEMV_RING_BATCH];
};""", """    float part[2][GEMV_RING_WARPS][GEMV_RING_BATCH];
    float last[GEMV_RING_WARPS][8];
};""")
    t = sub(t, """    unsigned int s = grp, phase = 0, it = 0;
    for (unsigned int t = grp; t < mine; t += NB * G, ++it) {""",
            """    const unsigned int last = mine == 0 ? 0 : mine - 1;
    unsigned int s = grp, phase = 0, it = 0;
    for (unsigned int t = grp; t < last; t += NB * G, ++it) {""")
    t = sub(t, """            const unsigned int tb = t + b * G;
            if (tb < mine) {""", """            const unsigned int tb = t + b * G;
            if (tb < last) {""")
    t = sub(t, """        if (tb < mine && n < N) out[n] = from_f32<T>(bias ? a + to_f32(bias[n]) : a);
    }
}""", """        if (tb < last && n < N) out[n] = from_f32<T>(bias ? a + to_f32(bias[n]) : a);
    }
    if (mine == 0) return;
    const unsigned int ls = last % nst, lp = (last / nst) & 1;
    if (grp == last % G) {
        mbar_wait(&full[ls], lp);
        asm volatile("bar.arrive %0, %1;" ::"r"(GEMV_RING_WARPS + 1), "r"(GEMV_RING_WARPS * 32) : "memory");
    } else {
        named_barrier(GEMV_RING_WARPS + 1, GEMV_RING_WARPS * 32);
        mbar_wait(&full[ls], lp);
    }
    const unsigned long long r0 = (unsigned long long)(blockIdx.x + last * gridDim.x) * R;
    const unsigned int nr = (unsigned int)min((unsigned long long)R, N - r0);
    float acc[R];
#pragma unroll
    for (int i = 0; i < R; ++i) acc[i] = 0.0f;
    const unsigned char* buf = ring + ls * stage_bytes;
    if (nr == R)
        ring_rows<T, R, true>(xs, buf, R, K, threadIdx.x, GEMV_RING_WARPS * 32, acc);
    else
        ring_rows<T, R, false>(xs, buf, nr, K, threadIdx.x, GEMV_RING_WARPS * 32, acc);
    const float a = warp_sum_rows<R>(acc, lane);
    if (lane % (32 / R) == 0) sh.last[warp][lane / (32 / R)] = a;
    named_barrier(GEMV_RING_WARPS + 2, GEMV_RING_WARPS * 32);
    if (warp == 0 && lane < nr) {
        float v = 0.0f;
#pragma unroll
        for (int w = 0; w < GEMV_RING_WARPS; ++w) v += sh.last[w][lane];
        const unsigned long long n = r0 + lane;
        out[n] = from_f32<T>(bias ? v + to_f32(bias[n]) : v);
    }
}""")
    return t


OWN_PREFETCH = """            prefetch_l2_lines(nr * row_bytes, lane, w + r0 * K);
        }
"""


def pfm(t):
    return sub(t, OWN_PREFETCH, OWN_PREFETCH + """        const unsigned int mb = gridDim.x - 1 - blockIdx.x;
        if (mb > blockIdx.x && mb < stages) {
            const unsigned int mm = (stages - 1 - mb) / gridDim.x + 1;
            for (unsigned int t = 0; t < mm && t < npre; ++t) {
                const unsigned long long r0 = (unsigned long long)(mb + t * gridDim.x) * R;
                const unsigned int nr = (unsigned int)min((unsigned long long)R, N - r0);
                prefetch_l2_lines(nr * row_bytes, lane, w + r0 * K);
            }
        }
""")


def pfi(t):
    return sub(t, OWN_PREFETCH, OWN_PREFETCH + """        unsigned int nsm;
        asm("mov.u32 %0, %%nsmid;" : "=r"(nsm));
        const unsigned int idle = nsm > gridDim.x ? nsm - gridDim.x : 0;
        for (unsigned int j = blockIdx.x; blockIdx.x < idle && j < gridDim.x / 4; j += idle) {
            const unsigned int mb = gridDim.x - 1 - j;
            if (mb >= stages) continue;
            const unsigned int mm = (stages - 1 - mb) / gridDim.x + 1;
            for (unsigned int t = 0; t < mm && t < npre; ++t) {
                const unsigned long long r0 = (unsigned long long)(mb + t * gridDim.x) * R;
                const unsigned int nr = (unsigned int)min((unsigned long long)R, N - r0);
                prefetch_l2_lines(nr * row_bytes, lane, w + r0 * K);
            }
        }
""")


def nored(t):
    return sub(t, """        // Lane l now holds row l / 4 of the batch, summed over the warp; then over the group.
        float a = warp_sum_rows<GEMV_RING_BATCH>(acc, lane);""", """        float a = 0.0f;
#pragma unroll
        for (int i = 0; i < GEMV_RING_BATCH; ++i) a += acc[i];
        if (seg == 0 && lane == 0) out[(unsigned long long)(blockIdx.x + t * gridDim.x) * R % N] = from_f32<T>(a);
        if (S > 0) continue;""")


def nolast(t):
    return sub(t, """                const unsigned char* buf = ring + s * stage_bytes;
                if (nr == R)""", """                const unsigned char* buf = ring + s * stage_bytes;
                if (tb + G >= mine) {
                } else if (nr == R)""")


variants = {"main": base, "jl": jl(base), "pfm": pfm(base), "pfi": pfi(base), "nored": nored(base),
            "nolast": nolast(base)}
for name, text in variants.items():
    open(f"{outdir}/gemv_{name}.cu", "w").write(text)
    print(name)
