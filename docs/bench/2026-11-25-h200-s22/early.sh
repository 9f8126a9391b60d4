#!/bin/bash
# Session 22 prototype: the single-row persistent GEMV (gemv_<dt>_vec_m1) loading its first
# unit's first four 16-byte weight packs per lane into registers before the PDL wait
# (GPUKIT_GEMV_EARLY=1) against the L2 prefetch only; the linear tests with it on; the GEMV
# bench cases in alternated rounds.
set -u
export GPUKIT_CACHE_DIR=/tmp/gpukit-cache
B=target/gpu-bundle
for gz in $B/tests/*.gz $B/benches/*.gz $B/bin/*.gz; do [ -f "$gz" ] && gunzip -f "$gz" && chmod +x "${gz%.gz}"; done
W=/tmp/work; mkdir -p $W
GPUKIT_GEMV_EARLY=1 timeout 200 $B/tests/gpukit_ops__ops matmul --include-ignored --test-threads=1 > $OUT/tests.txt 2>&1
echo "matmul tests (early) rc $?"; grep -E "test result|panicked" $OUT/tests.txt | head -4
for round in 1 2 3; do
  for e in 0 1; do
    GPUKIT_GEMV_EARLY=$e GPUKIT_BENCH_OUT=$W/e$e-$round GPUKIT_BENCH_FILTER="gemv bf16 M=1" timeout 120 $B/benches/gpukit-ops__ops --bench > $W/log 2>&1
    echo "== early=$e round $round"; grep "gemv bf16" $W/log
  done
done | tee $OUT/ab.txt
GPUKIT_GEMV_EARLY=1 GPUKIT_BENCH_OUT=$W/peer GPUKIT_BENCH_FILTER="gemv bf16 M=1" timeout 120 $B/benches/gpukit-ops__ops --bench > $W/log 2>&1
timeout 200 python3 bench/peer_ops.py $W/peer > $OUT/bench-gemv.txt 2>&1; tail -7 $OUT/bench-gemv.txt
