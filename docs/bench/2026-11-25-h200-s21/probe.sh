#!/bin/bash
# Session 21: gemv_ring_bf16 and the copies pieces.py patches, in probe.cu; CASES are
# "variant,ring KiB", run in two alternated rounds.
set -u
D=docs/bench/2026-11-25-h200-s21
NVCC=/usr/local/cuda/bin/nvcc
CASES=${CASES:-"main,128 p2,128 p4,128 p8,128 p4w,128"}
mkdir -p /tmp/v
python3 $D/pieces.py gpukit-kernels/cuda/gemv.cu /tmp/v > /dev/null
for v in $(for c in $CASES; do echo "${c%%,*}"; done | sort -u); do
  $NVCC -O3 -std=c++17 -arch=sm_90a -w -I gpukit-kernels/cuda -DGEMV_SRC="\"/tmp/v/gemv_$v.cu\"" \
    $D/probe.cu -o /tmp/probe_$v > $OUT/nvcc-$v.txt 2>&1 || { echo "nvcc $v failed"; tail -20 $OUT/nvcc-$v.txt; } &
done
wait
for round in 1 2; do
  for c in $CASES; do IFS=, read v kib <<< "$c"; [ -x /tmp/probe_$v ] && timeout 60 /tmp/probe_$v $v $kib; done
done 2>&1 | tee $OUT/${PROBE_NAME:-probe}.txt
