#!/usr/bin/env python3
"""Session 30: a copy of attention.cu whose decode ring records when each block reaches each
step (SM clock and %globaltimer), for decode_probe.cu built with -DDECODE_TRACE.

usage: trace_patch.py attention.cu out.cu

Slots (per launch and block): 0 producer entry, 1 producer after the PDL wait, 2 first tensor
copy issued, 3 last copy issued, 4 consumer (thread 0) entry, 5 after the wait, 6 first tile
landed, 7 last tile landed, 8 last tile attended, 9 four-warp merge and partial written,
10 split counted, 11 split merge done (last split only), 12 the last flag, 13 the SM id,
14 producer lane 0 in its branch, 15 producer's first unit computed; in the last split's merge
(thread 0): 16 first group of partials at hand, 17 second group at hand, 18 its sums done.
"""
import sys

src = open(sys.argv[1]).read()


def sub(text, anchor, new, count=1):
    n = text.count(anchor)
    if n != count:
        sys.exit(f"anchor found {n} times, expected {count}: {anchor!r}")
    return text.replace(anchor, new)


def sub_any(text, pairs):
    """The first (anchor, replacement) whose anchor occurs exactly once (kernel versions differ)."""
    for anchor, new in pairs:
        if text.count(anchor) == 1:
            return text.replace(anchor, new)
    sys.exit(f"no anchor of {[a for a, _ in pairs]!r} found once")


HEAD = r"""
__device__ long long g_trc[32][132][20];
__device__ long long g_trg[32][132][20];
__device__ unsigned g_it[132];
__shared__ long long tr_c[20], tr_g[20];
__device__ __forceinline__ long long gtimer() {
    long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
#define TP(k) do { tr_c[k] = clock64(); tr_g[k] = gtimer(); } while (0)
"""

src = sub(src, "struct AttnArgs {", HEAD + "struct AttnArgs {")
src = sub(
    src,
    "    const unsigned units = batch * a.kv_heads * a.splits;\n    // Before the PDL wait",
    "    const unsigned units = batch * a.kv_heads * a.splits;\n"
    "    if (threadIdx.x == 32 * RING_CONSUMERS) TP(0);\n"
    "    if (threadIdx.x == 0) { TP(4); tr_c[11] = tr_g[11] = tr_c[12] = tr_c[16] = tr_c[17] = tr_c[18] = 0; }\n"
    "    // Before the PDL wait",
)
WAITED = "    if (threadIdx.x == 32 * RING_CONSUMERS) TP(1);\n    if (threadIdx.x == 0) TP(5);\n"
src = sub_any(
    src,
    [
        (
            "    pdl_enter();\n    if (a.position) a.kv_len = min(a.kv_len, (unsigned)max(*a.position, 0) + a.q_len);\n",
            "    pdl_enter();\n" + WAITED
            + "    if (a.position) a.kv_len = min(a.kv_len, (unsigned)max(*a.position, 0) + a.q_len);\n",
        ),
        ("    pdl_enter();\n    if (a.position) {\n", "    pdl_enter();\n" + WAITED + "    if (a.position) {\n"),
    ],
)
src = sub(
    src,
    "            unsigned s = 0, phase = 0, n = 0;\n",
    "            unsigned s = 0, phase = 0, n = 0;\n            bool tr_first = true;\n            TP(14);\n",
)
KEYS = "                for (unsigned key0 = un.begin; key0 < un.end; key0 += BN, ++n) {\n"
src = sub_any(
    src,
    [
        (
            "                const RingUnit un(u, a);\n" + KEYS,
            "                const RingUnit un(u, a);\n                if (tr_first) TP(15);\n" + KEYS,
        ),
        (
            "un = RingUnit(u, a)) {\n" + KEYS,
            "un = RingUnit(u, a)) {\n                if (tr_first) TP(15);\n" + KEYS,
        ),
    ],
)
src = sub(
    src,
    "                        tma_load_4d(ks + TILE + j * BN * 64, tv, 64 * j, key0, un.kvh, un.b, &full[s]);\n"
    "                    }\n",
    "                        tma_load_4d(ks + TILE + j * BN * 64, tv, 64 * j, key0, un.kvh, un.b, &full[s]);\n"
    "                    }\n"
    "                    if (tr_first) TP(2);\n                    tr_first = false;\n                    TP(3);\n",
)
src = sub(src, "    unsigned s = 0, phase = 0;\n", "    unsigned s = 0, phase = 0;\n    bool tr_first = true;\n")
src = sub(
    src,
    "            mbar_wait(&full[s], phase);\n            T* ks = ring + s * 2 * TILE;\n            const bool tail",
    "            mbar_wait(&full[s], phase);\n"
    "            if (threadIdx.x == 0) { if (tr_first) TP(6); tr_first = false; TP(7); }\n"
    "            T* ks = ring + s * 2 * TILE;\n            const bool tail",
)
src = sub(
    src,
    "            decode_attend<T, D, SwizzledKV>(qa, ks, ks + TILE, warp, key0, rows, a, st);\n",
    "            decode_attend<T, D, SwizzledKV>(qa, ks, ks + TILE, warp, key0, rows, a, st);\n"
    "            if (threadIdx.x == 0) TP(8);\n",
)
src = sub(src, "        if (whole) continue;\n", "        if (threadIdx.x == 0) TP(9);\n        if (whole) continue;\n")
src = sub(
    src,
    "        sync();\n        if (!last) continue;\n",
    "        sync();\n        if (threadIdx.x == 0) { TP(10); tr_c[12] = last; }\n        if (!last) continue;\n",
)
# Inside the split merge (thread 0): when the partials are at hand, and when done (16, 17, 18).
GROUP = "            ring_merge_group<D, W, true>(src, s0, RING_MERGE, r, c, m, l, acc);\n"
if src.count(GROUP) == 1:  # one pass in groups (ring_merge_group): 16, 17 the first two whole groups, 18 done
    src = sub(src, GROUP, "            if (threadIdx.x == 0 && s0 < 2 * RING_MERGE) TP(16 + s0 / RING_MERGE);\n" + GROUP)
    src = sub(
        src,
        "        const float inv = l > 0.0f ? 1.0f / l : 0.0f;\n        const unsigned h = kvh * group",
        "        if (threadIdx.x == 0) TP(18);\n        const float inv = l > 0.0f ? 1.0f / l : 0.0f;\n"
        "        const unsigned h = kvh * group",
    )
elif src.count("            src.ready(s0);\n") == 1:  # one pass, an online rescale per group
    src = sub(
        src,
        "            src.ready(s0);\n",
        "            src.ready(s0);\n            if (threadIdx.x == 0 && s0 < 2 * RING_MERGE) TP(16 + s0 / RING_MERGE);\n",
    )
    src = sub(
        src,
        "        const float inv = l > 0.0f ? 1.0f / l : 0.0f;\n        const unsigned h = kvh * group",
        "        if (threadIdx.x == 0) TP(18);\n        const float inv = l > 0.0f ? 1.0f / l : 0.0f;\n"
        "        const unsigned h = kvh * group",
    )
else:  # two passes: 16 all at hand, 17 weights done, 18 sums done
    src = sub(
        src,
        "    for (unsigned s0 = 0; s0 < splits; s0 += RING_MERGE) src.ready(s0);\n",
        "    for (unsigned s0 = 0; s0 < splits; s0 += RING_MERGE) src.ready(s0);\n    if (threadIdx.x == 0) TP(16);\n",
    )
    src = sub(src, "    sync();\n    for (unsigned e = threadIdx.x; e < nrows * CW;",
              "    sync();\n    if (threadIdx.x == 0) TP(17);\n    for (unsigned e = threadIdx.x; e < nrows * CW;")
    src = sub(src, "        const float l = lsum[r], inv", "        if (threadIdx.x == 0) TP(18);\n        const float l = lsum[r], inv")
# The progressive merge (split 0 merging as the splits finish), where the kernel has it.
PROG = "                ring_merge_progressive<T, D, 8>(src, flags, a.splits, nrows, out, a, un.b, un.kvh, ready);\n"
if src.count(PROG) == 1:
    src = sub(
        src,
        "            const RingPartials<D, false> src{head, nrows, nullptr};\n            if (nrows * (D / 4) <= ATTN_THREADS)\n"
        "                ring_merge_progressive",
        "            if (threadIdx.x == 0) { TP(10); tr_c[12] = 1; }\n"
        "            const RingPartials<D, false> src{head, nrows, nullptr};\n            if (nrows * (D / 4) <= ATTN_THREADS)\n"
        "                ring_merge_progressive",
    )
    src = sub(src, PROG + "            continue;\n", PROG + "            if (threadIdx.x == 0) TP(11);\n            continue;\n")
FLUSH = (
    "    if (threadIdx.x == 0) {\n"
    "        unsigned sm;\n        asm volatile(\"mov.u32 %0, %%smid;\" : \"=r\"(sm));\n"
    "        tr_c[13] = sm;\n"
    "        const unsigned it = g_it[blockIdx.x]++ % 32;\n"
    "        for (int k = 0; k < 20; ++k) {\n"
    "            g_trc[it][blockIdx.x][k] = ((volatile long long*)tr_c)[k];\n"
    "            g_trg[it][blockIdx.x][k] = ((volatile long long*)tr_g)[k];\n"
    "        }\n    }\n}\n"
)
src = sub_any(
    src,
    [
        (
            "            ring_merge_splits<T, D, 8>(po_head, pml_head, a.splits, nrows, out, a, un.b, un.kvh);\n    }\n}\n",
            "            ring_merge_splits<T, D, 8>(po_head, pml_head, a.splits, nrows, out, a, un.b, un.kvh);\n"
            "        if (threadIdx.x == 0) TP(11);\n    }\n" + FLUSH,
        ),
        (
            "                ring_merge_splits<T, D, 8>(src, a.splits, nrows, out, a, un.b, un.kvh);\n        }\n    }\n}\n",
            "                ring_merge_splits<T, D, 8>(src, a.splits, nrows, out, a, un.b, un.kvh);\n        }\n"
            "        if (threadIdx.x == 0) TP(11);\n    }\n" + FLUSH,
        ),
        (
            "                                  un.kvh);\n    }\n}\n",
            "                                  un.kvh);\n        if (threadIdx.x == 0) TP(11);\n    }\n" + FLUSH,
        ),
        (
            "un.b, un.kvh, wts, lsum, sync);\n        }\n    }\n}\n",
            "un.b, un.kvh, wts, lsum, sync);\n        }\n        if (threadIdx.x == 0) TP(11);\n    }\n" + FLUSH,
        ),
    ],
)
open(sys.argv[2], "w").write(src)
