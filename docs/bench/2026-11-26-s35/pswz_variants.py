#!/usr/bin/env python3
"""Session 35: the decode ring on 1-d bulk copies of a KV cache stored pre-swizzled (patched
copies of attention.cu for this session's decode_probe.cu, built with -DATTN_PRESWIZZLED for
every variant but main).

main   attention.cu as it is (tensor copies into the 128-byte swizzle of 64 x 64 boxes)
pswz   each stage copied as two 1-d bulk copies (the K tile's 16 KiB, then the V tile's,
       contiguous in the cache) that land rows of D elements whose 16-byte chunks are already
       swizzled (chunk c of key r at c ^ (r % 8) in its 64-column block); the consumers read that
       layout (RowSwizzledKV), as free of bank conflicts as the tensor copies' swizzle. The
       outputs must equal main's bitwise.

Usage: pswz_variants.py SRC_DIR OUT_DIR [NAME ...]  ->  OUT_DIR/<name>/{attention.cu,common.cuh}"""
import os
import shutil
import sys

src_dir, out_dir, names = sys.argv[1], sys.argv[2], sys.argv[3:]
base = open(os.path.join(src_dir, "attention.cu")).read()


def sub(text, old, new):
    assert text.count(old) == 1, (old, text.count(old))
    return text.replace(old, new)


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
ROWSWZ = """struct SwizzledKV {
    static __device__ __forceinline__ int at(int r, int c) { return sw128_offset<64>(r, c); }
};
template <int D> struct RowSwizzledKV {
    static __device__ __forceinline__ int at(int r, int c) {
        return r * D + (c & ~63) + ((((c & 63) >> 3) ^ (r & 7)) << 3);
    }
};"""


def pswz(t):
    t = sub(t, COPIES, BULK)
    t = sub(t, "    const int* position;", "    const int* position;\n    const unsigned char* kraw;\n    const unsigned char* vraw;")
    t = sub(t, ROWSWZ.split("\ntemplate")[0], ROWSWZ)
    t = sub(t, "*reinterpret_cast<uint4*>(ks + TILE + SwizzledKV::at(r, c))", "*reinterpret_cast<uint4*>(ks + TILE + RowSwizzledKV<D>::at(r, c))")
    t = sub(t, "decode_attend<T, D, SwizzledKV>(qa, ks, ks + TILE, warp", "decode_attend<T, D, RowSwizzledKV<D>>(qa, ks, ks + TILE, warp")
    return "#define ATTN_RAW_KV\n" + t


out = {"main": lambda: base, "pswz": lambda: pswz(base)}
for name, text in out.items():
    if names and name not in names:
        continue
    os.makedirs(os.path.join(out_dir, name), exist_ok=True)
    open(os.path.join(out_dir, name, "attention.cu"), "w").write(text())
    shutil.copy(os.path.join(src_dir, "common.cuh"), os.path.join(out_dir, name, "common.cuh"))
    print(name)
