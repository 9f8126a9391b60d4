#!/usr/bin/env bash
# Session 43, call 9 (H100): with x in registers the 4-row kernel holds two blocks an SM whatever
# its ring, so at (896, 4864) a ring of all of a block's 9–10 stages (no refill of a slot from
# HBM) costs no occupancy: this tree's kernel on 8 (the launch rule's), 10 and 12 stages, 8 or
# all prefetched, three alternated rounds.
# (Refactored after it ran onto device-calls.sh's now_probe_setup: the same steps, and it
# prints the GPU's name.)
set -u
. docs/bench/device-calls.sh
o=$OUT
now_probe_setup
for r in 1 2 3; do
  gemv_probe_run now 896,4864,4,2,8,8 896,4864,4,2,10,8 896,4864,4,2,10,10 896,4864,4,2,12,12
done > $o/gemv.txt 2>&1
gemv_probe_summary
