#!/usr/bin/env bash
# Session 41, call 11 (H200): the ring GEMV with a batch of 4 or 2 rows instead of 8
# (batch_variants.py: each stage reduced soon after it is read, so only the last stage's
# reduction follows the last landing) against main, at the rule's launch parameters: (8192,
# 2048) R 2 S 4, 4 stages, 2 prefetched, 128 blocks; (14336, 4096) R 1, the same ring; (4096,
# 14336) R 4 (b4 only); (896, 4864) the small ring R 4 S 2, 8 stages (b4 only). Three alternated
# rounds, outputs checked.
set -u
. docs/bench/device-calls.sh
o=$OUT
gemv_probe_variants docs/bench/2026-11-27-s41/batch_variants.py
for v in main b4 b2; do gemv_probe_build $v $v; done
for r in 1 2 3; do
  for v in main b4 b2; do
    PROBE_GRID=128 gemv_probe_run $v 8192,2048,2,4,4,2 14336,4096,1,4,4,2
  done
  for v in main b4; do
    PROBE_GRID=128 gemv_probe_run $v 4096,14336,4,4,4,2
    gemv_probe_run $v 896,4864,4,2,8,8
  done
done > $o/gemv.txt 2>&1
gemv_probe_summary
