#!/usr/bin/env bash
# Session 36, call 9 (H200): the _swz ring's first tiles asked of L2 before the PDL wait where a
# split has 16 tiles or more (1024 keys): the rule's two ("t2", main) against 4, 6 and 8 ("r4",
# "r6", "r8"; 2 from 8 tiles, 1 below, as the rule), in session 35's probe, three alternated
# rounds; outputs compared bit for bit.
set -u
D=docs/bench/2026-11-26-s36
S35=docs/bench/2026-11-26-s35
S19=docs/bench/2026-11-24-h200-s19
NVCC=/usr/local/cuda/bin/nvcc
K=gpukit-kernels/cuda
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
V="t2 r4 r6 r8"
for v in $V; do mkdir -p /tmp/dv/$v; cp $K/*.cu $K/*.cuh /tmp/dv/$v/; done
python3 - <<'PY'
OLD = "        const unsigned tiles = a.chunk >= 8 * BN && first.begin + BN < first.end ? 2 : 1;\n"
for n in (4, 6, 8):
    p = f"/tmp/dv/r{n}/attention.cu"
    t = open(p).read()
    assert t.count(OLD) == 1
    new = (f"        const unsigned tiles = first.begin >= first.end ? 1 : min(a.chunk >= 16 * BN ? {n}u : a.chunk >= 8 * BN ? 2u : 1u,"
           f" (first.end - first.begin + BN - 1) / BN);\n")
    open(p, "w").write(t.replace(OLD, new))
PY
for v in $V; do
  $NVCC -O3 -std=c++17 -arch=sm_90a -w -DPROBE_SWZ -DATTN_PRESWIZZLED -I /tmp/dv/$v -I $S19 \
    -DATTN_SRC="\"/tmp/dv/$v/attention.cu\"" $S35/decode_probe.cu -o /tmp/dprobe_$v -lcuda > $OUT/nvcc-$v.txt 2>&1 || tail -20 $OUT/nvcc-$v.txt &
done
wait
for r in 1 2 3; do
  for v in $V; do OUTFILE=/tmp/dout-$v.bin /tmp/dprobe_$v $v; done
done > $OUT/ab.txt 2>&1
for v in r4 r6 r8; do
  cmp -s /tmp/dout-t2.bin /tmp/dout-$v.bin && echo "$v outputs: bitwise equal to t2" || echo "$v outputs: DIFFER"
done
python3 - $OUT/ab.txt <<'PY'
import collections, re, sys
t = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = re.match(r"(\S+)\s+GQA (\d+) len=(\d+).* ([\d.]+) us", line)
    if m: t[(m[2], m[3], m[1])].append(float(m[4]))
for k in sorted(t, key=lambda k: (int(k[0]), int(k[1]))):
    print(f"GQA {k[0]} {k[1]:>6} {k[2]:<8} " + " ".join(f"{x:6.2f}" for x in t[k]))
PY
