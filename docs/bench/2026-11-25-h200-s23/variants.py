#!/usr/bin/env python3
"""Writes patched copies of gemv.cu for probe.cu (session 23; timing only).

main      gemv.cu as on main
nocompute the consumers wait for each stage and release it, no dot products (reductions stay)
warp1     each consumer warp releases a stage with one arrival (lane 0 after __syncwarp) instead
          of 32; the empty barriers count warps
regrel1   as warp1, and a consumer loads its whole share of a stage into registers, releases the
          stage, then computes (where the share fits 16 packs: K · R <= 4096 · S; ptxas spills
          ~1.4 KiB at its 168-register cap)
regrel8   regrel1 with at most 8 packs a lane (K · R <= 2048 · S; no spills)
readonly  the consumers only read their shares of each stage (XOR, no arithmetic)
fmaonly   the consumers' arithmetic with x for every weight row (no weight reads; wrong sums)
hybrid1/2 each block's last 1 / 2 stages go straight into the consumers' registers (global
          loads after the PDL wait), the ring carries the rest
half      the consumers read and sum only the first R / 2 rows of each stage (wrong sums)
rpw       rows per warp: every consumer warp takes every stage, whole rows (or 8 / R pieces of
          one), x in registers, no cross-warp sums where R = 8 (S is ignored)

Usage: variants.py SRC OUTDIR  ->  OUTDIR/gemv_<name>.cu for each variant."""
import sys

src, outdir = sys.argv[1], sys.argv[2]
base = open(src).read()
a = base.index("__device__ __forceinline__ void gemv_ring_impl")
b = base.index("#define GEMV_RING_BODY")
head, ring, tail = base[:a], base[a:b], base[b:]


def sub(text, old, new):
    assert text.count(old) == 1, (old, text.count(old))
    return text.replace(old, new)


rows_call = """                if (nr == R)
                    ring_rows<T, R, true>(xs, buf, R, K, seg * 32 + lane, S * 32, acc + b * R);
                else
                    ring_rows<T, R, false>(xs, buf, nr, K, seg * 32 + lane, S * 32, acc + b * R);
"""
release = """                mbar_arrive(&empty[s]);
"""
variants = {"main": (head, ring)}
variants["nocompute"] = (head, sub(ring, rows_call, """                acc[b * R] += (float)buf[threadIdx.x];
"""))


def warp1(r):
    r = sub(r, "mbar_init(&empty[i], S * 32);", "mbar_init(&empty[i], S);")
    return sub(r, release, """                __syncwarp();
                if (lane == 0) mbar_arrive(&empty[s]);
""")


variants["warp1"] = (head, warp1(ring))

regs_fn = """
// Session 23 probe: the lane's whole share of a stage into registers first (L packs of each of
// the R rows), then the release of the stage, then the dot products.
template <typename T, int R, bool ONE>
__device__ __forceinline__ void ring_rows_regs(const T* __restrict__ xs, const unsigned char* buf,
                                               unsigned int nr, unsigned int K, unsigned int li,
                                               unsigned int step, float* acc, unsigned long long* empty) {
    const int V = Vec16<T>::N;
    constexpr int L = 16 / R;
    const unsigned int packs = K / V;
    const T* wr = reinterpret_cast<const T*>(buf);
    Pack<T> wv[L][R];
#pragma unroll
    for (int u = 0; u < L; ++u) {
        const unsigned int p = li + u * step;
#pragma unroll
        for (int j = 0; j < R; ++j)
            if (p < packs && j < (int)nr) wv[u][j] = load16(wr + (size_t)j * K + p * V);
    }
    if (ONE) {
        __syncwarp();
        if ((threadIdx.x & 31) == 0) mbar_arrive(empty);
    } else {
        mbar_arrive(empty);
    }
#pragma unroll
    for (int u = 0; u < L; ++u) {
        const unsigned int p = li + u * step;
        if (p < packs) {
            // x with a volatile load, so the compiler cannot hoist all L of them (and spill).
            uint4 xq;
            asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                         : "=r"(xq.x), "=r"(xq.y), "=r"(xq.z), "=r"(xq.w) : "r"(smem_addr(xs + p * V)));
            const Pack<T> xv = *reinterpret_cast<const Pack<T>*>(&xq);
            float xf[V];
#pragma unroll
            for (int e = 0; e < V; ++e) xf[e] = to_f32(xv.v[e]);
#pragma unroll
            for (int j = 0; j < R; ++j) {
                if (j < (int)nr) {
                    float d = 0.0f;
#pragma unroll
                    for (int e = 0; e < V; ++e) d = fmaf(xf[e], to_f32(wv[u][j].v[e]), d);
                    acc[j] += d;
                }
            }
        }
    }
}
"""


def regrel(r, one):
    rel = "__syncwarp(); if (lane == 0) mbar_arrive(&empty[s]);" if one else "mbar_arrive(&empty[s]);"
    flag = "true" if one else "false"
    r = sub(r, release, "")
    return sub(r, rows_call, """                if (K * R <= 4096u * S) {
                    ring_rows_regs<T, R, """ + flag + """>(xs, buf, nr, K, seg * 32 + lane, S * 32,
                                                 acc + b * R, &empty[s]);
                } else {
""" + rows_call + "                " + rel + "\n                }\n")


tpl = "template <typename T, int R>\n"
assert head.endswith(tpl)
rhead = head[: -len(tpl)] + regs_fn + tpl
variants["regrel1"] = (rhead, regrel(sub(ring, "mbar_init(&empty[i], S * 32);", "mbar_init(&empty[i], S);"), True))
# regrel1 with half the share in registers (no spills): where K · R <= 2048 · S.
variants["regrel8"] = (sub(rhead, "constexpr int L = 16 / R;", "constexpr int L = 8 / R;"),
                       sub(variants["regrel1"][1], "K * R <= 4096u * S", "K * R <= 2048u * S"))
# Rows per warp: all eight consumer warps take every stage, warp w row w / P of it (P = 8 / R
# warps per row, piece w % P, lane packs interleaved), x converted to f32 once in registers; a
# warp keeps one sum per stage for a batch of 8 stages, reduces them with one transposing
# butterfly, and only where P > 1 adds the pieces through shared memory (one named barrier per
# batch). One arrival per warp on the empty barriers (they count 8).
i = ring.index("    // Group grp takes stages grp")
rpw = sub(ring[:i], "mbar_init(&empty[i], S * 32);", "mbar_init(&empty[i], GEMV_RING_WARPS);") + """    constexpr int V = Vec16<T>::N, P = GEMV_RING_WARPS / R, MAXK = 8;
    const unsigned int r_in = warp / P, piece = warp % P, packs = K / V;
    float xf[MAXK][V];
#pragma unroll
    for (int k = 0; k < MAXK; ++k) {
        const unsigned int p = piece * 32 + lane + k * 32 * P;
        Pack<T> xv;
        if (p < packs) xv = load16(xs + p * V);
#pragma unroll
        for (int e = 0; e < V; ++e) xf[k][e] = p < packs ? to_f32(xv.v[e]) : 0.0f;
    }
    unsigned int s = 0, phase = 0, it = 0;
    for (unsigned int t0 = 0; t0 < mine; t0 += GEMV_RING_BATCH, ++it) {
        float acc[GEMV_RING_BATCH];
#pragma unroll
        for (int b = 0; b < GEMV_RING_BATCH; ++b) {
            acc[b] = 0.0f;
            const unsigned int t = t0 + b;
            if (t < mine) {
                const unsigned long long r0 = (unsigned long long)(blockIdx.x + t * gridDim.x) * R;
                const unsigned int nr = (unsigned int)min((unsigned long long)R, N - r0);
                mbar_wait(&full[s], phase);
                if (r_in < nr) {
                    const T* wr = reinterpret_cast<const T*>(ring + s * stage_bytes) + (size_t)r_in * K;
                    Pack<T> wv[MAXK];
#pragma unroll
                    for (int k = 0; k < MAXK; ++k) {
                        const unsigned int p = piece * 32 + lane + k * 32 * P;
                        if (p < packs) wv[k] = load16(wr + p * V);
                    }
                    float dk[MAXK];
#pragma unroll
                    for (int k = 0; k < MAXK; ++k) {
                        const unsigned int p = piece * 32 + lane + k * 32 * P;
                        dk[k] = 0.0f;
                        if (p < packs) {
#pragma unroll
                            for (int e = 0; e < V; ++e) dk[k] = fmaf(xf[k][e], to_f32(wv[k].v[e]), dk[k]);
                        }
                    }
#pragma unroll
                    for (int k = 0; k < MAXK; ++k) acc[b] += dk[k];
                }
                __syncwarp();
                if (lane == 0) mbar_arrive(&empty[s]);
                if (++s == nst) {
                    s = 0;
                    phase ^= 1;
                }
            }
        }
        // Lane l: stage t0 + l / 4's sum over the warp.
        float a = warp_sum_rows<GEMV_RING_BATCH>(acc, lane);
        const unsigned int i = lane / (32 / GEMV_RING_BATCH);
        if (P > 1) {
            if (lane % (32 / GEMV_RING_BATCH) == 0) part[it & 1][warp][i] = a;
            named_barrier(1, GEMV_RING_WARPS * 32);
            if (piece != 0 || lane % (32 / GEMV_RING_BATCH) != 0) continue;
            a = 0.0f;
            for (unsigned int j = 0; j < P; ++j) a += part[it & 1][r_in * P + j][i];
        } else if (lane % (32 / GEMV_RING_BATCH) != 0) {
            continue;
        }
        const unsigned int t = t0 + i;
        const unsigned long long n = (unsigned long long)(blockIdx.x + t * gridDim.x) * R + r_in;
        if (t < mine && n < N) out[n] = from_f32<T>(bias ? a + to_f32(bias[n]) : a);
    }
}

"""
variants["rpw"] = (head, rpw)
# The consumers' two halves apart: "readonly" reads the lane's whole share of each stage from
# shared memory (the addresses ring_rows reads, XORed: no conversions or FMAs); "fmaonly" runs
# ring_rows with x in place of every weight row (the loads of one address fold into one, so
# shared-memory traffic is x's only: the arithmetic without the weight reads; wrong sums).
variants["readonly"] = (head, sub(ring, rows_call, """                {
                    const unsigned int packs = K / Vec16<T>::N;
                    unsigned int xr = 0;
                    for (int j = 0; j < R; ++j) {
                        if (j >= (int)nr) break;
#pragma unroll 4
                        for (unsigned int p = seg * 32 + lane; p < packs; p += S * 32) {
                            const uint4 q = *reinterpret_cast<const uint4*>(buf + ((size_t)j * K + p * Vec16<T>::N) * sizeof(T));
                            xr ^= q.x ^ q.y ^ q.z ^ q.w;
                        }
                    }
                    acc[b * R] += (float)(xr & 1u);
                }
"""))
fma_head = head.replace("""                if (FULL || j < (int)nr) wv[u][j] = load16(wr + (size_t)j * K + (p + u * step) * V);""",
                        """                if (FULL || j < (int)nr) wv[u][j] = load16(xs + (p + u * step) * V);""")
fma_head = fma_head.replace("""                const Pack<T> wv = load16(wr + (size_t)j * K + p * V);""",
                            """                const Pack<T> wv = load16(xs + p * V);""")
assert fma_head != head
variants["fmaonly"] = (fma_head, ring)
# Half the reads: the consumers read and sum only the first R / 2 rows of each stage (R > 1;
# wrong sums): does the reads' cost scale with the bytes read?
variants["half"] = (head, sub(ring, rows_call, """                ring_rows<T, R, false>(xs, buf, R > 1 ? R / 2 : nr, K, seg * 32 + lane, S * 32, acc + b * R);
"""))


# Hybrid: each block's last HYB stages (where it has more) skip the ring: the consumer threads
# load them straight into registers from global memory right after the PDL wait (8 packs a
# thread; the producer only asks L2 for them), and sum them after their ring stages (one
# cross-warp sum through shared memory). Fewer bytes pass through shared memory.
def hybrid(n):
    r = sub(ring, "    T* xs = reinterpret_cast<T*>(ring + nst * stage_bytes);\n",
            "    T* xs = reinterpret_cast<T*>(ring + nst * stage_bytes);\n"
            "    const unsigned int hyb = mine > HYB ? HYB : 0u, rmine = mine - hyb;\n")
    r = sub(r, "for (unsigned int t = 0; t < mine; ++t) {", "for (unsigned int t = 0; t < rmine; ++t) {")
    r = sub(r, "for (unsigned int t = 0; t < mine && t < nst; ++t) {",
            "for (unsigned int t = 0; t < mine; ++t) {\n                if (t >= nst && t < rmine) continue;")
    r = sub(r, "for (unsigned int t = grp; t < mine; t += NB * G, ++it) {", "for (unsigned int t = grp; t < rmine; t += NB * G, ++it) {")
    r = sub(r, "            if (tb < mine) {", "            if (tb < rmine) {")
    r = sub(r, "    pdl_wait();\n    mbar_wait(&sh.x_full, 0);\n", """    pdl_wait();
    const unsigned int ppr = K / Vec16<T>::N;
    uint4 hreg[HYB][8];
#pragma unroll
    for (int h = 0; h < HYB; ++h) {
        if (h < (int)hyb) {
            const unsigned long long r0 = (unsigned long long)(blockIdx.x + (rmine + h) * gridDim.x) * R;
            const unsigned int nr = (unsigned int)min((unsigned long long)R, N - r0);
#pragma unroll
            for (int k = 0; k < 8; ++k) {
                const unsigned int q = threadIdx.x + 256 * k;
                if (q < nr * ppr) {
                    // A volatile load, so the compiler issues it here (it may otherwise sink a
                    // load of __restrict__ data to its use, after the ring stages).
                    uint4 v;
                    asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
                                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                                 : "l"(w + r0 * K + (size_t)q * Vec16<T>::N));
                    hreg[h][k] = v;
                }
            }
        }
    }
    mbar_wait(&sh.x_full, 0);
""")
    tail_old = """        if (tb < mine && n < N) out[n] = from_f32<T>(bias ? a + to_f32(bias[n]) : a);
    }
}
"""
    r = sub(r, tail_old, """        if (tb < rmine && n < N) out[n] = from_f32<T>(bias ? a + to_f32(bias[n]) : a);
    }
    if (hyb) {
        __shared__ float hpart[HYB][GEMV_RING_WARPS][8];
#pragma unroll
        for (int h = 0; h < HYB; ++h) {
            const unsigned long long r0 = (unsigned long long)(blockIdx.x + (rmine + h) * gridDim.x) * R;
            const unsigned int nr = (unsigned int)min((unsigned long long)R, N - r0);
            float acc[8];
#pragma unroll
            for (int j = 0; j < 8; ++j) acc[j] = 0.0f;
#pragma unroll
            for (int k = 0; k < 8; ++k) {
                const unsigned int q = threadIdx.x + 256 * k;
                if (q < nr * ppr) {
                    const unsigned int row = q / ppr, p = q % ppr;
                    const Pack<T> xv = load16(xs + p * Vec16<T>::N);
                    // Opaque moves: the compiler cannot unpack the loaded words before here
                    // (it did, right after the loads, stalling on them before the ring).
                    uint4 u = hreg[h][k];
                    asm volatile("mov.b32 %0, %0;" : "+r"(u.x));
                    asm volatile("mov.b32 %0, %0;" : "+r"(u.y));
                    asm volatile("mov.b32 %0, %0;" : "+r"(u.z));
                    asm volatile("mov.b32 %0, %0;" : "+r"(u.w));
                    const Pack<T> wv = *reinterpret_cast<const Pack<T>*>(&u);
                    float d = 0.0f;
#pragma unroll
                    for (int e = 0; e < Vec16<T>::N; ++e) d = fmaf(to_f32(xv.v[e]), to_f32(wv.v[e]), d);
#pragma unroll
                    for (int j = 0; j < 8; ++j)
                        if (row == (unsigned int)j) acc[j] += d;
                }
            }
            const float a = warp_sum_rows<8>(acc, lane);
            if (lane % 4 == 0) hpart[h][warp][lane / 4] = a;
        }
        named_barrier(15, GEMV_RING_WARPS * 32);
        if (threadIdx.x < hyb * R) {
            const unsigned int h = threadIdx.x / R, j = threadIdx.x % R;
            float a = 0.0f;
            for (unsigned int v = 0; v < GEMV_RING_WARPS; ++v) a += hpart[h][v][j];
            const unsigned long long n = (unsigned long long)(blockIdx.x + (rmine + h) * gridDim.x) * R + j;
            if (n < N) out[n] = from_f32<T>(bias ? a + to_f32(bias[n]) : a);
        }
    }
}
""")
    return (head.replace("#define GEMV_RING_BATCH 8", "#define GEMV_RING_BATCH 8\n#define HYB " + str(n)), r)


variants["hybrid1"] = hybrid(1)
variants["hybrid2"] = hybrid(2)
for name, (h, r) in variants.items():
    open(f"{outdir}/gemv_{name}.cu", "w").write(h + r + tail)
    print(name)
