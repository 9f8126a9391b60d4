#!/usr/bin/env python3
"""Session 34: the decode ring's split merge shared by the last splits to count (patched copies
of attention.cu for session 30's decode_probe.cu).

main     attention.cu as it is: the last split to count merges the whole head (its partials
         staged in shared memory by bulk copies).
dmP      where every unit has a block of its own (units <= grid), the last `np` splits to count
         (np = min(splits, P * nrows / 1), P in pieces per row: dm1, dm2, dm4) each merge one
         piece of the head's outputs: the non-last ones poll the head's counter (acquire loads)
         until every split has counted, acknowledge with a relaxed add, and the last to
         acknowledge returns the counter to zero. Each piece reads its partials through L2
         (__ldcg), in the same split order as main (the same bits).

Usage: dmerge_variants.py SRC_DIR OUT_DIR [NAME ...]  ->  OUT_DIR/<name>/{attention.cu,common.cuh}"""
import os
import shutil
import sys

src_dir, out_dir, names = sys.argv[1], sys.argv[2], sys.argv[3:]
base = open(os.path.join(src_dir, "attention.cu")).read()


def sub(text, old, new):
    assert text.count(old) == 1, (old, text.count(old))
    return text.replace(old, new)


START = "        const bool stage = u + gridDim.x >= units && a.splits <= RING_MERGE * RING_MERGE_GROUPS &&"
END = """            ring_merge_head<T, D>(RingPartials<D, false>{head, nrows, nullptr}, a.splits, nrows, out, a, un.b,
                                  un.kvh);
    }
}
"""

RANGE_FN = """
// ring_merge_splits over the elements [e0, e1) of nrows x D/4 (four columns a thread).
template <typename T, int D, class Src>
__device__ __forceinline__ void ring_merge_range(const Src& src, unsigned splits, unsigned e0, unsigned e1,
                                                 T* __restrict__ out, const AttnArgs& a, unsigned b, unsigned kvh) {
    constexpr unsigned CW = D / 4;
    const unsigned group = a.q_heads / a.kv_heads;
    for (unsigned e = e0 + threadIdx.x; e < e1; e += ATTN_THREADS) {
        const unsigned r = e / CW, c = (e % CW) * 4;
        float m = -GPUKIT_INF, l = 0.0f;
        float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        unsigned s0 = 0;
        for (; s0 + RING_MERGE <= splits; s0 += RING_MERGE)
            ring_merge_group<D, 4, true>(src, s0, RING_MERGE, r, c, m, l, acc);
        if (s0 < splits) ring_merge_group<D, 4, false>(src, s0, splits - s0, r, c, m, l, acc);
        const float inv = l > 0.0f ? 1.0f / l : 0.0f;
        const unsigned h = kvh * group + r / a.q_len, i = r % a.q_len;
        T* dst = out + b * a.o_stride[0] + h * a.o_stride[1] + i * a.o_stride[2] + c;
        *reinterpret_cast<uint2*>(dst) = make_uint2(pack2<T>(acc[0] * inv, acc[1] * inv), pack2<T>(acc[2] * inv, acc[3] * inv));
    }
}
"""

DM = """        sync();
        if (threadIdx.x == 0) {
            unsigned old;
            asm volatile("atom.add.acq_rel.gpu.global.u32 %0, [%1], 1;"
                         : "=r"(old)
                         : "l"(&counters[un.bh])
                         : "memory");
            const unsigned np = units <= gridDim.x ? min(a.splits, PIECES) : 1u;
            const unsigned piece = old + np >= a.splits ? old + np - a.splits : ~0u;
            if (np == 1) {
                if (piece == 0) counters[un.bh] = 0;
            } else if (piece != ~0u && old != a.splits - 1) {
                unsigned seen;
                do {
                    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(&counters[un.bh]) : "memory");
                } while (seen < a.splits);
                unsigned ack;
                asm volatile("atom.add.relaxed.gpu.global.u32 %0, [%1], 1;"
                             : "=r"(ack)
                             : "l"(&counters[un.bh])
                             : "memory");
                if (ack == a.splits + np - 2) atomicExch(&counters[un.bh], 0u);
            }
            last = piece;
            last_np = np;
        }
        sync();
        if (last == ~0u) continue;
        const unsigned E = nrows * (D / 4);
        ring_merge_range<T, D>(RingPartials<D, false>{head, nrows, nullptr}, a.splits, last * E / last_np,
                               (last + 1) * E / last_np, out, a, un.b, un.kvh);
    }
}
"""


def dm(pieces):
    t = base
    i = t.index(START)
    j = t.index(END, i)
    t = t[:i] + DM.replace("PIECES", pieces) + t[j + len(END):]
    t = sub(t, "    __shared__ unsigned last;\n", "    __shared__ unsigned last, last_np;\n")
    t = sub(t, "// Most split groups the staged merge has barriers for", RANGE_FN.lstrip("\n") + "\n// Most split groups the staged merge has barriers for")
    return t


out = {
    "main": lambda: base,
    "dm1": lambda: dm("nrows"),
    "dm2": lambda: dm("2 * nrows"),
    "dm4": lambda: dm("4 * nrows"),
    "dm8": lambda: dm("8 * nrows"),
}
for name, text in out.items():
    if names and name not in names:
        continue
    os.makedirs(os.path.join(out_dir, name), exist_ok=True)
    open(os.path.join(out_dir, name, "attention.cu"), "w").write(text())
    shutil.copy(os.path.join(src_dir, "common.cuh"), os.path.join(out_dir, name, "common.cuh"))
    print(name)
