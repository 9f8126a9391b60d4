# Session 32: patched copies of quant.cu's Q4_0 ring GEMV for qprobe.cu, to see where its time goes.
# Usage: qvariants.py SRC OUTDIR  → OUTDIR/quant_<name>.cu
#   skip:   consumers wait for each stage and release it, nothing else (the stream alone)
#   loads:  consumers also load the quants and scales (XOR-ed into the sums, no conversion or MMA)
#   nomma:  loads and the nibble conversions, the MMA replaced by an XOR of its operands
#   w16:    16 consumer warps instead of 8
#   p1:     one pair of blocks per lane per step (QGEMV_RING_PAIRS 1)
import sys, os
src, out = sys.argv[1], sys.argv[2]
s = open(src).read()
def put(name, text):
    open(os.path.join(out, f"quant_{name}.cu"), "w").write(text)
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
