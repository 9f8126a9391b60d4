#!/usr/bin/env bash
# Session 43, call 4 (H200): call 3's xr beside main held to two blocks an SM (PROBE_CARVEOUT=58:
# does xr gain from x in registers or from its occupancy?) and xf (x unpacked to f32 in
# registers), four alternated rounds.
set -u
. docs/bench/device-calls.sh
o=$OUT
chain_probe_variants
python3 docs/bench/2026-11-27-s43/xreg_variants.py gpukit-kernels/cuda/gemv.cu /tmp/gv > /dev/null
chain_probe_build main main & chain_probe_build xr xr & chain_probe_build xf xr -DGEMV_XF &
wait
C="896,4864,4,2,8,8 2048,2048,4,4,4,4 1024,3072,4,2,6,6"
for r in 1 2 3 4; do
  for v in main xr xf; do gemv_probe_run $v $C; done
  PROBE_CARVEOUT=58 gemv_probe_run main:main2 $C
done > $o/gemv.txt 2>&1
gemv_probe_summary
