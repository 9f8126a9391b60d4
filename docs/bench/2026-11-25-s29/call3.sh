#!/bin/bash
# Session 29, call 3: is the split merge's time instruction fetch? The merge made a non-inlined
# function; variant bit 32 = the producer warp, once its copies are issued, runs that same
# function dry (loads, no stores) on its head's partials, so the last split finds its code in
# the instruction caches. Decode bench, two rounds (variant bits as in call1.sh).
set -u
export GPUKIT_CACHE_DIR=/tmp/gpukit-cache
B=target/gpu-bundle
for gz in $B/tests/*.gz $B/benches/*.gz $B/bin/*.gz; do [ -f "$gz" ] && gunzip -f "$gz" && chmod +x "${gz%.gz}"; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
for round in 1 2; do
for v in 0 1 33 9; do
  mkdir -p /tmp/v$v
  GPUKIT_RING_VARIANT=$v GPUKIT_BENCH_OUT=/tmp/v$v GPUKIT_BENCH_FILTER="sdpa decode" timeout 100 $B/benches/gpukit-ops__ops --bench > /tmp/v$v/log 2>&1
  echo "== variant $v round $round"; grep -E "sdpa decode" /tmp/v$v/log | grep -v "len=1024" | awk '{print $4, $5, $7}'
done
done
