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
jld    jl with each group's final batch not reduced before the joint stage: every group reads its
       share of the block's last stage in its final batch, then reduces that batch and its share
       together, with one barrier of all eight warps instead of the group's (jl reduced the final
       batch first, which put a whole reduction on the path to the last stage)
jld3   jld with the 2- and 4-row entry points compiled for three blocks an SM (__launch_bounds__),
       as the small ring's blocks fit without it (64 / 72 registers before jld)
roll   the batch's stage loop kept rolled (#pragma unroll 1): each stage summed into R fresh
       registers, then the batch's sums shifted down by R and these appended, so one copy of
       ring_rows serves every stage of a batch (the unrolled loop inlined it NB = 8 / R times, twice
       with the partial-stage copy: R = 2's kernel has 2688 SASS instructions, ~43 KB); the same
       sums bit for bit
rolljld  jld with roll
roll3  roll with the 2- and 4-row entry points held to three blocks an SM
jldtl  jld with session 38's per-stage timestamps (probe.cu -DPROBE_TIMELINE): stage issued /
       landed (the owner's first warp) / released (the joint stage: warp 0's share read), each
       group's end after its stores
maintl main with the same timestamps (session 38's "timeline")
barx   (diagnostic, for the next session: not run) main with every consumer warp waiting at one
       barrier of all eight after its last batch, so no group's warps exit before the block's
       last: if this is as slow as jld, keeping the warps to the end is what jld loses
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


CONSUMERS_FROM = """    unsigned int s = grp, phase = 0, it = 0;
    for (unsigned int t = grp; t < mine; t += NB * G, ++it) {"""
CONSUMERS_TO = """
#define GEMV_RING_BODY(T, R)"""
JLD = """    if (mine == 0) return;
    const unsigned int last = mine - 1;
    const unsigned long long rl = (unsigned long long)(blockIdx.x + last * gridDim.x) * R;
    const unsigned int nl = (unsigned int)min((unsigned long long)R, N - rl);
    unsigned int s = grp, phase = 0, it = 0;
    for (unsigned int t = grp;; t += NB * G, ++it) {
        const bool final = t + NB * G >= last;
        float acc[GEMV_RING_BATCH];
#pragma unroll
        for (int i = 0; i < GEMV_RING_BATCH; ++i) acc[i] = 0.0f;
#pragma unroll
        for (int b = 0; b < NB; ++b) {
            const unsigned int tb = t + b * G;
            if (tb < last) {
                const unsigned long long r0 = (unsigned long long)(blockIdx.x + tb * gridDim.x) * R;
                const unsigned int nr = (unsigned int)min((unsigned long long)R, N - r0);
                mbar_wait(&full[s], phase);
                const unsigned char* buf = ring + s * stage_bytes;
                if (nr == R)
                    ring_rows<T, R, true>(xs, buf, R, K, seg * 32 + lane, S * 32, acc + b * R);
                else
                    ring_rows<T, R, false>(xs, buf, nr, K, seg * 32 + lane, S * 32, acc + b * R);
                mbar_arrive(&empty[s]);
                ring_next(s, phase, nst, G);
            }
        }
        float aj[R];
#pragma unroll
        for (int i = 0; i < R; ++i) aj[i] = 0.0f;
        if (final) {
            const unsigned int ls = last % nst, lp = (last / nst) & 1;
            if (grp == last % G) {
                mbar_wait(&full[ls], lp);
                asm volatile("bar.arrive %0, %1;" ::"r"(GEMV_RING_WARPS + 1), "r"(GEMV_RING_WARPS * 32) : "memory");
            } else {
                named_barrier(GEMV_RING_WARPS + 1, GEMV_RING_WARPS * 32);
                mbar_wait(&full[ls], lp);
            }
            const unsigned char* buf = ring + ls * stage_bytes;
            if (nl == R)
                ring_rows<T, R, true>(xs, buf, R, K, threadIdx.x, GEMV_RING_WARPS * 32, aj);
            else
                ring_rows<T, R, false>(xs, buf, nl, K, threadIdx.x, GEMV_RING_WARPS * 32, aj);
        }
        float a = warp_sum_rows<GEMV_RING_BATCH>(acc, lane);
        const unsigned int i = lane / (32 / GEMV_RING_BATCH);
        if (final) {
            const float al = warp_sum_rows<R>(aj, lane);
            if (lane % (32 / R) == 0) sh.last[warp][lane / (32 / R)] = al;
        }
        bool store = lane % (32 / GEMV_RING_BATCH) == 0;
        unsigned int row = i;
        if (S > 1 || final) {
            if (lane % (32 / GEMV_RING_BATCH) == 0) part[it & 1][warp][i] = a;
            if (final)
                named_barrier(GEMV_RING_WARPS + 2, GEMV_RING_WARPS * 32);
            else
                named_barrier(1 + grp, S * 32);
            if (final && warp == 0 && lane < nl) {
                float v = 0.0f;
#pragma unroll
                for (int w = 0; w < GEMV_RING_WARPS; ++w) v += sh.last[w][lane];
                out[rl + lane] = from_f32<T>(bias ? v + to_f32(bias[rl + lane]) : v);
            }
            if (S > 1) {
                store = seg == 0 && lane < GEMV_RING_BATCH;
                row = lane;
                if (store) {
                    a = 0.0f;
                    for (unsigned int j = 0; j < S; ++j) a += part[it & 1][grp * S + j][lane];
                }
            }
        }
        if (store) {
            const unsigned int tb = t + row / R * G;
            const unsigned long long n = (unsigned long long)(blockIdx.x + tb * gridDim.x) * R + row % R;
            if (tb < last && n < N) out[n] = from_f32<T>(bias ? a + to_f32(bias[n]) : a);
        }
        if (final) break;
    }
}
"""


def jld(t):
    t = sub(t, """    float part[2][GEMV_RING_WARPS][GEMV_RING_BATCH];
};""", """    float part[2][GEMV_RING_WARPS][GEMV_RING_BATCH];
    float last[GEMV_RING_WARPS][8];
};""")
    a = t.index(CONSUMERS_FROM)
    b = t.index(CONSUMERS_TO)
    return t[:a] + JLD + t[b:]


def roll(t, bound="mine"):
    old = """#pragma unroll
        for (int b = 0; b < NB; ++b) {
            const unsigned int tb = t + b * G;
            if (tb < BOUND) {
                const unsigned long long r0 = (unsigned long long)(blockIdx.x + tb * gridDim.x) * R;
                const unsigned int nr = (unsigned int)min((unsigned long long)R, N - r0);
                mbar_wait(&full[s], phase);
                const unsigned char* buf = ring + s * stage_bytes;
                if (nr == R)
                    ring_rows<T, R, true>(xs, buf, R, K, seg * 32 + lane, S * 32, acc + b * R);
                else
                    ring_rows<T, R, false>(xs, buf, nr, K, seg * 32 + lane, S * 32, acc + b * R);
""".replace("BOUND", bound)
    new = """#pragma unroll 1
        for (int b = 0; b < NB; ++b) {
            const unsigned int tb = t + b * G;
            float st[R];
#pragma unroll
            for (int j = 0; j < R; ++j) st[j] = 0.0f;
            if (tb < BOUND) {
                const unsigned long long r0 = (unsigned long long)(blockIdx.x + tb * gridDim.x) * R;
                const unsigned int nr = (unsigned int)min((unsigned long long)R, N - r0);
                mbar_wait(&full[s], phase);
                const unsigned char* buf = ring + s * stage_bytes;
                if (nr == R)
                    ring_rows<T, R, true>(xs, buf, R, K, seg * 32 + lane, S * 32, st);
                else
                    ring_rows<T, R, false>(xs, buf, nr, K, seg * 32 + lane, S * 32, st);
""".replace("BOUND", bound)
    t = sub(t, old, new)
    # The stage's sums appended after the release.
    old2 = """                ring_next(s, phase, nst, G);
            }
        }
"""
    new2 = """                ring_next(s, phase, nst, G);
            }
#pragma unroll
            for (int i = 0; i < GEMV_RING_BATCH - R; ++i) acc[i] = acc[i + R];
#pragma unroll
            for (int j = 0; j < R; ++j) acc[GEMV_RING_BATCH - R + j] = st[j];
        }
"""
    return sub(t, old2, new2)


def minb3(t):
    t = sub(t, "GEMV_RING_ENTRY(T, NAME, 2, 2)", "GEMV_RING_ENTRY(T, NAME, 2, 3)")
    return sub(t, "GEMV_RING_ENTRY(T, NAME, 4, 2)", "GEMV_RING_ENTRY(T, NAME, 4, 3)")


TL_DECL = """#define GEMV_RING_THREADS (GEMV_RING_WARPS * 32 + 32)
"""
TL_HELPERS = """template <typename T, int R>
__device__ __forceinline__ void gemv_ring_impl("""


def stamps(t, joint):
    t = sub(t, TL_DECL, TL_DECL + """#define TL_BLOCKS 264
#define TL_STAGES 64
__device__ unsigned long long g_tl[TL_BLOCKS][4][TL_STAGES];
""")
    t = sub(t, TL_HELPERS, """__device__ __forceinline__ unsigned long long now_ns() {
    unsigned long long v;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(v));
    return v;
}
__device__ __forceinline__ unsigned long long now_ns_after(float f) {
    unsigned long long v;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(v) : "f"(f));
    return v;
}
""" + TL_HELPERS)
    t = sub(t, """            pdl_wait();
            // x first""", """            pdl_wait();
            if (blockIdx.x < TL_BLOCKS) g_tl[blockIdx.x][3][0] = now_ns();
            // x first""")
    t = sub(t, """                bulk_load(ring + s * stage_bytes, w + r0 * K, nr * row_bytes, &full[s]);
""", """                bulk_load(ring + s * stage_bytes, w + r0 * K, nr * row_bytes, &full[s]);
                if (blockIdx.x < TL_BLOCKS && t < TL_STAGES) g_tl[blockIdx.x][0][t] = now_ns();
""")
    t = sub(t, """                mbar_wait(&full[s], phase);
                const unsigned char* buf = ring + s * stage_bytes;
""", """                mbar_wait(&full[s], phase);
                const bool tl = seg == 0 && lane == 0 && blockIdx.x < TL_BLOCKS && tb < TL_STAGES;
                if (tl) g_tl[blockIdx.x][1][tb] = now_ns();
                const unsigned char* buf = ring + s * stage_bytes;
""")
    t = sub(t, """                mbar_arrive(&empty[s]);
                ring_next(s, phase, nst, G);
""", """                if (tl) g_tl[blockIdx.x][2][tb] = now_ns_after(acc[b * R] + acc[b * R + R - 1]);
                mbar_arrive(&empty[s]);
                ring_next(s, phase, nst, G);
""")
    if not joint:
        return sub(t, """        if (tb < mine && n < N) out[n] = from_f32<T>(bias ? a + to_f32(bias[n]) : a);
    }
}
""", """        if (tb < mine && n < N) out[n] = from_f32<T>(bias ? a + to_f32(bias[n]) : a);
        if (seg == 0 && lane == 0 && blockIdx.x < TL_BLOCKS) g_tl[blockIdx.x][3][1 + grp] = now_ns_after(a);
    }
}
""")
    t = sub(t, """                mbar_wait(&full[ls], lp);
                asm volatile""", """                mbar_wait(&full[ls], lp);
                if (seg == 0 && lane == 0 && blockIdx.x < TL_BLOCKS && last < TL_STAGES)
                    g_tl[blockIdx.x][1][last] = now_ns();
                asm volatile""")
    t = sub(t, """        float a = warp_sum_rows<GEMV_RING_BATCH>(acc, lane);
        const unsigned int i = lane / (32 / GEMV_RING_BATCH);
        if (final) {""", """        if (final && warp == 0 && lane == 0 && blockIdx.x < TL_BLOCKS && last < TL_STAGES)
            g_tl[blockIdx.x][2][last] = now_ns_after(aj[0] + aj[R - 1]);
        float a = warp_sum_rows<GEMV_RING_BATCH>(acc, lane);
        const unsigned int i = lane / (32 / GEMV_RING_BATCH);
        if (final) {""")
    return sub(t, """        if (final) break;
    }
}
""", """        if (final) {
            if (seg == 0 && lane == 0 && blockIdx.x < TL_BLOCKS) g_tl[blockIdx.x][3][1 + grp] = now_ns_after(a);
            break;
        }
    }
}
""")


def barx(t):
    return sub(t, """        if (tb < mine && n < N) out[n] = from_f32<T>(bias ? a + to_f32(bias[n]) : a);
    }
}
""", """        if (tb < mine && n < N) out[n] = from_f32<T>(bias ? a + to_f32(bias[n]) : a);
    }
    named_barrier(GEMV_RING_WARPS + 1, GEMV_RING_WARPS * 32);
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
            "nolast": nolast(base), "jld": jld(base), "roll": roll(base),
            "rolljld": roll(jld(base), "last"),
            "jld3": minb3(jld(base)), "roll3": minb3(roll(base)),
            "jldtl": stamps(jld(base), True), "maintl": stamps(base, False), "barx": barx(base)}
for name, text in variants.items():
    open(f"{outdir}/gemv_{name}.cu", "w").write(text)
    print(name)
