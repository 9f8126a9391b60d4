#!/bin/bash
# Session 29, call 1: the decode ring on a temporary patch (GPUKIT_RING_VARIANT in the high
# bits of the kernel's batch argument; not kept as such): bits 0-2 = tiles of the block's first
# unit prefetched into L2 before the PDL wait, 8 = no split merge, 16 = no attention arithmetic
# (8 and 16: results wrong, times informative). Ops bench method, "sdpa decode" cases only.
set -u
. docs/bench/device-calls.sh
B=$b
unpack_bundle
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
for round in 1 2; do
for v in 0 1 2 4 8 24 10; do
  mkdir -p /tmp/v$v
  GPUKIT_RING_VARIANT=$v GPUKIT_BENCH_OUT=/tmp/v$v GPUKIT_BENCH_FILTER="sdpa decode" timeout 100 $B/benches/gpukit-ops__ops --bench > /tmp/v$v/log 2>&1
  echo "== variant $v round $round"; grep -E "sdpa decode" /tmp/v$v/log | head -6
done
done
