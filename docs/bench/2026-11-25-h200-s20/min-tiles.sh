#!/bin/bash
# Ran on a temporary patch, not kept: GPUKIT_RING_MIN_TILES set the fewest 64-key tiles per split
# in launch::sdpa_decode_ring_splits (1 = the committed plan).
set -u
export GPUKIT_CACHE_DIR=/tmp/gpukit-cache
B=target/gpu-bundle
for gz in $B/tests/*.gz $B/benches/*.gz $B/bin/*.gz; do [ -f "$gz" ] && gunzip -f "$gz" && chmod +x "${gz%.gz}"; done
for r in 1 2; do
  for k in 1 2 4 portable; do
    mkdir -p $OUT/$k$r
    if [ $k = portable ]; then export GPUKIT_SDPA_PORTABLE=1; else unset GPUKIT_SDPA_PORTABLE; export GPUKIT_RING_MIN_TILES=$k; fi
    GPUKIT_BENCH_OUT=$OUT/$k$r GPUKIT_BENCH_FILTER="sdpa decode" timeout 100 $B/benches/gpukit-ops__ops --bench > $OUT/$k$r/log 2>&1
    echo "== $k round $r"; grep -E "sdpa decode" $OUT/$k$r/log | head -6 | cut -c1-60
  done
done
