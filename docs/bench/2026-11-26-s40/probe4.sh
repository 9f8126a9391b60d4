#!/usr/bin/env bash
# Session 40: session 35's decode probe on pre-swizzled caches for the attention.cu copies named
# in VARIANTS ("name:dir" pairs; dir holds attention.cu, the tree's headers are used), ROUNDS
# alternated rounds, outputs compared bit for bit with the first variant's. Run from the
# repository root on the GPU machine, $OUT set.
set -u
S35=docs/bench/2026-11-26-s35
S19=docs/bench/2026-11-24-h200-s19
NVCC=/usr/local/cuda/bin/nvcc
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
names=""
for nv in $VARIANTS; do
  n=${nv%%:*} d=${nv#*:}
  names="$names $n"
  mkdir -p /tmp/dv/$n && cp gpukit-kernels/cuda/*.cuh /tmp/dv/$n/ && cp $d/attention.cu /tmp/dv/$n/
  $NVCC -O3 -std=c++17 -arch=sm_90a -w -DPROBE_SWZ -DATTN_PRESWIZZLED -I /tmp/dv/$n -I $S19 \
    -DATTN_SRC="\"/tmp/dv/$n/attention.cu\"" $S35/decode_probe.cu -o /tmp/dprobe_$n -lcuda > $OUT/nvcc-$n.txt 2>&1 \
    || tail -20 $OUT/nvcc-$n.txt &
done
wait
for r in $(seq ${ROUNDS:-3}); do
  for n in $names; do OUTFILE=/tmp/dout-$n.bin /tmp/dprobe_$n $n; done
done > $OUT/ab.txt 2>&1
set -- $names
for n in ${names#* $1}; do
  cmp -s /tmp/dout-$1.bin /tmp/dout-$n.bin && echo "$n outputs: bitwise equal to $1" || echo "$n outputs: differ from $1"
done
python3 - $OUT/ab.txt <<'PY'
import collections, re, sys
t = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = re.match(r"(\S+)\s+GQA (\d+) len=(\d+).* ([\d.]+) us", line)
    if m: t[(m[2], m[3], m[1])].append(float(m[4]))
for k in sorted(t, key=lambda k: (int(k[0]), int(k[1]))):
    print(f"GQA {k[0]} {k[1]:>6} {k[2]:<10} " + " ".join(f"{x:6.2f}" for x in t[k]))
PY
