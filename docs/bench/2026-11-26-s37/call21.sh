#!/usr/bin/env bash
# Session 37, call 21 (H200): gemv_variants.py's dyn (the grid's last 1 or 2 rounds of stages
# claimed one at a time from a grid-wide counter) against main at the large-ring and small-ring
# shapes; three alternated rounds, outputs checked (each probe process times many launches, so
# the counter's reset between launches is exercised too).
set -u
. docs/bench/device-calls.sh
o=$OUT
D=docs/bench/2026-11-26-s37
gemv_probe_variants $D/gemv_variants.py
gemv_probe_build main main & gemv_probe_build dyn1 dyn -DRING_DYN_ROUNDS=1 &
gemv_probe_build dyn2 dyn -DRING_DYN_ROUNDS=2 &
wait
SHAPES="2048,8192,8,2,4,2 8192,2048,2,4,4,2 4096,14336,4,4,4,2 14336,4096,1,4,4,2 896,4864,4,2,8,8"
for r in 1 2 3; do
  gemv_probe_run main $SHAPES
  gemv_probe_run dyn1 $SHAPES
  gemv_probe_run dyn2 $SHAPES
done 2>&1 | tee $OUT/gemv.txt | python3 $D/summarize.py
