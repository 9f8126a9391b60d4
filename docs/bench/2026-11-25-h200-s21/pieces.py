#!/usr/bin/env python3
"""Writes patched copies of gemv.cu for probe.cu (session 21; timing only, not kept as is).

"p<P>": the producer copies each ring stage as P bulk copies (P equal pieces, each completing
its own mbarrier) and the consumers wait for each piece before reading it, so a stage is read
while its later pieces are still landing. "p<P>w": the same copies, but the consumers wait for
all P pieces first (what the smaller copies alone cost). The probe's shapes have only whole
stages (N a multiple of R), which these variants assume.

Usage: pieces.py SRC OUTDIR  ->  OUTDIR/gemv_<name>.cu for each variant."""
import sys

src, outdir = sys.argv[1], sys.argv[2]
base = open(src).read()
a = base.index("__device__ __forceinline__ void gemv_ring_impl")
b = base.index("#define GEMV_RING_BODY")
head, ring, tail = base[:a], base[a:b], base[b:]


def sub(text, old, new):
    assert text.count(old) == 1, (old, text.count(old))
    return text.replace(old, new)


def pieces(p, wait_all):
    r = sub(ring, "            mbar_init(&full[i], 1);\n",
            f"            for (int q = 0; q < {p}; ++q) mbar_init(&full[i * {p} + q], 1);\n")
    r = sub(r, "                bulk_load(ring + s * stage_bytes, w + r0 * K, nr * row_bytes, &full[s]);\n",
            f"""                for (int q = 0; q < {p}; ++q)
                    bulk_load(ring + s * stage_bytes + q * (stage_bytes / {p}),
                              reinterpret_cast<const unsigned char*>(w + r0 * K) + q * (stage_bytes / {p}),
                              stage_bytes / {p}, &full[s * {p} + q]);
""")
    waits_first = f"#pragma unroll\n                for (int q = 0; q < {p}; ++q) mbar_wait(&full[s * {p} + q], phase);\n" if wait_all else ""
    wait_each = "" if wait_all else f"                    mbar_wait(&full[s * {p} + q], phase);\n"
    r = sub(r, """                mbar_wait(&full[s], phase);
                const unsigned char* buf = ring + s * stage_bytes;
                if (nr == R)
                    ring_rows<T, R, true>(xs, buf, R, K, seg * 32 + lane, S * 32, acc + b * R);
                else
                    ring_rows<T, R, false>(xs, buf, nr, K, seg * 32 + lane, S * 32, acc + b * R);
""", f"""                (void)nr;
                const unsigned char* buf = ring + s * stage_bytes;
                constexpr int RP = R >= {p} ? R / {p} : 1, CP = R >= {p} ? 1 : {p} / R;
                const unsigned int Kp = K / CP;
                {waits_first}#pragma unroll
                for (int q = 0; q < {p}; ++q) {{
{wait_each}                    ring_rows<T, RP, true>(xs + (q % CP) * Kp, buf + q * (stage_bytes / {p}), RP, Kp,
                                           seg * 32 + lane, S * 32, acc + b * R + (q / CP) * RP);
                }}
""")
    return r


variants = {"main": ring}
for p in (2, 4, 8):
    variants[f"p{p}"] = pieces(p, False)
variants["p4w"] = pieces(4, True)
for name, r in variants.items():
    open(f"{outdir}/gemv_{name}.cu", "w").write(head + r + tail)
    print(name)
