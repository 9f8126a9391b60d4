#!/usr/bin/env python3
"""Session 44: the ring GEMV's rows after its last whole round of stages spread over the blocks
a row at a time (struct RingRows). Stage t < F = floor(N / (grid R)) of block b is rows
(b + t grid) R … + R - 1, as in HEAD; the rem rows after them go floor(rem / grid) to each
block and one more to the first rem mod grid, in one shorter last stage.

bal64  RingRows with 64-bit arithmetic (call 2: its entry calls a 64-bit division routine)
bal    the same in 32-bit arithmetic (call 3)

Usage: bal_variants.py SRC OUTDIR -> OUTDIR/gemv_bal64.cu, gemv_bal.cu. (As run in calls 2 and
3, each was the working tree's gemv.cu: the same code, with comments.)"""
import sys

src, outdir = sys.argv[1:3]
t = open(src).read()


def sub(a, b):
    global t
    assert t.count(a) == 1, (a, t.count(a))
    t = t.replace(a, b)


sub("""struct GemvRingShared {""", """struct RingRows {
    unsigned int F, q, e, mine;
    __device__ __forceinline__ RingRows(unsigned int N, unsigned int R) {
        const unsigned long long round = (unsigned long long)gridDim.x * R;
        F = (unsigned int)(N / round);
        const unsigned int rem = (unsigned int)(N - F * round);
        q = rem / gridDim.x;
        e = rem % gridDim.x;
        mine = F + (q + (blockIdx.x < e) > 0);
    }
    __device__ __forceinline__ unsigned long long r0(unsigned int t, unsigned int R) const {
        return t < F ? (unsigned long long)(blockIdx.x + t * gridDim.x) * R
                     : (unsigned long long)F * gridDim.x * R + blockIdx.x * q + min(blockIdx.x, e);
    }
    __device__ __forceinline__ unsigned int nr(unsigned int t, unsigned int R) const {
        return t < F ? R : q + (blockIdx.x < e);
    }
};

struct GemvRingShared {""")
sub("""    const unsigned int stages = N == 0 ? 0 : (N - 1) / R + 1;
    const unsigned int mine = blockIdx.x < stages ? (stages - 1 - blockIdx.x) / gridDim.x + 1 : 0;
""", """    const RingRows rr(N, R);
    const unsigned int mine = rr.mine;
""")
sub("""        for (unsigned int t = 0; t < mine && t < npre; ++t) {
            const unsigned long long r0 = (unsigned long long)(blockIdx.x + t * gridDim.x) * R;
            const unsigned int nr = (unsigned int)min((unsigned long long)R, N - r0);
            prefetch_l2_lines(nr * row_bytes, lane, w + r0 * K);
        }""", """        for (unsigned int t = 0; t < mine && t < npre; ++t)
            prefetch_l2_lines(rr.nr(t, R) * row_bytes, lane, w + rr.r0(t, R) * K);""")
sub("""            unsigned long long r0 = (unsigned long long)blockIdx.x * R;
            for (unsigned int t = 0; t < mine; ++t) {
                if (t >= nst) mbar_wait(&empty[s], phase ^ 1);
                const unsigned int nr = (unsigned int)min((unsigned long long)R, N - r0);
                bulk_load(ring + s * stage_bytes, w + r0 * K, nr * row_bytes, &full[s]);
                r0 += (unsigned long long)gridDim.x * R;
                ring_next(s, phase, nst);
            }""", """            for (unsigned int t = 0; t < mine; ++t) {
                if (t >= nst) mbar_wait(&empty[s], phase ^ 1);
                bulk_load(ring + s * stage_bytes, w + rr.r0(t, R) * K, rr.nr(t, R) * row_bytes,
                          &full[s]);
                ring_next(s, phase, nst);
            }""")
sub("""                const unsigned long long r0 = (unsigned long long)(blockIdx.x + tb * gridDim.x) * R;
                const unsigned int nr = (unsigned int)min((unsigned long long)R, N - r0);
                mbar_wait(&full[s], phase);""", """                const unsigned int nr = rr.nr(tb, R);
                mbar_wait(&full[s], phase);""")
sub("""        const unsigned long long n = (unsigned long long)(blockIdx.x + tb * gridDim.x) * R + row % R;
        if (tb < mine && n < N) out[n] = from_f32<T>(bias ? a + to_f32(bias[n]) : a);""",
    """        if (tb < mine && row % R < rr.nr(tb, R)) {
            const unsigned long long n = rr.r0(tb, R) + row % R;
            out[n] = from_f32<T>(bias ? a + to_f32(bias[n]) : a);
        }""")
open(f"{outdir}/gemv_bal64.cu", "w").write(t)
sub("""        const unsigned long long round = (unsigned long long)gridDim.x * R;
        F = (unsigned int)(N / round);
        const unsigned int rem = (unsigned int)(N - F * round);
        q = rem / gridDim.x;
        e = rem % gridDim.x;""", """        const unsigned int round = gridDim.x * R;
        F = N / round;
        const unsigned int rem = N - F * round;
        q = rem / gridDim.x;
        e = rem - q * gridDim.x;""")
open(f"{outdir}/gemv_bal.cu", "w").write(t)
print("bal64 bal")
