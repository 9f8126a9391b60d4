#!/usr/bin/env bash
# Session 43, call 10 (H100): call 9's ring of all of a block's stages with only the launch
# rule's first ring prefetched, six alternated rounds: (896, 4864) on 8 stages (the rule) or 10
# with 8 prefetched; (1024, 3072) on its 6 stages with all or 4 prefetched.
# (Refactored after it ran onto device-calls.sh's now_probe_setup: the same steps, and it
# prints the GPU's name.)
set -u
. docs/bench/device-calls.sh
o=$OUT
now_probe_setup
for r in 1 2 3 4 5 6; do
  gemv_probe_run now 896,4864,4,2,8,8 896,4864,4,2,10,8 1024,3072,4,2,6,6 1024,3072,4,2,6,4
done > $o/gemv.txt 2>&1
gemv_probe_summary
