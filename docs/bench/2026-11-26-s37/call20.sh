#!/usr/bin/env bash
# Session 37, call 20 (H200): gemv_variants.py's uscale1 (twice the packs a lane loads a pass,
# every entry point for one block an SM: 124–128 registers at R 2 and 4, no spills; R 8 spills
# 48 bytes) against main at the large-ring shapes; three alternated rounds, outputs checked.
set -u
. docs/bench/device-calls.sh
o=$OUT
D=docs/bench/2026-11-26-s37
gemv_probe_variants $D/gemv_variants.py
gemv_probe_build main main & gemv_probe_build uscale1 uscale1 -DRING_U_SCALE=2 &
wait
SHAPES="2048,8192,8,2,4,2 8192,2048,2,4,4,2 4096,14336,4,4,4,2 14336,4096,1,4,4,2"
for r in 1 2 3; do
  gemv_probe_run main $SHAPES
  gemv_probe_run uscale1 $SHAPES
done 2>&1 | tee $OUT/gemv.txt | python3 $D/summarize.py
