#!/usr/bin/env bash
# Session 42, call 8 (H200): call 4's decomposition of the small ring at (896, 4864) on the H200
# (weights from HBM / resident in L2; stages released unread), three alternated rounds, and a
# check that the probes refactored onto harness.cuh's gemv_bf16_error still build and agree
# (session 23's probe.cu, early.cu).
set -u
. docs/bench/device-calls.sh
o=$OUT
chain_probe_variants
gemv_probe_build s23 main &
chain_probe_build main main & chain_probe_build nodot nodot &
/usr/local/cuda/bin/nvcc -O3 -std=c++17 -arch=sm_90a -w -I gpukit-kernels/cuda \
  docs/bench/2026-11-27-s42/early.cu -o /tmp/early > $o/nvcc-early.txt 2>&1 || echo "nvcc early failed" &
wait
C=896,4864,4,2,8,8
for r in 1 2 3; do
  gemv_probe_run s23 $C
  for v in main nodot; do
    gemv_probe_run $v:$v-hbm $C
    PROBE_COPIES=3 gemv_probe_run $v:$v-l2 $C
  done
done > $o/gemv.txt 2>&1
timeout 60 /tmp/early 896,4864,7,16,320,4,0 896,4864,7,16,320,4,1 >> $o/gemv.txt 2>&1
gemv_probe_summary
