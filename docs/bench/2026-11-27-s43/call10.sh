#!/usr/bin/env bash
# Session 43, call 10 (H100, then the same script on the H200 as call 11): call 9's ring of all
# of a block's stages with only the launch rule's first ring prefetched, six alternated rounds:
# (896, 4864) on 8 stages (the rule) or 10 with 8 prefetched; (1024, 3072) on its 6 stages
# with all or 4 prefetched.
set -u
. docs/bench/device-calls.sh
o=$OUT
nvidia-smi --query-gpu=name --format=csv,noheader
git show 2819fa2:gpukit-kernels/cuda/gemv.cu > /tmp/gemv_before.cu
chain_probe_variants /tmp/gemv_before.cu > /dev/null
cp gpukit-kernels/cuda/gemv.cu /tmp/gv/gemv_now.cu
chain_probe_build now now
for r in 1 2 3 4 5 6; do
  gemv_probe_run now 896,4864,4,2,8,8 896,4864,4,2,10,8 1024,3072,4,2,6,6 1024,3072,4,2,6,4
done > $o/gemv.txt 2>&1
gemv_probe_summary
