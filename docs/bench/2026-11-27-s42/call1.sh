#!/usr/bin/env bash
# Session 42, call 1 (H100): the small ring GEMV's chain across launches. main, wearly (first
# ring copied before the PDL wait) and ldpre (cp.async demand reads into scratch instead of L2
# line prefetches), three alternated rounds at the rule's parameters for (896, 4864), (2048,
# 2048) and (3072, 1024); then the chain* copies print per-launch timelines at (896, 4864).
# (Refactored after it ran onto device-calls.sh's chain_probe_variants and chain_probe_build:
# the same steps.)
set -u
. docs/bench/device-calls.sh
o=$OUT
chain_probe_variants
for v in main wearly ldpre; do gemv_probe_build $v $v & done
for v in chain chainw chainl; do chain_probe_build $v $v -DPROBE_CHAIN & done
wait
C="896,4864,4,2,8,8 2048,2048,4,4,4,4 3072,1024,2,2,4,4"
for r in 1 2 3; do
  for v in main wearly ldpre; do gemv_probe_run $v $C; done
done > $o/gemv.txt 2>&1
gemv_probe_summary
for r in 1 2; do
  for v in chain chainw chainl; do gemv_probe_run $v 896,4864,4,2,8,8; done
done > $o/chain.txt 2>&1
cat $o/chain.txt
