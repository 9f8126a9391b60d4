#!/usr/bin/env bash
# Session 43, call 8 (H100): the small ring at (896, 4864) with one warp a group (S = 1: eight
# groups, no cross-warp reduction; x in registers needs XR = 4 there), beside S = 2, on this
# tree's kernel (now: x in registers since 4771fde) and the one before (2819fa2), three
# alternated rounds.
# (Refactored after it ran onto device-calls.sh's now_probe_setup: the same steps, and it
# prints the GPU's name.)
set -u
. docs/bench/device-calls.sh
o=$OUT
now_probe_setup
python3 docs/bench/2026-11-27-s43/xreg_variants.py /tmp/gemv_before.cu /tmp/gv > /dev/null
chain_probe_build before main & chain_probe_build xr4 xr -DGEMV_XR=4 &
wait
for f in $o/nvcc-*.txt; do echo "${f##*/}: $(grep -A3 "entry function 'gemv_ring_bf16_r4'" $f | grep -o "Used [0-9]* registers\|[0-9]* bytes spill stores" | tr '\n' ' ')"; done
for r in 1 2 3; do
  for v in before now; do gemv_probe_run $v 896,4864,4,2,8,8 896,4864,4,1,8,8; done
  gemv_probe_run xr4 896,4864,4,1,8,8
done > $o/gemv.txt 2>&1
gemv_probe_summary
