#!/usr/bin/env bash
# Session 37, call 15 (H200): (8192, 2048) on 64 KiB stages (4 rows of 16 KiB, beyond the rule's
# 32 KiB), two stages with 2 groups of 4 warps or three with one group of 8, against the rule's
# 2-row stages; three alternated rounds, outputs checked.
# (Refactored after it ran to use device-calls.sh's gemv_probe_* steps; the same builds and
# runs.)
set -u
. docs/bench/device-calls.sh
o=$OUT
D=docs/bench/2026-11-26-s37
gemv_probe_variants $D/gemv_variants.py
gemv_probe_build main main
for r in 1 2 3; do
  gemv_probe_run main 8192,2048,2,4,4,2 8192,2048,4,4,2,1 8192,2048,4,4,2,2 8192,2048,4,8,3,1 8192,2048,4,8,3,2
done 2>&1 | tee $OUT/gemv.txt | python3 $D/summarize.py
