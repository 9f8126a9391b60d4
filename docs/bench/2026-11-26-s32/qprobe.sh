#!/bin/bash
# Session 32: builds qprobe.cu against quant.cu (and VARIANTS of it: quant_<v>.cu under /tmp/qv,
# made by the caller) and runs CONFIGS for ROUNDS alternated rounds.
set -u
D=docs/bench/2026-11-26-s32
NVCC=/usr/local/cuda/bin/nvcc
VARIANTS=${VARIANTS:-main}
CONFIGS=${CONFIGS:-"4096,14336 14336,4096 2048,8192 8192,2048 4096,4096 4096,1024"}
ROUNDS=${ROUNDS:-2}
mkdir -p /tmp/qv; [ -d target/qv ] && cp target/qv/quant_*.cu /tmp/qv/
cp gpukit-kernels/cuda/quant.cu /tmp/qv/quant_main.cu
for v in $VARIANTS; do
  extra=""; [ "$v" = trace ] && extra="-DQTRACE"
  $NVCC -O3 -std=c++17 -arch=sm_90a -w -Xptxas=-v $extra -I gpukit-kernels/cuda -DQUANT_SRC="\"/tmp/qv/quant_$v.cu\"" \
    $D/qprobe.cu -o /tmp/qprobe_$v > /tmp/nvcc-q-$v.txt 2>&1 || { echo "nvcc $v failed"; tail -20 /tmp/nvcc-q-$v.txt; } &
done
wait
for v in $VARIANTS; do echo "$v: $(grep -A2 "qgemv_ring_bf16'" /tmp/nvcc-q-$v.txt | grep -o '[0-9]* bytes spill stores.*\|Used [0-9]* registers' | tr '\n' ' ')"; done
for round in $(seq $ROUNDS); do
  for v in $VARIANTS; do echo "== $v round $round"; [ -x /tmp/qprobe_$v ] && timeout 200 /tmp/qprobe_$v $CONFIGS; done
done 2>&1
