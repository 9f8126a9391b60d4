#!/usr/bin/env bash
# Session 37, call 6 (H200): the small-matrix ring (main since a3aaa9c) at (896, 4864) with more
# stages asked of L2 than the ring holds (npre 10–16 against the rule's 8) and one warp per
# group, and gemv_variants.py's trig (the consumers let the next launch start at the kernel's
# entry) at the small and the 32 MiB shapes; three alternated rounds, outputs checked.
# (Refactored after it ran to use device-calls.sh's gemv_probe_* steps; the same builds and
# runs.)
set -u
. docs/bench/device-calls.sh
o=$OUT
D=docs/bench/2026-11-26-s37
gemv_probe_variants $D/gemv_variants.py
gemv_probe_build main main & gemv_probe_build trig trig &
wait
SMALL="896,4864,4,2,8,8 2048,2048,4,4,4,4 3072,1024,2,2,4,4 2048,1024,4,4,2,2"
BIG="2048,8192,8,2,4,2 8192,2048,2,4,4,2"
for r in 1 2 3; do
  gemv_probe_run main 896,4864,0,1,0,0 $SMALL 896,4864,4,2,8,10 896,4864,4,2,8,12 896,4864,4,2,8,16 \
    896,4864,4,1,8,10 $BIG
  gemv_probe_run trig $SMALL 896,4864,4,2,8,12 $BIG
done 2>&1 | tee $OUT/gemv.txt | python3 $D/summarize.py
