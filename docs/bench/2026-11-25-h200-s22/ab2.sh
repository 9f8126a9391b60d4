#!/bin/bash
# Session 22: the decode ring with two sets of four consumer warps on alternate tiles (this
# bundle) against the acquire-release count alone (target/ab-A) and session 21's main
# (target/ab-old): the attention and determinism tests on this bundle, then the decode bench in
# alternated rounds.
set -u
export GPUKIT_CACHE_DIR=/tmp/gpukit-cache
B=target/gpu-bundle
for gz in $B/tests/*.gz $B/benches/*.gz $B/bin/*.gz target/ab-old/*.gz target/ab-A/*.gz; do [ -f "$gz" ] && gunzip -f "$gz" && chmod +x "${gz%.gz}"; done
W=/tmp/work; mkdir -p $W
T=$B/tests/gpukit_ops__ops
timeout 240 $T sdpa --include-ignored --test-threads=1 > $OUT/tests.txt 2>&1
echo "sdpa tests rc $?"; grep -E "test result|panicked|FAIL" $OUT/tests.txt | head -8
timeout 120 $B/tests/gpukit_ops__determinism --include-ignored --test-threads=1 >> $OUT/tests.txt 2>&1
echo "determinism rc $?"; grep -E "test result|panicked" $OUT/tests.txt | tail -2
FILTER=${FILTER:-sdpa decode}
for round in 1 2 3; do
  for which in old acq new; do
    bin=$B/benches/gpukit-ops__ops
    [ $which = old ] && bin=target/ab-old/gpukit-ops__ops
    [ $which = acq ] && bin=target/ab-A/gpukit-ops__ops
    GPUKIT_BENCH_OUT=$W/$which-$round GPUKIT_BENCH_FILTER="$FILTER" timeout 120 $bin --bench > $W/log 2>&1
    echo "== $which round $round"; grep "$FILTER" $W/log
  done
done | tee $OUT/ab.txt
