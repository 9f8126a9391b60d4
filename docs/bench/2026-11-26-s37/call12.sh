#!/usr/bin/env bash
# Session 37, call 12 (H200): (896, 4864) on 8-row stages (14 KiB) with two blocks an SM:
# gemv_variants.py's r8co2 (the 8-row entry point compiled for two blocks: 96 registers, spills)
# and r8half (the same summing each stage as two passes of four rows: 84 registers), against
# main's 4-row small ring and its 8-row entry point at one block an SM; three alternated rounds,
# outputs checked.
# (Refactored after it ran to use device-calls.sh's gemv_probe_* steps; the same builds and
# runs.)
set -u
. docs/bench/device-calls.sh
o=$OUT
D=docs/bench/2026-11-26-s37
gemv_probe_variants $D/gemv_variants.py
gemv_probe_build main main & gemv_probe_build r8co2 r8co2 & gemv_probe_build r8half r8half &
wait
R8="896,4864,8,2,4,4 896,4864,8,2,4,8 896,4864,8,4,4,4 896,4864,8,4,6,6"
for r in 1 2 3; do
  gemv_probe_run main 896,4864,4,2,8,8 896,4864,8,2,8,4
  gemv_probe_run r8co2 $R8
  gemv_probe_run r8half $R8
done 2>&1 | tee $OUT/gemv.txt | python3 $D/summarize.py
