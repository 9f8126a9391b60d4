#!/usr/bin/env bash
# Session 43, call 8 (H100): the small ring at (896, 4864) with one warp a group (S = 1: eight
# groups, no cross-warp reduction; x in registers needs XR = 4 there), beside S = 2, main and
# xr, three alternated rounds.
set -u
. docs/bench/device-calls.sh
o=$OUT
chain_probe_variants
python3 docs/bench/2026-11-27-s43/xreg_variants.py gpukit-kernels/cuda/gemv.cu /tmp/gv > /dev/null
# gemv.cu now holds x in registers itself (4771fde): main is this tree's kernel, and s42main the
# kernel before it (the copy session 42's chain_variants.py makes from 2819fa2's gemv.cu).
git show 2819fa2:gpukit-kernels/cuda/gemv.cu > /tmp/gv/gemv_before.cu
chain_probe_build main main & chain_probe_build before before & chain_probe_build xr4 xr -DGEMV_XR=4 &
wait
for f in $o/nvcc-*.txt; do echo "${f##*/}: $(grep -A3 "entry function 'gemv_ring_bf16_r4'" $f | grep -o "Used [0-9]* registers\|[0-9]* bytes spill stores" | tr '\n' ' ')"; done
for r in 1 2 3; do
  for v in before main; do gemv_probe_run $v 896,4864,4,2,8,8 896,4864,4,1,8,8; done
  gemv_probe_run xr4 896,4864,4,1,8,8
done > $o/gemv.txt 2>&1
gemv_probe_summary
