#!/usr/bin/env python3
"""Session 34: how fast the decode ring streams the cache, without its arithmetic (patched copies
of attention.cu for this session's decode_probe.cu; the outputs of bare and bulk are not
attention: they only time the stream).

main   attention.cu as it is
bare   the consumers only wait for each tile and release it: no attention, no merges, no count
bulk   bare, with each stage copied as two 1-d bulk copies (the K tile's 16 KiB, then the V
       tile's, contiguous in the cache) instead of four 8 KiB tensor boxes
bswz   the whole attention, with bulk's copies: the producer warp (all 32 lanes) rewrites each
       landed tile in place into the 128-byte swizzle the tensor copies write (through
       registers), then arrives on a third barrier per slot that the consumers wait for; it
       polls its slots' barriers (test_wait) to issue copies and take landed tiles in turn.
       The consumers' shared memory is the same, so the outputs must equal main's bitwise.
hr     the whole attention on tensor copies of one box a K or V tile: the tensor maps see each
       key's 256-byte row as two 128-byte lines (ATTN_HALFROW_MAP in the probe), so a box of
       128 lines is the tile's 16 KiB, contiguous in the cache, and lands with line 2r + h
       (key r, half h) in the 128-byte swizzle; the consumers read that layout (SwizzledKV),
       which has 2-way bank conflicts (lines 2r + h of eight keys give four swizzle patterns).
       head_dim 128 only (the probe's). Outputs must equal main's bitwise.
bare_hr bare on hr's copies
rows   the whole attention on 1-d bulk copies of each key's row (256 bytes; 128 a stage, four a
       lane of the producer warp) into rows padded by 8 elements, the layout the portable
       kernel reads without bank conflicts (PaddedKV); outputs must equal main's bitwise
bare_rows bare on rows' copies
bswz2  bswz's rewrite by a sixth warp of its own, which waits for each landed tile (try_wait, as
       the consumers do) while the producer's lane 0 issues copies as on main: no polling.

Usage: stream_variants.py SRC_DIR OUT_DIR [NAME ...]  ->  OUT_DIR/<name>/{attention.cu,common.cuh}"""
import os
import shutil
import sys

src_dir, out_dir, names = sys.argv[1], sys.argv[2], sys.argv[3:]
base = open(os.path.join(src_dir, "attention.cu")).read()


def sub(text, old, new):
    assert text.count(old) == 1, (old, text.count(old))
    return text.replace(old, new)


ATTEND_START = "            T* ks = ring + s * 2 * TILE;\n            const bool tail = key0 + BN > a.kv_len;\n"
ATTEND_END = "            if (tail) fence_proxy_async();\n"
LOOP_END = "        finish_sum<D>(st);\n"


def bare(t):
    i = t.index(ATTEND_START)
    j = t.index(ATTEND_END, i)
    t = t[:i] + t[j + len(ATTEND_END):]
    return sub(t, LOOP_END, "        continue;\n" + LOOP_END)


COPIES = """#pragma unroll
                    for (int j = 0; j < D / 64; ++j) {
                        tma_load_4d(ks + j * BN * 64, tk, 64 * j, key0, un.kvh, un.b, &full[s]);
                        tma_load_4d(ks + TILE + j * BN * 64, tv, 64 * j, key0, un.kvh, un.b, &full[s]);
                    }
"""
BULK = """                    {
                        const unsigned long long o = un.b * a.k_stride[0] + un.kvh * a.k_stride[1] + key0 * a.k_stride[2];
                        bulk_copy(ks, a.kraw + o * sizeof(T), TILE * sizeof(T), &full[s]);
                        bulk_copy(ks + TILE, a.vraw + o * sizeof(T), TILE * sizeof(T), &full[s]);
                    }
"""


def bulk(t):
    t = sub(t, COPIES, BULK)
    t = sub(t, "    const int* position;", "    const int* position;\n    const unsigned char* kraw;\n    const unsigned char* vraw;")
    return "#define ATTN_RAW_KV\n" + t


PRODUCER_START = "        if (lane == 0) {\n            unsigned s = 0, phase = 0, n = 0;\n"
PRODUCER_END = "        return;\n    }\n    const unsigned group"
HELPERS = r"""
// Session 34 probe: rewrites a 64-row tile of D columns, as a 1-d copy leaves it (rows of D
// elements), into the 128-byte swizzle (SwizzledKV) in place, through the warp's registers.
template <typename T, int D>
__device__ __forceinline__ void reswizzle_tile(T* t, unsigned lane) {
    constexpr int CPR = D / 8, PER = 64 * CPR / 32;
    uint4 v[PER];
#pragma unroll
    for (int i = 0; i < PER; ++i) v[i] = reinterpret_cast<const uint4*>(t)[i * 32 + lane];
    __syncwarp();
#pragma unroll
    for (int i = 0; i < PER; ++i) {
        const int k = i * 32 + lane, r = k / CPR, c = (k % CPR) * 8;
        *reinterpret_cast<uint4*>(t + SwizzledKV::at(r, c)) = v[i];
    }
}
__device__ __forceinline__ bool mbar_test(unsigned long long* b, unsigned parity) {
    unsigned r;
    asm volatile("{\n .reg .pred p;\n mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
                 : "=r"(r) : "r"(smem_addr(b)), "r"(parity) : "memory");
    return r != 0;
}
"""
NEW_PRODUCER = """        unsigned total = 0;
        for (unsigned u = blockIdx.x; u < units; u += gridDim.x) {
            const RingUnit x = u == blockIdx.x ? first : RingUnit(u, a);
            if (x.end > x.begin) total += (x.end - x.begin + BN - 1) / BN;
        }
        unsigned issued = 0, done = 0, iu = blockIdx.x, ikey = first.begin;
        RingUnit iun = first;
        while (done < total) {
            if (lane == 0) {
                while (issued < total) {
                    const unsigned s = issued % nst;
                    if (issued >= nst && !mbar_test(&empty[s], ((issued / nst) & 1) ^ 1)) break;
                    while (ikey >= iun.end) {
                        iu += gridDim.x;
                        iun = RingUnit(iu, a);
                        ikey = iun.begin;
                    }
                    T* ks = ring + s * 2 * TILE;
                    mbar_expect_tx(&full[s], STAGE_BYTES);
                    const unsigned long long o = iun.b * a.k_stride[0] + iun.kvh * a.k_stride[1] + ikey * a.k_stride[2];
                    bulk_copy(ks, a.kraw + o * sizeof(T), TILE * sizeof(T), &full[s]);
                    bulk_copy(ks + TILE, a.vraw + o * sizeof(T), TILE * sizeof(T), &full[s]);
                    ikey += BN;
                    ++issued;
                }
            }
            const unsigned s = done % nst;
            if (__any_sync(0xffffffffu, mbar_test(&full[s], (done / nst) & 1))) {
                T* ks = ring + s * 2 * TILE;
                reswizzle_tile<T, D>(ks, lane);
                reswizzle_tile<T, D>(ks + TILE, lane);
                fence_proxy_async();
                __syncwarp();
                if (lane == 0) mbar_arrive(&ready[s]);
                ++done;
            }
        }
"""


def bswz(t):
    t = bulk(t)
    i = t.index(PRODUCER_START)
    j = t.index(PRODUCER_END, i)
    t = t[:i] + NEW_PRODUCER + t[j:]
    t = sub(t, "template <typename T, int D>\n__device__ __forceinline__ void sdpa_decode_ring(", HELPERS.lstrip("\n") + "\ntemplate <typename T, int D>\n__device__ __forceinline__ void sdpa_decode_ring(")
    t = sub(t, "empty[RING_MAX_STAGES], staged[RING_MERGE_GROUPS];", "empty[RING_MAX_STAGES], staged[RING_MERGE_GROUPS], ready[RING_MAX_STAGES];")
    t = sub(t, "            mbar_init(&empty[i], ATTN_THREADS);\n", "            mbar_init(&empty[i], ATTN_THREADS);\n            mbar_init(&ready[i], 1);\n")
    return sub(t, "            mbar_wait(&full[s], phase);\n", "            mbar_wait(&ready[s], phase);\n")


TRANSFORM = """    if (warp == RING_CONSUMERS + 1) {
        // Session 34 probe: the rewrite warp.
        unsigned s = 0, phase = 0;
        RingUnit un = first;
        for (unsigned u = blockIdx.x; u < units; u += gridDim.x, un = RingUnit(u, a)) {
            for (unsigned key0 = un.begin; key0 < un.end; key0 += BN) {
                mbar_wait(&full[s], phase);
                T* ks = ring + s * 2 * TILE;
                reswizzle_tile<T, D>(ks, lane);
                reswizzle_tile<T, D>(ks + TILE, lane);
                fence_proxy_async();
                __syncwarp();
                if (lane == 0) mbar_arrive(&ready[s]);
                if (++s == nst) {
                    s = 0;
                    phase ^= 1;
                }
            }
        }
        return;
    }
    if (warp == RING_CONSUMERS) {
"""


def bswz2(t):
    t = bulk(t)
    t = sub(t, "            mbar_wait(&full[s], phase);\n", "            mbar_wait(&ready[s], phase);\n")
    t = sub(t, "    if (warp == RING_CONSUMERS) {\n", TRANSFORM)
    t = sub(t, "#define RING_THREADS (32 * RING_CONSUMERS + 32)", "#define RING_THREADS (32 * RING_CONSUMERS + 64)")
    t = sub(t, "template <typename T, int D>\n__device__ __forceinline__ void sdpa_decode_ring(", HELPERS.lstrip("\n") + "\ntemplate <typename T, int D>\n__device__ __forceinline__ void sdpa_decode_ring(")
    t = sub(t, "empty[RING_MAX_STAGES], staged[RING_MERGE_GROUPS];", "empty[RING_MAX_STAGES], staged[RING_MERGE_GROUPS], ready[RING_MAX_STAGES];")
    t = sub(t, "            mbar_init(&empty[i], ATTN_THREADS);\n", "            mbar_init(&empty[i], ATTN_THREADS);\n            mbar_init(&ready[i], 1);\n")
    return t


HR_PREFETCH = """                tma_prefetch_4d(tk, 64 * j, first.begin + BN * i, first.kvh, first.b);
                tma_prefetch_4d(tv, 64 * j, first.begin + BN * i, first.kvh, first.b);
"""
HR_SWZ = """struct SwizzledKV {
    static __device__ __forceinline__ int at(int r, int c) { return sw128_offset<64>(r, c); }
};"""


def hr(t):
    t = sub(t, HR_PREFETCH, """                if (j == 0) {
                    tma_prefetch_4d(tk, 0, 2 * (first.begin + BN * i), first.kvh, first.b);
                    tma_prefetch_4d(tv, 0, 2 * (first.begin + BN * i), first.kvh, first.b);
                }
""")
    t = sub(t, COPIES, """                    tma_load_4d(ks, tk, 0, 2 * key0, un.kvh, un.b, &full[s]);
                    tma_load_4d(ks + TILE, tv, 0, 2 * key0, un.kvh, un.b, &full[s]);
""")
    t = sub(t, HR_SWZ, """struct SwizzledKV {
    // Session 34 probe (head_dim 128): line 2r + c / 64 of 128 bytes, its 16-byte chunks
    // swizzled by the line.
    static __device__ __forceinline__ int at(int r, int c) {
        const int line = 2 * r + (c >> 6);
        return line * 64 + ((((c & 63) >> 3) ^ (line & 7)) << 3);
    }
};""")
    return "#define ATTN_HALFROW_MAP\n" + t


ROWS_PRODUCER_START = "        if (lane == 0) {\n            unsigned s = 0, phase = 0, n = 0;\n"
ROWS_PRODUCER = """        {
            // Session 34 probe: every lane copies rows lane, lane + 32 of K and V.
            unsigned s = 0, phase = 0, n = 0;
            RingUnit un = first;
            for (unsigned u = blockIdx.x; u < units; u += gridDim.x, un = RingUnit(u, a)) {
                for (unsigned key0 = un.begin; key0 < un.end; key0 += BN, ++n) {
                    if (n >= nst) mbar_wait(&empty[s], phase ^ 1);
                    T* ks = ring + s * 2 * PTILE;
                    if (lane == 0) mbar_expect_tx(&full[s], 2 * TILE * sizeof(T));
                    __syncwarp();
                    const unsigned long long o = un.b * a.k_stride[0] + un.kvh * a.k_stride[1] + key0 * a.k_stride[2];
                    for (unsigned r = lane; r < BN; r += 32) {
                        bulk_copy(ks + r * (D + 8), a.kraw + (o + r * a.k_stride[2]) * sizeof(T), D * sizeof(T), &full[s]);
                        bulk_copy(ks + PTILE + r * (D + 8), a.vraw + (o + r * a.k_stride[2]) * sizeof(T), D * sizeof(T),
                                  &full[s]);
                    }
                    ring_next(s, phase, nst);
                }
            }
        }
        return;
    }
    const unsigned group"""


def rows(t):
    t = bulk(t)
    t = "#define ATTN_PADDED_RING\n" + t
    t = sub(t, "    constexpr unsigned STAGE_BYTES = 2 * TILE * sizeof(T);", "    constexpr int PTILE = BN * (D + 8);\n    constexpr unsigned STAGE_BYTES = 2 * PTILE * sizeof(T);")
    i = t.index(ROWS_PRODUCER_START)
    j = t.index(PRODUCER_END, i)
    t = t[:i] + ROWS_PRODUCER + t[j + len(PRODUCER_END):]
    if "SwizzledKV::at(r, c)) = make_uint4" in t:  # not bare
        t = sub(t, "            T* ks = ring + s * 2 * TILE;\n            const bool tail", "            T* ks = ring + s * 2 * PTILE;\n            const bool tail")
        t = sub(t, "*reinterpret_cast<uint4*>(ks + TILE + SwizzledKV::at(r, c))", "*reinterpret_cast<uint4*>(ks + PTILE + PaddedKV<D>::at(r, c))")
        t = sub(t, "decode_attend<T, D, SwizzledKV>(qa, ks, ks + TILE, warp", "decode_attend<T, D, PaddedKV<D>>(qa, ks, ks + PTILE, warp")
    return t


out = {"main": lambda: base, "bare": lambda: bare(base), "bulk": lambda: bulk(bare(base)), "bswz": lambda: bswz(base), "bswz2": lambda: bswz2(base), "hr": lambda: hr(base), "bare_hr": lambda: hr(bare(base)), "rows": lambda: rows(base), "bare_rows": lambda: rows(bare(base))}
for name, text in out.items():
    if names and name not in names:
        continue
    os.makedirs(os.path.join(out_dir, name), exist_ok=True)
    open(os.path.join(out_dir, name, "attention.cu"), "w").write(text())
    shutil.copy(os.path.join(src_dir, "common.cuh"), os.path.join(out_dir, name, "common.cuh"))
    print(name)
