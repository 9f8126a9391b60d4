#!/bin/bash
# Session 33: gemv_ring_bf16 as on main against early.py's copy (first ring copied into shared
# memory before the PDL wait when NPRE >= 100) in session 23's probe.cu, configs "K,N,R,S,NST,NPRE",
# ROUNDS alternated rounds.
set -u
D=docs/bench/2026-11-26-s33
NVCC=/usr/local/cuda/bin/nvcc
VARIANTS=${VARIANTS:-"main early"}
ROUNDS=${ROUNDS:-2}
mkdir -p /tmp/v
python3 $D/early.py gpukit-kernels/cuda/gemv.cu /tmp/v
for v in $VARIANTS; do
  $NVCC -O3 -std=c++17 -arch=sm_90a -w -Xptxas=-v -I gpukit-kernels/cuda -DGEMV_SRC="\"/tmp/v/gemv_$v.cu\"" \
    docs/bench/2026-11-25-h200-s23/probe.cu -o /tmp/probe_$v > /tmp/nvcc-$v.txt 2>&1 || { echo "nvcc $v failed"; tail -20 /tmp/nvcc-$v.txt; } &
done
wait
for v in $VARIANTS; do echo "$v: $(grep -A3 "gemv_ring_bf16'" /tmp/nvcc-$v.txt | grep -o '[0-9]* bytes spill stores.*\|Used [0-9]* registers' | tr '\n' ' ')"; done
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader
for round in $(seq $ROUNDS); do
  echo "== round $round"
  [ -x /tmp/probe_main ] && timeout 200 /tmp/probe_main main $MAIN_CONFIGS
  for v in $VARIANTS; do [ $v != main ] && [ -x /tmp/probe_$v ] && timeout 300 /tmp/probe_$v $v $EARLY_CONFIGS; done
done 2>&1
