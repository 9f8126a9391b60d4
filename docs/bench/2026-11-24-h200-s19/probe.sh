#!/bin/bash
# Session 19: gemv_ring_bf16 and patched copies of it (variants.py) in the floor's harness,
# each case "variant S nst", two alternated rounds.
set -u
D=docs/bench/2026-11-24-h200-s19
NVCC=/usr/local/cuda/bin/nvcc
CASES=${CASES:-"main,4,4 nocompute,4,4 earlygo,4,4 contig,4,4 waitfirst,4,4"}
mkdir -p /tmp/v
python3 $D/variants.py gpukit-kernels/cuda/gemv.cu /tmp/v > /dev/null
for v in $(for c in $CASES; do echo "${c%%,*}"; done | sort -u); do
  extra=""; case "$v" in trace*) extra=-DGEMV_TRACE;; esac
  $NVCC -O3 -std=c++17 -arch=sm_90a -w $extra -I gpukit-kernels/cuda -DGEMV_SRC="\"/tmp/v/gemv_$v.cu\"" \
    $D/gemv_probe.cu -o /tmp/probe_$v > $OUT/nvcc-$v.txt 2>&1 || { echo "nvcc $v failed"; tail -20 $OUT/nvcc-$v.txt; } &
done
wait
for round in 1 2; do
  for c in $CASES; do IFS=, read v s n <<< "$c"; [ -x /tmp/probe_$v ] && timeout 60 /tmp/probe_$v $v $s $n; done
done 2>&1 | tee $OUT/gemv-probe.txt
