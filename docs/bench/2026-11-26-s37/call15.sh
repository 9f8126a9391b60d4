#!/usr/bin/env bash
# Session 37, call 15 (H200): (8192, 2048) on 64 KiB stages (4 rows of 16 KiB, beyond the rule's
# 32 KiB), two stages with 2 groups of 4 warps or three with one group of 8, against the rule's
# 2-row stages; three alternated rounds, outputs checked.
set -u
D=docs/bench/2026-11-26-s37
NVCC=/usr/local/cuda/bin/nvcc
K=gpukit-kernels/cuda
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
mkdir -p /tmp/gv
python3 $D/gemv_variants.py $K/gemv.cu /tmp/gv > /dev/null
$NVCC -O3 -std=c++17 -arch=sm_90a -w -I $K -DGEMV_SRC="\"/tmp/gv/gemv_main.cu\"" \
  docs/bench/2026-11-25-h200-s23/probe.cu -o /tmp/probe_main || exit 1
for r in 1 2 3; do
  for c in 8192,2048,2,4,4,2 8192,2048,4,4,2,1 8192,2048,4,4,2,2 8192,2048,4,8,3,1 8192,2048,4,8,3,2; do
    timeout 60 /tmp/probe_main main/p${c##*,} $c
  done
done 2>&1 | tee $OUT/gemv.txt | python3 $D/summarize.py
