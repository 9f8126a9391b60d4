#!/bin/bash
# Ran on a temporary patch, not kept: GPUKIT_RING_VARIANT put a variant in the high bits of
# AttnArgs::causal (1: no split merge; 2: also no attention arithmetic; 3: also no warp merge or
# partial writes: results wrong, times informative). First split merge (two passes, 8 splits a round).
set -u
export GPUKIT_CACHE_DIR=/tmp/gpukit-cache
B=target/gpu-bundle
for gz in $B/tests/*.gz $B/benches/*.gz $B/bin/*.gz; do [ -f "$gz" ] && gunzip -f "$gz" && chmod +x "${gz%.gz}"; done
for round in 1 2; do
for v in 0 1 2 3; do
  mkdir -p $OUT/v$v
  GPUKIT_RING_VARIANT=$v GPUKIT_BENCH_OUT=$OUT/v$v GPUKIT_BENCH_FILTER="sdpa decode" timeout 100 $B/benches/gpukit-ops__ops --bench > $OUT/v$v/log 2>&1
  echo "== variant $v round $round"; grep -E "sdpa decode" $OUT/v$v/log | head -6
done
done
