#!/usr/bin/env bash
# Session 38, call 3: gemv.cu with unpack_f32 (main) against the same with element-by-element
# widening (elem) at every probe shape; main with a balanced grid (128 blocks, 122 at
# (896, 4864): every block the same number of stages, ±1 nowhere); main's small ring at 4, 8
# and 12 stages at (896, 4864). Two or three alternated rounds, outputs checked.
set -u
. docs/bench/device-calls.sh
o=$OUT
gemv_probe_variants docs/bench/2026-11-26-s38/gemv_variants.py
gemv_probe_build main main & gemv_probe_build elem elem &
wait
SHAPES="896,4864,4,2,8,8 2048,2048,4,4,4,4 3072,1024,2,2,4,4 2048,1024,4,4,2,2 2048,8192,8,2,4,2
  8192,2048,2,4,4,2 4096,14336,4,4,4,2 14336,4096,1,4,4,2"
for r in 1 2 3; do
  gemv_probe_run main $SHAPES
  gemv_probe_run elem $SHAPES
  PROBE_GRID=128 gemv_probe_run main:grid128 2048,2048,4,4,4,4 3072,1024,2,2,4,4 2048,1024,4,4,2,2 \
    2048,8192,8,2,4,2 8192,2048,2,4,4,2 4096,14336,4,4,4,2 14336,4096,1,4,4,2
  PROBE_GRID=122 gemv_probe_run main:grid122 896,4864,4,2,8,8
  gemv_probe_run main:nst 896,4864,4,2,4,4 896,4864,4,2,12,12 896,4864,4,4,4,4
done > $OUT/gemv.txt 2>&1
python3 docs/bench/2026-11-26-s37/summarize.py < $OUT/gemv.txt
