#!/usr/bin/env bash
# Session 41, call 10 (H100): the small ring GEMV at (896, 4864), where the H100 ran 1.41–1.45×
# torch in call 7 (goal 1.5×; the rule's constants were set on the H200): the rule's ring (R 4, S 2,
# 8 stages, 8 prefetched) against other stage rows, group widths, ring depths, prefetch depths and
# grids. Main's kernel, three alternated rounds, outputs checked. (Refactored after it ran onto
# device-calls.sh's gemv_probe_main and gemv_probe_summary: the same steps.)
set -u
. docs/bench/device-calls.sh
o=$OUT
gemv_probe_main
for r in 1 2 3; do
  gemv_probe_run main 896,4864,4,2,8,8 896,4864,4,2,8,10 896,4864,4,2,10,10 896,4864,4,2,8,4 \
    896,4864,4,1,8,8 896,4864,4,4,8,8 896,4864,8,2,5,5 896,4864,8,1,5,5 896,4864,2,2,16,16
  for g in 152 174; do PROBE_GRID=$g gemv_probe_run main:g$g 896,4864,4,2,8,8; done
done > $o/gemv.txt 2>&1
gemv_probe_summary
