#!/usr/bin/env bash
# Session 38, call 2: call 1's timing rounds again (call 1 piped them into a summary script
# that was not there, which stopped them): cvt against main, and main with 128 blocks at the
# 32 MiB shapes; three alternated rounds, outputs checked.
set -u
. docs/bench/device-calls.sh
o=$OUT
gemv_probe_variants docs/bench/2026-11-26-s38/gemv_variants.py
gemv_probe_build main main & gemv_probe_build cvt cvt &
wait
SHAPES="896,4864,4,2,8,8 2048,2048,4,4,4,4 3072,1024,2,2,4,4 2048,1024,4,4,2,2 2048,8192,8,2,4,2
  8192,2048,2,4,4,2 4096,14336,4,4,4,2 14336,4096,1,4,4,2"
for r in 1 2 3; do
  gemv_probe_run main $SHAPES
  gemv_probe_run cvt $SHAPES
  PROBE_GRID=128 gemv_probe_run main:grid128 2048,8192,8,2,4,2 8192,2048,2,4,4,2
done > $OUT/gemv.txt 2>&1
python3 docs/bench/2026-11-26-s37/summarize.py < $OUT/gemv.txt
