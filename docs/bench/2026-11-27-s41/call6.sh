#!/usr/bin/env bash
# Session 41, call 6 (H200): the small ring GEMV at (896, 4864) with every stage of a block asked
# of L2 before the PDL wait (npre 10 on the rule's 8-stage ring: the 9th and 10th stages of the
# 28 ten-stage blocks then come from L2 once their slots free), and 8-row stages (608 stages:
# 4 or 5 a block, all resident) with 1, 2 or 4 warps a group. Main's kernel, four alternated rounds,
# outputs checked. (Refactored after it ran onto device-calls.sh's gemv_probe_main and
# gemv_probe_summary: the same steps.)
set -u
. docs/bench/device-calls.sh
o=$OUT
gemv_probe_main
for r in 1 2 3 4; do
  gemv_probe_run main 896,4864,4,2,8,8 896,4864,4,2,8,10 896,4864,8,2,5,5 896,4864,8,4,5,5 896,4864,8,1,5,5
done > $o/gemv.txt 2>&1
gemv_probe_summary
