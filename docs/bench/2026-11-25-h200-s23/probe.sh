#!/bin/bash
# Session 23: gemv_ring_bf16 and the copies variants.py patches, in probe.cu, at each launch
# configuration "K,N,R,S,NST" of CONFIGS, two alternated rounds (binaries kept in /tmp).
set -u
D=docs/bench/2026-11-25-h200-s23
NVCC=/usr/local/cuda/bin/nvcc
VARIANTS=${VARIANTS:-"main nocompute warp1 regrel1 regrel8"}
CONFIGS=${CONFIGS:-"2048,8192,8,2,4 2048,8192,8,4,4 2048,8192,8,8,4 2048,8192,4,4,8 2048,8192,4,2,8
 2048,8192,4,1,8 2048,8192,2,2,16 8192,2048,2,4,4 8192,2048,2,8,4 8192,2048,1,4,8 8192,2048,1,2,8
 8192,2048,1,1,8 4096,14336,4,4,4 14336,4096,1,4,4"}
mkdir -p /tmp/v
python3 $D/variants.py gpukit-kernels/cuda/gemv.cu /tmp/v > /dev/null
for v in $VARIANTS; do
  [ -x /tmp/probe_$v ] && continue  # built by an earlier round
  $NVCC -O3 -std=c++17 -arch=sm_90a -w -Xptxas=-v -I gpukit-kernels/cuda -DGEMV_SRC="\"/tmp/v/gemv_$v.cu\"" \
    $D/probe.cu -o /tmp/probe_$v > /tmp/nvcc-$v.txt 2>&1 || { echo "nvcc $v failed"; tail -20 /tmp/nvcc-$v.txt; } &
done
wait
for v in $VARIANTS; do echo "$v: $(grep -A2 "gemv_ring_bf16'" /tmp/nvcc-$v.txt | grep -o '[0-9]* bytes spill stores.*\|Used [0-9]* registers' | tr '\n' ' ')"; done
for round in 1 2; do
  for v in $VARIANTS; do [ -x /tmp/probe_$v ] && timeout 120 /tmp/probe_$v $v $CONFIGS; done
done 2>&1
