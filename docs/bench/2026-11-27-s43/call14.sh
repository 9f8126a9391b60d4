#!/usr/bin/env bash
# Session 43, call 14 (H100): x loaded by the consumer lanes straight into registers, no copy of
# x by the producer (tail_variants.py xg), beside this tree's kernel, four alternated rounds.
set -u
. docs/bench/device-calls.sh
o=$OUT
nvidia-smi --query-gpu=name --format=csv,noheader
git show 2819fa2:gpukit-kernels/cuda/gemv.cu > /tmp/gemv_before.cu
chain_probe_variants /tmp/gemv_before.cu > /dev/null
cp gpukit-kernels/cuda/gemv.cu /tmp/gv/gemv_now.cu
python3 docs/bench/2026-11-27-s43/tail_variants.py gpukit-kernels/cuda/gemv.cu /tmp/gv > /dev/null
chain_probe_build now now & chain_probe_build xg xg &
wait
for r in 1 2 3 4; do
  for v in now xg; do gemv_probe_run $v 896,4864,4,2,8,8 2048,2048,4,4,4,4 1024,3072,4,2,6,6; done
done > $o/gemv.txt 2>&1
gemv_probe_summary
