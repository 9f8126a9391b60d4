#!/usr/bin/env bash
# Session 36, call 12: the ring GEMV (session 23's probe.cu) with gemv_variants.py's copies whose
# first stages are asked of L2 per line by the producer warp (lines; early: at entry), at 2–4
# stages prefetched (the rule: 64 KiB), against main, three alternated
# rounds, every output checked against a host reference.
set -u
D=docs/bench/2026-11-26-s36
NVCC=/usr/local/cuda/bin/nvcc
K=gpukit-kernels/cuda
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
GV="main lines early"
mkdir -p /tmp/gv
python3 $D/gemv_variants.py $K/gemv.cu /tmp/gv > /dev/null
for v in $GV; do
  $NVCC -O3 -std=c++17 -arch=sm_90a -w -Xptxas=-v -I $K -DGEMV_SRC="\"/tmp/gv/gemv_$v.cu\"" \
    docs/bench/2026-11-25-h200-s23/probe.cu -o /tmp/probe_$v > $OUT/nvcc-gemv-$v.txt 2>&1 || { echo "nvcc $v failed"; tail -20 $OUT/nvcc-gemv-$v.txt; } &
done
wait
for v in $GV; do echo "gemv $v: $(grep -A2 "gemv_ring_bf16'" $OUT/nvcc-gemv-$v.txt | grep -o '[0-9]* bytes spill stores\|Used [0-9]* registers' | tr '\n' ' ')"; done
P2="2048,8192,8,2,4,2 8192,2048,2,4,4,2 4096,14336,4,4,4,2 14336,4096,1,4,4,2 896,4864,8,2,8,4"
P3="2048,8192,8,2,4,3 8192,2048,2,4,4,3 4096,14336,4,4,4,3"
P4="2048,8192,8,2,4,4 8192,2048,2,4,4,4"
for r in 1 2 3; do
  for v in $GV; do
    timeout 120 /tmp/probe_$v $v/p2 $P2; timeout 120 /tmp/probe_$v $v/p3 $P3; timeout 120 /tmp/probe_$v $v/p4 $P4
  done
done 2>&1 | tee $OUT/gemv.txt | python3 -c '
import collections, re, sys
t = collections.defaultdict(list)
for line in sys.stdin:
    m = re.match(r"(\S+)\s+R=(\d+) S=(\d+) nst=(\d+)\s+k=(\d+)\s+n=(\d+)\s+([\d.]+) us.*sum\|x w\| (\S+)", line)
    if m: t[m.group(5, 6, 2, 3, 4, 1)].append((float(m[7]), m[8]))
for k in sorted(t): print("k=%s n=%s R=%s S=%s nst=%s %-9s" % k, " ".join("%.2f" % x for x, _ in t[k]), "err", t[k][0][1])
'
