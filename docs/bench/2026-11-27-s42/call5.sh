#!/usr/bin/env bash
# Session 42, call 5 (H100): when the next launch is let in. main (once x has landed), trig (at
# entry) and trigw (right after the PDL wait), each with the blocks an SM the kernel's registers
# allow (three) and with two (PROBE_CARVEOUT=58: 132 KiB of shared memory an SM), so that at most
# two launches' blocks share an SM; three alternated rounds; then chains at (896, 4864).
# (Refactored after it ran onto device-calls.sh's chain_probe_variants and chain_probe_build:
# the same steps.)
set -u
. docs/bench/device-calls.sh
o=$OUT
chain_probe_variants
for v in main trig trigw; do gemv_probe_build $v $v & done
for v in chain chaint; do chain_probe_build $v $v -DPROBE_CHAIN & done
wait
C="896,4864,4,2,8,8 2048,2048,4,4,4,4 3072,1024,2,2,4,4"
for r in 1 2 3; do
  for v in main trig trigw; do
    gemv_probe_run $v $C
    PROBE_CARVEOUT=58 gemv_probe_run $v:$v-c58 $C
  done
done > $o/gemv.txt 2>&1
gemv_probe_summary
{ PROBE_CARVEOUT=58 gemv_probe_run chain:chain-c58 896,4864,4,2,8,8
  PROBE_CARVEOUT=58 gemv_probe_run chaint:chaint-c58 896,4864,4,2,8,8
  gemv_probe_run chaint 896,4864,4,2,8,8; } > $o/chain.txt 2>&1
cat $o/chain.txt
