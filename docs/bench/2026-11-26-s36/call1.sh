#!/usr/bin/env bash
# Session 36, call 1. Two probes, each variant alternated in three rounds:
#  1. the decode ring (session 35's probe, decode_probe.cu): the tensor-map entry point ("main"),
#     the shipped _swz kernel ("xor"), its first tiles asked of L2 per 128-byte line by the
#     producer warp's 32 lanes ("wlines", session 35's unrun call 13), the scores' MMA chain
#     split over two accumulators (even and odd 16-dim steps, "qk2"), and both ("qk2w");
#     outputs compared bit for bit with main's (qk2 rounds differently: compared with itself);
#  2. the ring GEMV (session 23's probe.cu) with gemv_variants.py's copies.
set -u
D=docs/bench/2026-11-26-s36
S35=docs/bench/2026-11-26-s35
S19=docs/bench/2026-11-24-h200-s19
NVCC=/usr/local/cuda/bin/nvcc
K=gpukit-kernels/cuda
V="xor wlines qk2 qk2w"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
for v in $V; do mkdir -p /tmp/dv/$v; cp $K/*.cu $K/*.cuh /tmp/dv/$v/; done
python3 - <<'PY'
OLD = """                bulk_prefetch_l2(rows_at(k, a.k_stride, first, key0), tile_bytes(key0, a.kv_len));
                bulk_prefetch_l2(rows_at(v, a.v_stride, first, key0), tile_bytes(key0, a.kv_len));
"""
COND = "    if (threadIdx.x == 32 * RING_CONSUMERS && blockIdx.x < units) {\n"
WCOND = "    if ((PRE ? threadIdx.x / 32 == RING_CONSUMERS : threadIdx.x == 32 * RING_CONSUMERS) && blockIdx.x < units) {\n"
WLINES = """                for (unsigned o = 128 * (threadIdx.x % 32); o < tile_bytes(key0, a.kv_len); o += 32 * 128) {
                    prefetch_l2(reinterpret_cast<const char*>(rows_at(k, a.k_stride, first, key0)) + o);
                    prefetch_l2(reinterpret_cast<const char*>(rows_at(v, a.v_stride, first, key0)) + o);
                }
"""
MMA_OLD = """                mma16816<T>(s[mt][j], qa[mt], b0, b1);
                mma16816<T>(s[mt][j + 1], qa[mt], b2, b3);
"""
MMA_NEW = """                mma16816<T>(kk & 1 ? s2[mt][j] : s[mt][j], qa[mt], b0, b1);
                mma16816<T>(kk & 1 ? s2[mt][j + 1] : s[mt][j + 1], qa[mt], b2, b3);
"""
ZERO_OLD = """        for (int j = 0; j < NT; ++j) s[mt][j][0] = s[mt][j][1] = s[mt][j][2] = s[mt][j][3] = 0.0f;
"""
ZERO_NEW = """        for (int j = 0; j < NT; ++j) s[mt][j][0] = s[mt][j][1] = s[mt][j][2] = s[mt][j][3] = 0.0f;
    float s2[MT][NT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int j = 0; j < NT; ++j) s2[mt][j][0] = s2[mt][j][1] = s2[mt][j][2] = s2[mt][j][3] = 0.0f;
"""
SUM_OLD = """    // Scores are in the log2 domain with ALiBi, raw (scale still to apply, > 0) without.
"""
SUM_NEW = """#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) s[mt][j][e] += s2[mt][j][e];
""" + SUM_OLD
def sub(t, old, new):
    assert t.count(old) == 1, old
    return t.replace(old, new)
for name in ["wlines", "qk2", "qk2w"]:
    p = f"/tmp/dv/{name}/attention.cu"
    t = open(p).read()
    if name in ("wlines", "qk2w"):
        t = sub(sub(t, OLD, WLINES), COND, WCOND)
    if name in ("qk2", "qk2w"):
        t = sub(sub(sub(t, MMA_OLD, MMA_NEW), ZERO_OLD, ZERO_NEW), SUM_OLD, SUM_NEW)
    open(p, "w").write(t)
PY
build() {  # name dir extra-flags
  $NVCC -O3 -std=c++17 -arch=sm_90a -w $3 -I $2 -I $S19 -DATTN_SRC="\"$2/attention.cu\"" \
    $S35/decode_probe.cu -o /tmp/dprobe_$1 -lcuda > $OUT/nvcc-$1.txt 2>&1 || tail -20 $OUT/nvcc-$1.txt
}
build main /tmp/dv/xor "" &
for v in $V; do build $v /tmp/dv/$v "-DPROBE_SWZ -DATTN_PRESWIZZLED" & done
# The GEMV copies meanwhile.
GV="main pipe w1 pw1"
mkdir -p /tmp/gv
python3 $D/gemv_variants.py $K/gemv.cu /tmp/gv > /dev/null
for v in $GV; do
  $NVCC -O3 -std=c++17 -arch=sm_90a -w -Xptxas=-v -I $K -DGEMV_SRC="\"/tmp/gv/gemv_$v.cu\"" \
    docs/bench/2026-11-25-h200-s23/probe.cu -o /tmp/probe_$v > $OUT/nvcc-gemv-$v.txt 2>&1 || { echo "nvcc $v failed"; tail -20 $OUT/nvcc-gemv-$v.txt; } &
done
wait
for r in 1 2 3; do
  for v in main $V; do OUTFILE=/tmp/dout-$v.bin /tmp/dprobe_$v $v; done
  OUTFILE=/tmp/dout-qk2-r$r.bin /tmp/dprobe_qk2 qk2 > /dev/null 2>&1
done 2>&1 | tee $OUT/ab.txt
for v in $V; do
  cmp -s /tmp/dout-main.bin /tmp/dout-$v.bin && echo "$v outputs: bitwise equal to main" || echo "$v outputs: DIFFER from main"
done
cmp -s /tmp/dout-qk2.bin /tmp/dout-qk2w.bin && cmp -s /tmp/dout-qk2.bin /tmp/dout-qk2-r1.bin && echo "qk2, qk2w and a rerun: bitwise equal"
python3 - $OUT/ab.txt <<'PY'
import collections, re, sys
t = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = re.match(r"(\S+)\s+GQA (\d+) len=(\d+).* ([\d.]+) us", line)
    if m: t[(m[2], m[3], m[1])].append(float(m[4]))
for k in sorted(t, key=lambda k: (int(k[0]), int(k[1]))):
    print(f"GQA {k[0]} {k[1]:>6} {k[2]:<8} " + " ".join(f"{x:6.2f}" for x in t[k]))
PY
for v in $GV; do echo "gemv $v: $(grep -A2 "gemv_ring_bf16'" $OUT/nvcc-gemv-$v.txt | grep -o '[0-9]* bytes spill stores\|Used [0-9]* registers' | tr '\n' ' ')"; done
CONFIGS="2048,8192,8,2,4,2 8192,2048,2,4,4,2 2048,8192,8,8,4,2 8192,2048,2,8,4,2 2048,8192,4,2,8,4 8192,2048,4,4,3,2 4096,14336,4,4,4,2"
for r in 1 2 3; do
  for v in $GV; do timeout 120 /tmp/probe_$v $v $CONFIGS; done
done 2>&1 | tee $OUT/gemv.txt | python3 -c '
import collections, re, sys
t = collections.defaultdict(list)
for line in sys.stdin:
    m = re.match(r"(\S+)\s+R=(\d+) S=(\d+) nst=(\d+)\s+k=(\d+)\s+n=(\d+)\s+([\d.]+) us.*sum\|x w\| (\S+)", line)
    if m: t[m.group(5, 6, 2, 3, 4, 1)].append((float(m[7]), m[8]))
for k in t: print("k=%s n=%s R=%s S=%s nst=%s %-5s" % k, " ".join("%.2f" % x for x, _ in t[k]), "err", t[k][0][1])
'
