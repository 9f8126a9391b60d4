#!/usr/bin/env python3
"""Session 41: variants of session 40's llt (ll_variants.py) that check the flags inside the
split merge instead of a compaction pass. Session 41's call 1 measured llt 3.0 µs slower than
main at every GQA 4 case (bitwise-equal outputs); its staged path runs a pass over every word
(flag check plus compaction into floats) before main's merge, 65 dependent shared-memory rounds
a thread at 16 splits of 4 rows.

lltf: the merge reads the 64-bit words themselves (two 16-byte loads for four values) and ORs
      each word's flag mismatch into the thread's `bad`; the block votes after the merge
      (bar.red.or on the consumers' named barrier) and, where any word was stale, copies again
      and merges again (outputs rewritten; nothing else reads them in the launch). Unstaged
      (GQA 8): the same merge from L2 (ld.global.cg), read again while stale.
lltn: lltf without the check and without the second round (a bound, not a candidate).

Usage: llf_variants.py LLT_SRC OUTDIR (LLT_SRC: ll_variants.py's llt/attention.cu)."""
import os
import sys

src, outdir = sys.argv[1], sys.argv[2]
t = open(src).read()


def sub(text, old, new):
    assert text.count(old) == 1, (old, text.count(old))
    return text.replace(old, new)


t = sub(t, "__device__ __forceinline__ unsigned long long ll_word(float v, unsigned flag) {",
        """// LL partials as 64-bit words, in shared memory (SMEM) or L2; flags checked as they are read
// (CHECK): bad collects any mismatch.
template <int D, bool SMEM, bool CHECK> struct RingPartialsLLF {
    const unsigned long long* p;
    unsigned nrows, flag;
    mutable unsigned bad;
    static constexpr int G = 8;
    __device__ __forceinline__ void ready(unsigned) const {}
    __device__ __forceinline__ const unsigned long long* row(unsigned sp, unsigned r) const {
        return p + (sp * nrows + r) * ring_row_floats<D>();
    }
    __device__ __forceinline__ unsigned split_floats() const { return nrows * ring_row_floats<D>(); }
    __device__ __forceinline__ float2 two(const unsigned long long* x) const {
        const ulonglong2 w = SMEM ? *reinterpret_cast<const ulonglong2*>(x) : __ldcg(reinterpret_cast<const ulonglong2*>(x));
        if (CHECK) bad |= ((unsigned)(w.x >> 32) ^ flag) | ((unsigned)(w.y >> 32) ^ flag);
        return make_float2(__uint_as_float((unsigned)w.x), __uint_as_float((unsigned)w.y));
    }
    __device__ __forceinline__ float2 ml(const unsigned long long* row) const { return two(row + D); }
    __device__ __forceinline__ float4 o(const unsigned long long* row, unsigned c) const {
        const float2 a = two(row + c), b = two(row + c + 2);
        return make_float4(a.x, a.y, b.x, b.y);
    }
};

// The consumers' vote: true where any of their threads passes true.
__device__ __forceinline__ bool consumers_any(bool p) {
    unsigned r;
    asm volatile("{ .reg .pred q, o; setp.ne.u32 q, %1, 0; bar.red.or.pred o, 1, %2, q; selp.u32 %0, 1, 0, o; }"
                 : "=r"(r) : "r"((unsigned)p), "r"(ATTN_THREADS) : "memory");
    return r != 0;
}

__device__ __forceinline__ unsigned long long ll_word(float v, unsigned flag) {""")

# The merge's group size from its source: the LL words take twice the registers a value, so
# their source merges 8 splits a group (main's 16 would spill).
a0 = t.index("template <int D, int W, bool FULL, class Src>")
a1 = t.index("// Most split groups the staged merge has barriers for")
t = t[:a0] + t[a0:a1].replace("RING_MERGE", "Src::G") + t[a1:]
t = sub(t, "    unsigned long long* bars;\n", "    unsigned long long* bars;\n    static constexpr int G = RING_MERGE;\n")
t = sub(t, "    const unsigned long long* p;\n    unsigned nrows;\n    __device", "    const unsigned long long* p;\n    unsigned nrows;\n    static constexpr int G = RING_MERGE;\n    __device")

t = sub(t, "a.splits * split_words * 12 <= nst * STAGE_BYTES", "a.splits * split_words * 8 <= nst * STAGE_BYTES")

start = t.index("        const unsigned words = a.splits * nrows * (D + 2);  // the rows' written words")
end = t.index("#define SDPA_RING_BODY(T, D)")
body = """        if (stage) {
            for (unsigned round = 0;; ++round) {
                for (unsigned s0 = 0; s0 < a.splits; s0 += RING_MERGE) mbar_wait(&staged[s0 / RING_MERGE], round & 1);
                const RingPartialsLLF<D, true, CHECK> src{staged_ll, nrows, flag, 0u};
                ring_merge_head<T, D>(src, a.splits, nrows, out, a, un.b, un.kvh);
                if (!CHECK || !consumers_any(src.bad != 0)) break;
                if (threadIdx.x == 0) {
                    asm volatile("fence.proxy.async.global;" ::: "memory");
                    fence_proxy_async();
                    for (unsigned s0 = 0; s0 < a.splits; s0 += RING_MERGE) copy_group(s0);
                }
            }
        } else {
            for (;;) {
                const RingPartialsLLF<D, false, CHECK> src{head, nrows, flag, 0u};
                ring_merge_head<T, D>(src, a.splits, nrows, out, a, un.b, un.kvh);
                if (!CHECK || !consumers_any(src.bad != 0)) break;
            }
        }
    }
}

"""
t = t[:start] + body + t[end:]

for name, check in (("lltf", "true"), ("lltn", "false")):
    v = t.replace("        if (stage) {\n            for (unsigned round = 0;; ++round) {",
                  f"        constexpr bool CHECK = {check};\n        if (stage) {{\n            for (unsigned round = 0;; ++round) {{", 1)
    os.makedirs(os.path.join(outdir, name), exist_ok=True)
    open(os.path.join(outdir, name, "attention.cu"), "w").write(v)
