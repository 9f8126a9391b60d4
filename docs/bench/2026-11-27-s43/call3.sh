#!/usr/bin/env bash
# Session 43, call 3 (H200): the small ring with each lane's packs of x in registers
# (xreg_variants.py: xr, two blocks an SM at 4-row stages; xr3, three) beside main at the
# small-ring shapes, four alternated rounds ((3072, 1024) needs XR = 6: xr6).
set -u
. docs/bench/device-calls.sh
o=$OUT
chain_probe_variants
python3 docs/bench/2026-11-27-s43/xreg_variants.py gpukit-kernels/cuda/gemv.cu /tmp/gv > /dev/null
chain_probe_build main main & chain_probe_build xr xr & chain_probe_build xr3 xr3 &
chain_probe_build xr6 xr -DGEMV_XR=6 &
wait
for f in $o/nvcc-*.txt; do echo "${f##*/}: $(grep -A3 "entry function 'gemv_ring_bf16_r[24]'" $f | grep -o "Used [0-9]* registers\|[0-9]* bytes spill stores" | tr '\n' ' ')"; done
for r in 1 2 3 4; do
  for v in main xr xr3; do
    gemv_probe_run $v 896,4864,4,2,8,8 2048,2048,4,4,4,4 1024,3072,4,2,6,6 1024,2048,4,2,4,4
  done
  for v in main xr6; do gemv_probe_run $v 3072,1024,2,2,4,4; done
done > $o/gemv.txt 2>&1
gemv_probe_summary
