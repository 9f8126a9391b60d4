#!/usr/bin/env python3
"""Session 41: a bound, not a candidate. n32: main's decode ring with the split ticket drawn by a
relaxed add as soon as the tile loop ends (its round trip overlapping the four-warp merge) and
no release after the partial stores: what main's count would cost if it were free, with main's
32-bit partials and staged merge. Incorrect (the last split may read partials not yet visible;
in the probe those hold the previous call's equal values), timing only.
n0: main without the split merge (the last split copies nothing and merges nothing; the outputs
of split heads are not written): what the copy and merge cost after the count.
n00: n0 without the count either (no add: each split stores its partial and ends).
nmw: n00 without the four-warp merge and the partials' stores: the stream and each tile's
attention alone.

Usage: bound_variants.py SRC OUTDIR (SRC: main's attention.cu)."""
import os
import sys

src, outdir = sys.argv[1], sys.argv[2]
t = open(src).read()


def sub(text, old, new):
    assert text.count(old) == 1, (old, text.count(old))
    return text.replace(old, new)


t = sub(t, """        finish_sum<D>(st);
        float* part = a.partial""", """        finish_sum<D>(st);
        unsigned ticket = 0;
        if (threadIdx.x == 0 && a.splits > 1)
            asm volatile("atom.add.relaxed.gpu.global.u32 %0, [%1], 1;" : "=r"(ticket) : "l"(&counters[un.bh]) : "memory");
        float* part = a.partial""")
t = sub(t, """            unsigned old;
            asm volatile("atom.add.acq_rel.gpu.global.u32 %0, [%1], 1;"
                         : "=r"(old)
                         : "l"(&counters[un.bh])
                         : "memory");
            last = old == a.splits - 1;""", """            last = ticket == a.splits - 1;""")
n32 = t
t = open(src).read()
t = sub(t, "            if (last && stage) {", "            if (false) {")
t = sub(t, "        if (!last) continue;\n        if (stage)", "        if (true) continue;\n        if (stage)")
n0 = t
n00 = sub(n0, """            unsigned old;
            asm volatile("atom.add.acq_rel.gpu.global.u32 %0, [%1], 1;"
                         : "=r"(old)
                         : "l"(&counters[un.bh])
                         : "memory");
            last = old == a.splits - 1;""", """            last = false;""")
a0 = n00.index("        merge_warps<D>(st, red, nrows, sync, [&](unsigned r, unsigned c, float4 o, float m, float l) {\n            if (whole)")
a1 = n00.index("        if (whole) continue;", a0)
# Keep the state live (a store no one reads, where a row's l is exactly -1) so the tiles'
# arithmetic is not removed as dead code.
nmw = n00[:a0] + """        {
            float keep = st.m[0] + st.m[1] + st.l[0] + st.l[1];
#pragma unroll
            for (int i = 0; i < D / 8; ++i) keep += st.o[i][0] + st.o[i][1] + st.o[i][2] + st.o[i][3];
            if (keep == -1.0f) a.partial[u * ATTN_THREADS + threadIdx.x] = keep;
        }
""" + n00[a1:]
for name, text in (("n32", n32), ("n0", n0), ("n00", n00), ("nmw", nmw)):
    os.makedirs(os.path.join(outdir, name), exist_ok=True)
    open(os.path.join(outdir, name, "attention.cu"), "w").write(text)
