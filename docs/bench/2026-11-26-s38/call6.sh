#!/usr/bin/env bash
# Session 38, call 6: with bf16 widened a word at a time (main), the launch parameters again at
# (8192, 2048) (R 1 or 2, S 2 or 4, 4–8 stages, grid 128) and (896, 4864) (R 2 or 4, S 2 or 4,
# stages, prefetch, 132 / 198 / 264 blocks); three alternated rounds, outputs checked.
set -u
. docs/bench/device-calls.sh
o=$OUT
gemv_probe_variants docs/bench/2026-11-26-s38/gemv_variants.py
gemv_probe_build main main
for r in 1 2 3; do
  gemv_probe_run main 8192,2048,2,4,4,2 8192,2048,2,2,4,2 8192,2048,1,4,8,4 8192,2048,1,2,8,4 \
    8192,2048,1,4,8,2 8192,2048,2,4,6,2 896,4864,4,2,8,8 896,4864,4,2,8,4 896,4864,2,2,16,16 \
    896,4864,2,2,12,12 896,4864,4,4,8,8 896,4864,2,4,16,16
  PROBE_GRID=128 gemv_probe_run main:grid128 8192,2048,2,4,4,2 8192,2048,1,4,8,4 8192,2048,1,2,8,4
  PROBE_GRID=198 gemv_probe_run main:grid198 896,4864,4,2,4,4 896,4864,4,2,8,8 896,4864,2,2,8,8
  PROBE_GRID=264 gemv_probe_run main:grid264 896,4864,4,2,4,4 896,4864,2,2,8,8 896,4864,4,4,4,4
done > $OUT/gemv.txt 2>&1
python3 docs/bench/2026-11-26-s37/summarize.py < $OUT/gemv.txt
