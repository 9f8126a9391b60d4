# Session 32: patched copies of quant.cu's Q4_0 ring GEMV for qprobe.cu, to see where its time goes.
# Usage: qvariants.py SRC OUTDIR  → OUTDIR/quant_<name>.cu
#   skip:   consumers wait for each stage and release it, nothing else (the stream alone)
#   loads:  consumers also load the quants and scales (XOR-ed into the sums, no conversion or MMA)
#   nomma:  loads and the nibble conversions, the MMA replaced by an XOR of its operands
#   w16:    16 consumer warps instead of 8
#   nomma2, noconv: see below
#   p1:     one pair of blocks per lane per step (QGEMV_RING_PAIRS 1)
import sys, os
src, out = sys.argv[1], sys.argv[2]
s = open(src).read()
def put(name, text):
    open(os.path.join(out, f"quant_{name}.cu"), "w").write(text)
# trace: clock64 stamps (cycles from the block's entry) per stage t of each block, into
# g_qtrace[block][t]: {producer issued its copies, consumer warp 0 ready to wait, warp 0 saw it
# full, warp 0 released it}; and per block {x landed and laid out} at g_qtrace[block][63][0].
tr = s.replace("    const unsigned int total = mine * chunks;",
    "    const unsigned int total = mine * chunks;\n    const long long t_entry = clock64();")
tr = tr.replace("            if (t >= nst) mbar_wait(&sh.empty[s], phase ^ 1);",
    "            if (t >= nst) mbar_wait(&sh.empty[s], phase ^ 1);\n            if (lane == 0 && t < 63) g_qtrace[blockIdx.x][t][0] = clock64() - t_entry;")
tr = tr.replace("    named_barrier(1, QGEMV_RING_WARPS * 32);\n    const unsigned int g = lane >> 2",
    "    named_barrier(1, QGEMV_RING_WARPS * 32);\n    if (threadIdx.x == 0) g_qtrace[blockIdx.x][63][0] = clock64() - t_entry;\n    unsigned int tt = 0;\n    const unsigned int g = lane >> 2")
tr = tr.replace("            mbar_wait(&sh.full[s], phase);",
    "            const long long t_ready = clock64() - t_entry;\n            mbar_wait(&sh.full[s], phase);\n            if (threadIdx.x == 0 && tt < 63) { g_qtrace[blockIdx.x][tt][1] = t_ready; g_qtrace[blockIdx.x][tt][2] = clock64() - t_entry; }")
tr = tr.replace("            if (lane == 0) mbar_arrive(&sh.empty[s]);",
    "            if (lane == 0) mbar_arrive(&sh.empty[s]);\n            if (threadIdx.x == 0 && tt < 63) g_qtrace[blockIdx.x][tt][3] = clock64() - t_entry;\n            ++tt;")
tr = tr.replace("#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900\ntemplate <typename T>\n__device__ __forceinline__ void qgemv_ring_impl",
    "__device__ long long g_qtrace[132][64][4];\n#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900\ntemplate <typename T>\n__device__ __forceinline__ void qgemv_ring_impl")
assert tr.count("g_qtrace") == 6, tr.count("g_qtrace")
put("trace", tr)
# nomma2 / noconv (the tensor-core ring as in session 32's call 11): the MMAs replaced by an XOR
# of their operands into the sums; the nibble conversions replaced by the raw words.
m1 = "    mma16816<T>(c, a0, xb.x, xb.y);"
m2 = "    mma16816<T>(c, a1, xb.z, xb.w);"
if m1 in s:
    put("nomma2", s.replace(m1, "    c[0] += __uint_as_float((a0[0] ^ a0[1] ^ a0[2] ^ a0[3] ^ xb.x ^ xb.y) & 0x3FFFFFFFu);").replace(
        m2, "    c[2] += __uint_as_float((a1[0] ^ a1[1] ^ a1[2] ^ a1[3] ^ xb.z ^ xb.w) & 0x3FFFFFFFu);"))
    conv = """    const unsigned lo = q & 0x0F0F0F0Fu, hi = (q >> 4) & 0x0F0F0F0Fu;
    r[0] = __byte_perm(lo, Q4Magic<T>::bytes, 0x4240);
    r[1] = __byte_perm(hi, Q4Magic<T>::bytes, 0x4240);
    r[2] = __byte_perm(lo, Q4Magic<T>::bytes, 0x4341);
    r[3] = __byte_perm(hi, Q4Magic<T>::bytes, 0x4341);"""
    assert conv in s
    put("noconv", s.replace(conv, "    r[0] = q; r[1] = q ^ 1u; r[2] = q ^ 2u; r[3] = q ^ 3u;"))
    # loads2: neither (only the shared-memory loads, the scale conversions and the sums remain).
    put("loads2", s.replace(conv, "    r[0] = q; r[1] = q ^ 1u; r[2] = q ^ 2u; r[3] = q ^ 3u;").replace(
        m1, "    c[0] += __uint_as_float((a0[0] ^ a0[1] ^ a0[2] ^ a0[3] ^ xb.x ^ xb.y) & 0x3FFFFFFFu);").replace(
        m2, "    c[2] += __uint_as_float((a1[0] ^ a1[1] ^ a1[2] ^ a1[3] ^ xb.z ^ xb.w) & 0x3FFFFFFFu);"))
    # skip2: consumers wait for each stage and release it, nothing else.
    a = s.index("            for (unsigned int p = warp; p < cb / 2; p += QGEMV_RING_WARPS) {")
    b = s.index("            // The warp's reads of the slot are done")
    put("skip2", s[:a] + s[b:])
put("w16", s.replace("#define QGEMV_RING_WARPS 8", "#define QGEMV_RING_WARPS 16"))
if "QGEMV_RING_PAIRS" not in s:
    sys.exit(0)
loop_start = s.index("            const unsigned int pairs = cb / 2;")
loop_end = s.index("            // The warp's reads of the slot are done")
put("skip", s[:loop_start] + s[loop_end:])
compute_start = s.index("#pragma unroll\n                for (int u = 0; u < QGEMV_RING_PAIRS; ++u) {\n                    const unsigned int p = p0 + u * QGEMV_RING_WARPS;\n                    if (p < pairs) {\n#pragma unroll\n                        for (int h = 0; h < 2; ++h) {")
compute_end = s.index("            }\n            // The warp's reads of the slot are done")
loads = s[:compute_start] + """#pragma unroll
                for (int u = 0; u < QGEMV_RING_PAIRS; ++u)
                    if (p0 + u * QGEMV_RING_WARPS < pairs)
                        acc_a += __uint_as_float((qa[u][0] ^ qa[u][1] ^ da[u] ^ qb[u][0] ^ qb[u][1] ^ db[u]) & 0x3FFFFFFFu);
            }
""" + s[compute_end + len("            }\n"):]
put("loads", loads)
mma_call = "    mma16816<T>(c, a0, __byte_perm(xl.x, xl.y, 0x5410), __byte_perm(xl.x, xl.y, 0x7632));"
mma_call2 = "    mma16816<T>(c, a1, __byte_perm(xh.x, xh.y, 0x5410), __byte_perm(xh.x, xh.y, 0x7632));"
assert mma_call in s and mma_call2 in s
nomma = s.replace(mma_call, "    c[0] += __uint_as_float((a0[0] ^ a0[1] ^ a0[2] ^ a0[3] ^ xl.x ^ xl.y) & 0x3FFFFFFFu);").replace(
    mma_call2, "    c[2] += __uint_as_float((a1[0] ^ a1[1] ^ a1[2] ^ a1[3] ^ xh.x ^ xh.y) & 0x3FFFFFFFu);")
put("nomma", nomma)
put("p1", s.replace("#define QGEMV_RING_PAIRS 2", "#define QGEMV_RING_PAIRS 1"))
