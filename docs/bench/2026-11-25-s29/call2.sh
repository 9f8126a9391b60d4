#!/bin/bash
# Session 29, call 2: the same temporary variant switch as call 1, plus bit 32 = a two-level
# split merge (groups of 8 splits merged by their last split, then the groups by the last group)
# for heads of more than 16 splits, or (with bit 64) of more than 8. The attention and
# determinism tests under variants 97 and 33 first, then the decode bench, two rounds.
set -u
. docs/bench/device-calls.sh
B=$b
unpack_bundle
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
for v in 97 33; do
  GPUKIT_RING_VARIANT=$v timeout 200 $B/tests/gpukit_ops__ops sdpa --include-ignored --test-threads=1 > /tmp/t$v.log 2>&1
  echo "== tests ops sdpa variant $v: rc $?"; grep -E "^test |test result" /tmp/t$v.log | tail -5
  GPUKIT_RING_VARIANT=$v timeout 200 $B/tests/gpukit_ops__determinism --include-ignored --test-threads=1 > /tmp/d$v.log 2>&1
  echo "== tests determinism variant $v: rc $?"; grep -E "test result" /tmp/d$v.log | tail -2
done
. "$(dirname "$0")/ring-variants.sh"; ring_variants "0 1 33 97 9"
