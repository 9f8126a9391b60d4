#!/usr/bin/env bash
# Session 35 (session 34's decode_ab.sh): main against the pre-swizzled cache's 1-d copies
# (pswz_variants.py), in this session's probe, ROUNDS alternated rounds, outputs compared bit for
# bit with main's. Every variant but main is built with -DATTN_PRESWIZZLED (its cache rewritten
# into the pre-swizzled layout after the fill). Run from the repository root on the GPU machine,
# $OUT set.
set -u
D=docs/bench/2026-11-26-s35
S19=docs/bench/2026-11-24-h200-s19
NVCC=/usr/local/cuda/bin/nvcc
VARIANTS=${VARIANTS:-"main pswz"}
ROUNDS=${ROUNDS:-3}
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
python3 $D/pswz_variants.py gpukit-kernels/cuda /tmp/dv $VARIANTS > /dev/null
for v in $VARIANTS; do
  extra=""; [ "$v" != main ] && extra="-DATTN_PRESWIZZLED"
  $NVCC -O3 -std=c++17 -arch=sm_90a -w $extra -I /tmp/dv/$v -I $S19 -DATTN_SRC="\"/tmp/dv/$v/attention.cu\"" \
    $D/decode_probe.cu -o /tmp/dprobe_$v -lcuda > $OUT/nvcc-$v.txt 2>&1 || { echo "nvcc $v failed"; tail -20 $OUT/nvcc-$v.txt; } &
done
wait
for r in $(seq $ROUNDS); do
  for v in $VARIANTS; do OUTFILE=/tmp/dout-$v.bin /tmp/dprobe_$v $v; done
done 2>&1 | tee $OUT/ab.txt
for v in $VARIANTS; do
  cmp -s /tmp/dout-main.bin /tmp/dout-$v.bin && echo "$v outputs: bitwise equal to main" || echo "$v outputs: DIFFER"
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
