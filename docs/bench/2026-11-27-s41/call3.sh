#!/usr/bin/env bash
# Session 41, call 3 (H200): the small ring GEMV's grid. At (896, 4864) the rule launches 132 blocks
# for 1216 four-row stages: 28 blocks take 10 stages, 104 take 9, and the ring holds 8, so a
# 10-stage block's last two wait for slots. 152 blocks give every block 8 stages (all resident, all
# asked of L2 before the PDL wait), 136 give at most 9, 174 at most 7; 20, 4 and 42 multiprocessors
# then hold two blocks; also 122, and the other small shapes on 128 and 116. Main's kernel (session
# 23's probe, PROBE_GRID), three alternated rounds, outputs checked. (Refactored after it ran onto
# device-calls.sh's gemv_probe_main and gemv_probe_summary: the same steps.)
set -u
. docs/bench/device-calls.sh
o=$OUT
gemv_probe_main
for r in 1 2 3; do
  for g in 132 136 152 174 122; do
    PROBE_GRID=$g gemv_probe_run main:g$g 896,4864,4,2,8,8
  done
  PROBE_GRID=132 gemv_probe_run main:g132n10 896,4864,4,2,10,10
  for g in 132 128 116; do
    PROBE_GRID=$g gemv_probe_run main:g$g 2048,2048,4,4,4,4 2048,1536,4,4,3,3 3072,1536,2,2,6,6
  done
done > $o/gemv.txt 2>&1
gemv_probe_summary
