#!/bin/bash
# Session 22: linear_const_into (the single-row GEMV `_vec_m1_const` loading its first weights
# before the PDL wait): the linear and determinism tests, then the GEMV bench cases of this
# bundle against session 21's main (target/ab-old) in alternated rounds, and torch beside this one.
set -u
export GPUKIT_CACHE_DIR=/tmp/gpukit-cache
B=target/gpu-bundle
for gz in $B/tests/*.gz $B/benches/*.gz $B/bin/*.gz target/ab-old/*.gz; do [ -f "$gz" ] && gunzip -f "$gz" && chmod +x "${gz%.gz}"; done
W=/tmp/work; mkdir -p $W
timeout 200 $B/tests/gpukit_ops__ops matmul --include-ignored --test-threads=1 > $OUT/tests.txt 2>&1
echo "matmul tests rc $?"; grep -E "test result|panicked" $OUT/tests.txt | head -4
timeout 120 $B/tests/gpukit_ops__determinism --include-ignored --test-threads=1 --show-output >> $OUT/tests.txt 2>&1
echo "determinism rc $?"; grep -E "test result|panicked|\[gpu\] determinism" $OUT/tests.txt | tail -4
for round in 1 2 3; do
  for which in old new; do
    bin=$B/benches/gpukit-ops__ops; [ $which = old ] && bin=target/ab-old/gpukit-ops__ops
    GPUKIT_BENCH_OUT=$W/$which-$round GPUKIT_BENCH_FILTER="gemv bf16 M=1" timeout 120 $bin --bench > $W/log 2>&1
    echo "== $which round $round"; grep "gemv bf16" $W/log
  done
done | tee $OUT/ab.txt
timeout 200 python3 bench/peer_ops.py $W/new-3 > $OUT/bench-gemv.txt 2>&1; tail -8 $OUT/bench-gemv.txt
