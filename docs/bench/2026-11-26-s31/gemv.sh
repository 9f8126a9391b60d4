#!/bin/bash
# Session 31: gemv_ring_bf16 as on main and gemv_variants.py's copies (x in registers) in session
# 23's probe.cu, at the launch rule's parameters "K,N,R,S,NST,NPRE", ROUNDS alternated rounds.
set -u
D=docs/bench/2026-11-26-s31
NVCC=/usr/local/cuda/bin/nvcc
VARIANTS=${VARIANTS:-"main xregp xregf"}
CONFIGS=${CONFIGS:-"8192,2048,2,4,4,2 2048,8192,8,2,4,2 4096,14336,4,4,4,2 14336,4096,1,4,4,2"}
ROUNDS=${ROUNDS:-3}
mkdir -p /tmp/v
python3 $D/gemv_variants.py gpukit-kernels/cuda/gemv.cu /tmp/v > /dev/null
for v in $VARIANTS; do
  $NVCC -O3 -std=c++17 -arch=sm_90a -w -Xptxas=-v -I gpukit-kernels/cuda -DGEMV_SRC="\"/tmp/v/gemv_$v.cu\"" \
    docs/bench/2026-11-25-h200-s23/probe.cu -o /tmp/probe_$v > /tmp/nvcc-$v.txt 2>&1 || { echo "nvcc $v failed"; tail -20 /tmp/nvcc-$v.txt; } &
done
wait
for v in $VARIANTS; do echo "$v: $(grep -A2 "gemv_ring_bf16'" /tmp/nvcc-$v.txt | grep -o '[0-9]* bytes spill stores.*\|Used [0-9]* registers' | tr '\n' ' ')"; done
for round in $(seq $ROUNDS); do
  for v in $VARIANTS; do [ -x /tmp/probe_$v ] && timeout 120 /tmp/probe_$v $v $CONFIGS; done
done 2>&1
