#!/bin/bash
# Session 20: the ring with W = 8 columns per merging thread where rows > 4 — attention tests,
# then the decode bench alternating the ring and the portable kernels (GPUKIT_SDPA_PORTABLE=1).
set -u
export GPUKIT_CACHE_DIR=/tmp/gpukit-cache
B=target/gpu-bundle
for gz in $B/tests/*.gz $B/benches/*.gz $B/bin/*.gz; do [ -f "$gz" ] && gunzip -f "$gz" && chmod +x "${gz%.gz}"; done
T=$B/tests/gpukit_ops__ops
timeout 240 $T sdpa --include-ignored --test-threads=1 > $OUT/sdpa-tests.txt 2>&1
echo "sdpa tests rc $?"; grep -E "test result|panicked" $OUT/sdpa-tests.txt | head -5
timeout 120 $B/tests/gpukit_ops__determinism --include-ignored --test-threads=1 > $OUT/determinism.txt 2>&1
echo "determinism rc $?"; grep -E "test result|panicked" $OUT/determinism.txt | head -3
for r in 1 2; do
  for k in ring portable; do
    mkdir -p $OUT/$k$r
    if [ $k = portable ]; then export GPUKIT_SDPA_PORTABLE=1; else unset GPUKIT_SDPA_PORTABLE; fi
    GPUKIT_BENCH_OUT=$OUT/$k$r GPUKIT_BENCH_FILTER="sdpa decode" timeout 100 $B/benches/gpukit-ops__ops --bench > $OUT/$k$r/log 2>&1
    echo "== $k round $r"; grep -E "sdpa decode" $OUT/$k$r/log | head -6
  done
done
