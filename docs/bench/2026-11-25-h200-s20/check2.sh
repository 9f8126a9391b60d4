#!/bin/bash
# Variant 1 (no split merge) needs the temporary GPUKIT_RING_VARIANT patch of variants.sh.
# Session 20: the ring's one-pass split merge — attention tests, then the decode bench with the
# in-kernel merge (variant 0) and without it (variant 1, results wrong, times informative).
set -u
export GPUKIT_CACHE_DIR=/tmp/gpukit-cache
B=target/gpu-bundle
for gz in $B/tests/*.gz $B/benches/*.gz $B/bin/*.gz; do [ -f "$gz" ] && gunzip -f "$gz" && chmod +x "${gz%.gz}"; done
T=$B/tests/gpukit_ops__ops
timeout 240 $T sdpa --include-ignored --test-threads=1 > $OUT/sdpa-tests.txt 2>&1
echo "sdpa tests rc $?"; grep -E "test result|panicked" $OUT/sdpa-tests.txt | head -5
timeout 120 $B/tests/gpukit_ops__determinism --include-ignored --test-threads=1 > $OUT/determinism.txt 2>&1
echo "determinism rc $?"; grep -E "test result|panicked" $OUT/determinism.txt | head -3
for v in ${VARIANTS:-0 1 0 1}; do
  mkdir -p $OUT/v$v
  GPUKIT_RING_VARIANT=$v GPUKIT_BENCH_OUT=$OUT/v$v GPUKIT_BENCH_FILTER="sdpa decode" timeout 100 $B/benches/gpukit-ops__ops --bench > $OUT/v$v/log 2>&1
  echo "== variant $v"; grep -E "sdpa decode" $OUT/v$v/log | head -6
done
