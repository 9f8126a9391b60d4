#!/usr/bin/env bash
# Session 37, call 7 (H200): (896, 4864) on rings of 1-row stages (1.75 KiB; 58 registers and 60
# KiB, so three blocks fit on a multiprocessor), with the next launch let start after x lands
# (main) or at entry (trig: with three slots a multiprocessor, two launches can start early);
# against the small-matrix rule's 4-row ring; three alternated rounds, outputs checked.
# (Refactored after it ran to use device-calls.sh's gemv_probe_* steps; the same builds and
# runs.)
set -u
. docs/bench/device-calls.sh
o=$OUT
D=docs/bench/2026-11-26-s37
gemv_probe_variants $D/gemv_variants.py
gemv_probe_build main main & gemv_probe_build trig trig &
wait
for r in 1 2 3; do
  gemv_probe_run main 896,4864,4,2,8,8 896,4864,1,1,32,32 896,4864,1,2,32,32 896,4864,1,1,24,24
  gemv_probe_run trig 896,4864,1,1,32,32 896,4864,1,2,32,32
done 2>&1 | tee $OUT/gemv.txt | python3 $D/summarize.py
