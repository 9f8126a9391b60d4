#!/usr/bin/env bash
# Session 42, call 3 (H100): early.cu's register GEMV (weights loaded before the PDL wait, the
# next launch let in at entry; and the same kernel with its loads after the wait) beside main's
# ring GEMV at the launch rule's parameters, three alternated rounds, outputs checked.
set -u
. docs/bench/device-calls.sh
o=$OUT
gemv_probe_main
/usr/local/cuda/bin/nvcc -O3 -std=c++17 -arch=sm_90a -w -Xptxas=-v -I gpukit-kernels/cuda \
  docs/bench/2026-11-27-s42/early.cu -o /tmp/early > $o/nvcc-early.txt 2>&1 || echo "nvcc early failed"
for r in 1 2 3; do
  gemv_probe_run main 896,4864,4,2,8,8 2048,2048,4,4,4,4 1024,3072,4,2,6,6 1024,2048,4,2,4,4
  timeout 120 /tmp/early 896,4864,7,16,320,4,1 896,4864,7,16,320,4,0 896,4864,7,16,256,4,1 \
    2048,2048,8,32,256,4,1 2048,2048,8,32,256,4,0 1024,3072,8,16,256,4,1 1024,3072,8,16,256,4,0 \
    1024,2048,8,16,256,4,1 1024,2048,8,16,256,4,0
done > $o/gemv.txt 2>&1
gemv_probe_summary
