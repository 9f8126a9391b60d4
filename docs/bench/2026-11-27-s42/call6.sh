#!/usr/bin/env bash
# Session 42, call 6 (H100): call 5's trig (the next launch let in at entry) had its blocks
# enter ~5 µs before their wait, yet their stages landed no sooner: is prefetch.global.L2 dropped?
# trig with the stages asked of L2 by demand reads into a scratch (trigld) or one bulk prefetch a
# stage (trigbp), with three blocks an SM and with two (PROBE_CARVEOUT=58), beside main; three
# alternated rounds; then chains at (896, 4864).
# (Refactored after it ran onto device-calls.sh's chain_probe_variants and chain_probe_build:
# the same steps.)
set -u
. docs/bench/device-calls.sh
o=$OUT
chain_probe_variants
for v in main trigld trigbp; do gemv_probe_build $v $v & done
for v in chaintld chaintbp; do chain_probe_build $v $v -DPROBE_CHAIN & done
wait
C="896,4864,4,2,8,8 2048,2048,4,4,4,4 3072,1024,2,2,4,4"
for r in 1 2 3; do
  for v in main trigld trigbp; do
    gemv_probe_run $v $C
    PROBE_CARVEOUT=58 gemv_probe_run $v:$v-c58 $C
  done
done > $o/gemv.txt 2>&1
gemv_probe_summary
{ for v in chaintld chaintbp; do PROBE_CARVEOUT=58 gemv_probe_run $v:$v-c58 896,4864,4,2,8,8; done
} > $o/chain.txt 2>&1
cat $o/chain.txt
