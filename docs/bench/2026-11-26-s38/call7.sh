#!/usr/bin/env bash
# Session 38, call 7: gemv_variants.py's stagger (2 stages, then the rest of the first ring once
# the first has landed; stagger1: 1 stage) against main at every probe shape, with the large
# ring's balanced grid (128 blocks) as the launch rule now gives it; three alternated rounds,
# outputs checked; stagger's per-stage timeline.
set -u
. docs/bench/device-calls.sh
o=$OUT
gemv_probe_variants docs/bench/2026-11-26-s38/gemv_variants.py
gemv_probe_build main main & gemv_probe_build stagger stagger & gemv_probe_build stagger1 stagger -DSTAGGER=1 &
gemv_probe_build staggerline staggerline -DPROBE_TIMELINE &
wait
SMALL="896,4864,4,2,8,8 2048,2048,4,4,4,4 3072,1024,2,2,4,4"
LARGE="2048,8192,8,2,4,2 8192,2048,2,4,4,2 4096,14336,4,4,4,2 14336,4096,1,4,4,2"
for r in 1 2 3; do
  for v in main stagger stagger1; do
    gemv_probe_run $v $SMALL
    PROBE_GRID=128 gemv_probe_run $v $LARGE
  done
done > $OUT/gemv.txt 2>&1
python3 docs/bench/2026-11-26-s37/summarize.py < $OUT/gemv.txt
PROBE_GRID=128 gemv_probe_run staggerline 8192,2048,2,4,4,2 2048,8192,8,2,4,2 > $OUT/timeline.txt 2>&1
grep timeline $OUT/timeline.txt
