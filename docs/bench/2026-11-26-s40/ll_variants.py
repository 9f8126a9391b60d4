#!/usr/bin/env python3
"""Session 40 (prepared for the next session, not run): a decode-ring variant whose split count
leaves the critical path. Writes OUTDIR/llt/attention.cu from SRC (main's attention.cu).

llt: each unit's thread 0 draws a ticket (a relaxed add on its head's counter) as soon as its
     tile loop ends, so the add's round trip overlaps the four-warp merge; the counter word is
     (epoch << 8) | count, and the last split (count = splits − 1) adds 256 − splits, which
     zeroes the count and advances the epoch. The partials are stored as 64-bit words (the
     float's bits, then the launch's flag: epoch + 1, read from the counter at the unit's start)
     by relaxed stores, so no release has to wait for them: the last split copies the others'
     partials into shared memory (bulk copies, as main's staged merge), checks every word's flag
     there and copies again while any is stale; its own partial it writes there itself. Outside
     the staged case it reads the words from L2, each until its flag matches. The merge then
     reads the same floats in the same order as main: outputs bitwise equal to main's.

Probe: session 35's decode_probe.cu allocates and zeroes twice main's workspace for it
(session 40). Before it could land: the workspace doubles (sdpa_workspace_len), a flag must
never match stale words of another head or shape (here flags only grow per head; the probe
zeroes its workspace), and the ops tests, memcheck and racecheck must pass.

Usage: ll_variants.py SRC OUTDIR"""
import os
import sys

src, outdir = sys.argv[1], sys.argv[2]
t = open(src).read()


def sub(text, old, new):
    assert text.count(old) == 1, (old, text.count(old))
    return text.replace(old, new)


# The merge reads partials through Src::row(); the LL source returns 64-bit words.
t = sub(t, "    const float* q = src.row(s0, r);", "    const auto* q = src.row(s0, r);")
t = sub(t, "        const float* qk = q + (FULL ? k : min((unsigned)k, n - 1)) * step;",
        "        const auto* qk = q + (FULL ? k : min((unsigned)k, n - 1)) * step;")

# Main's staged source without barriers (bars null) reads the compact copy.
t = sub(t, "        if (STAGED) mbar_wait(&bars[s0 / RING_MERGE], 0);",
        "        if (STAGED && bars) mbar_wait(&bars[s0 / RING_MERGE], 0);")

# The LL partials in L2, their flags checked beforehand.
t = sub(t, "// Adds the n splits from s0 (n = RING_MERGE where FULL, else at most that) of row r, columns",
        """// A head's LL partials in L2 whose flags were all checked (by acquire loads, then a barrier):
// the low halves (the floats) of its 64-bit words.
template <int D> struct RingPartialsLL {
    const unsigned long long* p;
    unsigned nrows;
    __device__ __forceinline__ void ready(unsigned) const {}
    __device__ __forceinline__ const unsigned long long* row(unsigned sp, unsigned r) const {
        return p + (sp * nrows + r) * ring_row_floats<D>();
    }
    __device__ __forceinline__ unsigned split_floats() const { return nrows * ring_row_floats<D>(); }
    __device__ __forceinline__ float get(const unsigned long long* x) const {
        return __ldcg(reinterpret_cast<const float*>(x));
    }
    __device__ __forceinline__ float2 ml(const unsigned long long* row) const {
        return make_float2(get(row + D), get(row + D + 1));
    }
    __device__ __forceinline__ float4 o(const unsigned long long* row, unsigned c) const {
        return make_float4(get(row + c), get(row + c + 1), get(row + c + 2), get(row + c + 3));
    }
};

__device__ __forceinline__ unsigned long long ll_word(float v, unsigned flag) {
    return ((unsigned long long)flag << 32) | __float_as_uint(v);
}
__device__ __forceinline__ void st_ll(unsigned long long* p, float v, unsigned flag) {
    asm volatile("st.relaxed.gpu.global.b64 [%0], %1;" ::"l"(p), "l"(ll_word(v, flag)) : "memory");
}

// Adds the n splits from s0 (n = RING_MERGE where FULL, else at most that) of row r, columns""")

t = sub(t, "    __shared__ unsigned last;", "    __shared__ unsigned last, llflag, stale;")

# The flag of this launch: the counter's epoch at the unit's start (the last split of this launch
# advances it only after every split has drawn its ticket, this one included).
t = sub(t, """        Rows rows;
        unsigned qa[D / 16][4];
        decode_rows<T, D>(q, a, un.b, un.kvh, rows, qa);
        State<D> st;
        st.init();""", """        Rows rows;
        unsigned qa[D / 16][4];
        decode_rows<T, D>(q, a, un.b, un.kvh, rows, qa);
        State<D> st;
        st.init();
        unsigned word0 = 0;
        if (threadIdx.x == 0 && a.splits > 1)
            asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(word0) : "l"(&counters[un.bh]) : "memory");""")

t = sub(t, """        finish_sum<D>(st);
        float* part = a.partial + (unsigned long long)u * nrows * ring_row_floats<D>();
        const bool whole = a.splits == 1;
        merge_warps<D>(st, red, nrows, sync, [&](unsigned r, unsigned c, float4 o, float m, float l) {
            if (whole) {
                const unsigned h = un.kvh * group + r / a.q_len, i = r % a.q_len;
                store_out4<T>(out + un.b * a.o_stride[0] + h * a.o_stride[1] + i * a.o_stride[2] + c, o, l);
            } else {
                float* pr = part + r * ring_row_floats<D>();
                *reinterpret_cast<float4*>(pr + c) = o;
                if (c == 0) *reinterpret_cast<float2*>(pr + D) = make_float2(m, l);
            }
        });
        if (whole) continue;""", """        finish_sum<D>(st);
        const bool whole = a.splits == 1;
        // The ticket: its round trip overlaps the four-warp merge.
        unsigned ticket = 0;
        if (threadIdx.x == 0 && !whole) {
            llflag = (word0 >> 8) + 1;
            asm volatile("atom.add.relaxed.gpu.global.u32 %0, [%1], 1;" : "=r"(ticket) : "l"(&counters[un.bh]) : "memory");
        }
        const unsigned split = u % a.splits;
        const unsigned row_words = ring_row_floats<D>(), split_words = nrows * row_words;
        unsigned long long* partll = reinterpret_cast<unsigned long long*>(a.partial) + (unsigned long long)u * split_words;
        unsigned long long* const staged_ll = reinterpret_cast<unsigned long long*>(base);
        // Staged: the words (8 bytes) and their floats compacted after them (4) must fit.
        const bool stage = u + gridDim.x >= units && a.splits <= RING_MERGE * RING_MERGE_GROUPS &&
                           a.splits * split_words * 12 <= nst * STAGE_BYTES + RING_RED_BYTES(D);
        merge_warps<D>(st, red, nrows, sync, [&](unsigned r, unsigned c, float4 o, float m, float l) {
            if (whole) {
                const unsigned h = un.kvh * group + r / a.q_len, i = r % a.q_len;
                store_out4<T>(out + un.b * a.o_stride[0] + h * a.o_stride[1] + i * a.o_stride[2] + c, o, l);
            } else {
                const unsigned flag = llflag;
                unsigned long long* pr = partll + r * row_words;
                st_ll(pr + c, o.x, flag);
                st_ll(pr + c + 1, o.y, flag);
                st_ll(pr + c + 2, o.z, flag);
                st_ll(pr + c + 3, o.w, flag);
                if (c == 0) {
                    st_ll(pr + D, m, flag);
                    st_ll(pr + D + 1, l, flag);
                }
                if (stage) {
                    // This split's own slot of the staged copy (the ring is idle: every tile was
                    // read before the merge's first barrier).
                    unsigned long long* sr = staged_ll + split * split_words + r * row_words;
                    sr[c] = ll_word(o.x, flag);
                    sr[c + 1] = ll_word(o.y, flag);
                    sr[c + 2] = ll_word(o.z, flag);
                    sr[c + 3] = ll_word(o.w, flag);
                    if (c == 0) {
                        sr[D] = ll_word(m, flag);
                        sr[D + 1] = ll_word(l, flag);
                    }
                }
            }
        });
        if (whole) continue;""")

# The count and the staged copy: main's block replaced.
start = t.index("        // Publish the partial, then count it (as CUTLASS's generic barrier does")
end = t.index("#define SDPA_RING_BODY(T, D)")
t = t[:start] + """        const unsigned long long* head = reinterpret_cast<const unsigned long long*>(a.partial) +
                                         (unsigned long long)un.bh * a.splits * split_words;
        // Copies every other split's words of group g into the staged slots (one announcement).
        const auto copy_group = [&](unsigned s0) {
            const unsigned s1 = min(a.splits, s0 + RING_MERGE);
            const unsigned mine_in = split >= s0 && split < s1;
            mbar_expect_tx(&staged[s0 / RING_MERGE], ((s1 - s0) - mine_in) * split_words * 8);
            if (split > s0 && mine_in)
                bulk_copy(staged_ll + s0 * split_words, head + s0 * split_words, (split - s0) * split_words * 8,
                          &staged[s0 / RING_MERGE]);
            const unsigned from = mine_in ? split + 1 : s0;
            if (from < s1)
                bulk_copy(staged_ll + from * split_words, head + from * split_words, (s1 - from) * split_words * 8,
                          &staged[s0 / RING_MERGE]);
        };
        sync();
        if (threadIdx.x == 0) {
            last = (ticket & 255u) == a.splits - 1;
            if (last) {
                // Count to zero, epoch + 1 (every split of this launch has drawn its ticket).
                asm volatile("red.relaxed.gpu.global.add.u32 [%0], %1;" ::"l"(&counters[un.bh]), "r"(256u - a.splits)
                             : "memory");
                if (stage) {
                    // Generic stores of other blocks, then this block's reads of the ring, before
                    // the async proxy's reads and writes.
                    asm volatile("fence.proxy.async.global;" ::: "memory");
                    fence_proxy_async();
                    for (unsigned s0 = 0; s0 < a.splits; s0 += RING_MERGE) copy_group(s0);
                }
            }
        }
        sync();
        if (!last) continue;
        const unsigned flag = llflag;
        const unsigned words = a.splits * nrows * (D + 2);  // the rows' written words
        if (stage) {
            // Wait for the copies, check every word's flag while compacting the floats after
            // the words, copy again while any is stale; then main's staged merge on the floats.
            float* const compact = reinterpret_cast<float*>(staged_ll + a.splits * split_words);
            for (unsigned round = 0;; ++round) {
                for (unsigned s0 = 0; s0 < a.splits; s0 += RING_MERGE) mbar_wait(&staged[s0 / RING_MERGE], round & 1);
                if (threadIdx.x == 0) stale = 0;
                sync();
                bool bad = false;
                for (unsigned e = threadIdx.x; e < words; e += ATTN_THREADS) {
                    const unsigned w = e / (D + 2) * row_words + e % (D + 2);
                    const unsigned long long v = staged_ll[w];
                    bad |= (unsigned)(v >> 32) != flag;
                    compact[w] = __uint_as_float((unsigned)v);
                }
                if (bad) stale = 1;
                sync();
                const bool again = stale;
                sync();
                if (!again) break;
                if (threadIdx.x == 0) {
                    asm volatile("fence.proxy.async.global;" ::: "memory");
                    fence_proxy_async();
                    for (unsigned s0 = 0; s0 < a.splits; s0 += RING_MERGE) copy_group(s0);
                }
            }
            ring_merge_head<T, D>(RingPartials<D, true>{compact, nrows, nullptr}, a.splits, nrows, out, a, un.b,
                                  un.kvh);
        } else {
            // Every word until its flag matches (acquire: after the barrier the merge's plain
            // loads see them), one word a thread at a time: slow, and not a candidate where
            // the partials do not fit shared memory.
            for (unsigned e = threadIdx.x; e < words; e += ATTN_THREADS) {
                const unsigned long long* x = head + e / (D + 2) * row_words + e % (D + 2);
                unsigned long long v;
                do {
                    asm volatile("ld.acquire.gpu.global.b64 %0, [%1];" : "=l"(v) : "l"(x) : "memory");
                } while ((unsigned)(v >> 32) != flag);
            }
            sync();
            ring_merge_head<T, D>(RingPartialsLL<D>{head, nrows}, a.splits, nrows, out, a, un.b, un.kvh);
        }
    }
}

""" + t[end:]

os.makedirs(os.path.join(outdir, "llt"), exist_ok=True)
open(os.path.join(outdir, "llt", "attention.cu"), "w").write(t)
