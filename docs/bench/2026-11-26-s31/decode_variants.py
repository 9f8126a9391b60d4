#!/usr/bin/env python3
"""Session 31: patched copies of attention.cu's decode ring for session 30's decode_probe.cu.

main    attention.cu as it is
pre2    before the PDL wait the producer asks L2 for its first unit's first two K/V tiles (not one)
pre3    … its first three tiles
pre4    … its first four tiles
preq    … a quarter of its first unit's tiles, at least one and at most four
pol     the L2 evict-first policy is made once, before the wait, not at every tensor copy
nohint  the tensor copies carry no L2 policy
m8      the split merge takes 8 splits a group (a bulk copy and barrier each), not 16

The pre*, pol and nohint patches apply to the kernel before 3a8147e (which took pre2's rule in
part); m8 to any.

Usage: decode_variants.py SRC_DIR OUT_DIR [NAME ...]  ->  OUT_DIR/<name>/{attention.cu,common.cuh}
for each variant named (all by default)."""
import os
import shutil
import sys

src_dir, out_dir, names = sys.argv[1], sys.argv[2], sys.argv[3:]
base = open(os.path.join(src_dir, "attention.cu")).read()


def sub(text, old, new):
    assert text.count(old) == 1, (old, text.count(old))
    return text.replace(old, new)


PREFETCH = """        for (int j = 0; j < D / 64; ++j) {
            tma_prefetch_4d(tk, 64 * j, first.begin, first.kvh, first.b);
            tma_prefetch_4d(tv, 64 * j, first.begin, first.kvh, first.b);
        }
"""
LOAD_FN = """__device__ __forceinline__ void tma_load_4d(void* dst, const TensorMap* map, int c0, int c1, int c2, int c3,
                                            unsigned long long* b) {
    asm volatile("{\\n .reg .b64 pol;\\n"
                 " createpolicy.fractional.L2::evict_first.b64 pol, 1.0;\\n"
                 " cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 ".L2::cache_hint [%0], [%1, {%2, %3, %4, %5}], [%6], pol;\\n}"
                 ::"r"(smem_addr(dst)), "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_addr(b))
                 : "memory");
}"""
CALLS = """                        tma_load_4d(ks + j * BN * 64, tk, 64 * j, key0, un.kvh, un.b, &full[s]);
                        tma_load_4d(ks + TILE + j * BN * 64, tv, 64 * j, key0, un.kvh, un.b, &full[s]);
"""
out = {"main": lambda: base}
def prefetch(tiles):
    """The first unit's first `tiles` tiles (an expression in its tile count nt) before the wait."""
    return sub(base, PREFETCH, """        const unsigned nt = (first.end - first.begin + 63) / 64;
        for (unsigned i = 0; i < %s && i < nt; ++i) {
#pragma unroll
            for (int j = 0; j < D / 64; ++j) {
                tma_prefetch_4d(tk, 64 * j, first.begin + 64 * i, first.kvh, first.b);
                tma_prefetch_4d(tv, 64 * j, first.begin + 64 * i, first.kvh, first.b);
            }
        }
""" % tiles)


for n in (2, 3, 4):
    out[f"pre{n}"] = lambda n=n: prefetch(str(n))
out["preq"] = lambda: prefetch("min(max(nt / 4, 1u), 4u)")
pol = sub(base, LOAD_FN, LOAD_FN + """
__device__ __forceinline__ void tma_load_4d_pol(void* dst, const TensorMap* map, int c0, int c1, int c2, int c3,
                                                unsigned long long* b, unsigned long long pol) {
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 ".L2::cache_hint [%0], [%1, {%2, %3, %4, %5}], [%6], %7;"
                 ::"r"(smem_addr(dst)), "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_addr(b)), "l"(pol)
                 : "memory");
}""")
pol = sub(pol, "            unsigned s = 0, phase = 0, n = 0;\n",
          "            unsigned s = 0, phase = 0, n = 0;\n            unsigned long long pol;\n"
          "            asm volatile(\"createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\" : \"=l\"(pol));\n")
out["pol"] = sub(pol, CALLS, CALLS.replace("tma_load_4d(", "tma_load_4d_pol(").replace("&full[s]);", "&full[s], pol);"))
nohint = sub(base, LOAD_FN, LOAD_FN + """
__device__ __forceinline__ void tma_load_4d_plain(void* dst, const TensorMap* map, int c0, int c1, int c2, int c3,
                                                  unsigned long long* b) {
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4, %5}], [%6];"
                 ::"r"(smem_addr(dst)), "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_addr(b))
                 : "memory");
}""")
out["nohint"] = sub(nohint, CALLS, CALLS.replace("tma_load_4d(", "tma_load_4d_plain("))
out["m8"] = sub(sub(base, "#define RING_MERGE 16\n", "#define RING_MERGE 8\n"),
                "#define RING_MERGE_GROUPS 9\n", "#define RING_MERGE_GROUPS 18\n")
for name, text in out.items():
    if names and name not in names:
        continue
    text = text() if callable(text) else text
    os.makedirs(os.path.join(out_dir, name), exist_ok=True)
    open(os.path.join(out_dir, name, "attention.cu"), "w").write(text)
    shutil.copy(os.path.join(src_dir, "common.cuh"), os.path.join(out_dir, name, "common.cuh"))
    print(name)
