#!/bin/bash
# Session 33: cprobe.cu (constant-weights GEMV) at CONFIGS, ROUNDS rounds.
set -u
D=docs/bench/2026-11-26-s33
/usr/local/cuda/bin/nvcc -O3 -std=c++17 -arch=sm_90a -w -Xptxas=-v -I gpukit-kernels/cuda $D/cprobe.cu -o /tmp/cprobe > /tmp/nvcc-c.txt 2>&1 || { tail -30 /tmp/nvcc-c.txt; exit 1; }
grep -o 'Function properties for .*\|Used [0-9]* registers\|[0-9]* bytes spill stores' /tmp/nvcc-c.txt | paste - - - | sed 's/Function properties for //' | head -20
for r in $(seq ${ROUNDS:-2}); do /tmp/cprobe $CONFIGS; done
