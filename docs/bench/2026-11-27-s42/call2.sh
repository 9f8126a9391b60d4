#!/usr/bin/env bash
# Session 42, call 2 (H100): call 1 again with ldpre's scratch aligned, plus xld (x read by the
# consumers instead of bulk-copied) and wearlyx (wearly with xld): three alternated rounds at the
# rule's parameters for (896, 4864), (2048, 2048) and (3072, 1024), then one chain each.
set -u
. docs/bench/device-calls.sh
o=$OUT
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
mkdir -p /tmp/gv
python3 docs/bench/2026-11-27-s42/chain_variants.py gpukit-kernels/cuda/gemv.cu \
  docs/bench/2026-11-25-h200-s23/probe.cu /tmp/gv
V="main xld wearly wearlyx ldpre"
for v in $V; do gemv_probe_build $v $v & done
for v in chain chainx chainwx chainl; do
  /usr/local/cuda/bin/nvcc -O3 -std=c++17 -arch=sm_90a -w -Xptxas=-v -I gpukit-kernels/cuda \
    -DPROBE_CHAIN -DGEMV_SRC="\"/tmp/gv/gemv_$v.cu\"" /tmp/gv/probe_chain.cu -o /tmp/probe_$v \
    > $o/nvcc-$v.txt 2>&1 || echo "nvcc $v failed" &
done
wait
C="896,4864,4,2,8,8 2048,2048,4,4,4,4 3072,1024,2,2,4,4"
for r in 1 2 3; do
  for v in $V; do gemv_probe_run $v $C; done
done > $o/gemv.txt 2>&1
gemv_probe_summary
for v in chain chainx chainwx chainl; do gemv_probe_run $v 896,4864,4,2,8,8; done > $o/chain.txt 2>&1
cat $o/chain.txt
