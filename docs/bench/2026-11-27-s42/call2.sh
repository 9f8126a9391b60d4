#!/usr/bin/env bash
# Session 42, call 2 (H100): call 1 again with ldpre's scratch aligned, plus xld (x read by the
# consumers instead of bulk-copied) and wearlyx (wearly with xld): three alternated rounds at the
# rule's parameters for (896, 4864), (2048, 2048) and (3072, 1024), then one chain each.
# (Refactored after it ran onto device-calls.sh's chain_probe_variants and chain_probe_build:
# the same steps.)
set -u
. docs/bench/device-calls.sh
o=$OUT
chain_probe_variants
V="main xld wearly wearlyx ldpre"
for v in $V; do gemv_probe_build $v $v & done
for v in chain chainx chainwx chainl; do chain_probe_build $v $v -DPROBE_CHAIN & done
wait
C="896,4864,4,2,8,8 2048,2048,4,4,4,4 3072,1024,2,2,4,4"
for r in 1 2 3; do
  for v in $V; do gemv_probe_run $v $C; done
done > $o/gemv.txt 2>&1
gemv_probe_summary
for v in chain chainx chainwx chainl; do gemv_probe_run $v 896,4864,4,2,8,8; done > $o/chain.txt 2>&1
cat $o/chain.txt
