#!/usr/bin/env bash
# Session 42, call 4 (H100): where the small ring's 4 µs goes at (896, 4864). main and nodot
# (consumers release stages unread: a bound) with the weights from HBM (the ops bench's 16
# copies) and from L2 (PROBE_COPIES=3: 26 MB, all resident), three alternated rounds; then the
# chain timelines of main (both) and nodot (L2).
# (Refactored after it ran onto device-calls.sh's chain_probe_variants and chain_probe_build:
# the same steps.)
set -u
. docs/bench/device-calls.sh
o=$OUT
chain_probe_variants
chain_probe_build main main & chain_probe_build nodot nodot &
chain_probe_build chain chain -DPROBE_CHAIN & chain_probe_build chainn chainn -DPROBE_CHAIN &
wait
C=896,4864,4,2,8,8
for r in 1 2 3; do
  for v in main nodot; do
    gemv_probe_run $v:$v-hbm $C
    PROBE_COPIES=3 gemv_probe_run $v:$v-l2 $C
  done
done > $o/gemv.txt 2>&1
gemv_probe_summary
{ gemv_probe_run chain:chain-hbm $C; PROBE_COPIES=3 gemv_probe_run chain:chain-l2 $C
  PROBE_COPIES=3 gemv_probe_run chainn:chainn-l2 $C; } > $o/chain.txt 2>&1
cat $o/chain.txt
