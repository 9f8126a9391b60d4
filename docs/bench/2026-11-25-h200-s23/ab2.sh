#!/bin/bash
# Session 23, call 4: the decode ring with its split merge shared by the last C splits (this
# bundle, B) against main (target/ab-A): the attention and determinism tests on B, one decode
# test under compute-sanitizer memcheck (the mergers wait on other blocks), then the decode
# bench in alternated rounds.
set -u
export GPUKIT_CACHE_DIR=/tmp/gpukit-cache
B=target/gpu-bundle
for gz in $B/tests/*.gz $B/benches/*.gz $B/bin/*.gz target/ab-A/*.gz; do [ -f "$gz" ] && gunzip -f "$gz" && chmod +x "${gz%.gz}"; done
T=$B/tests/gpukit_ops__ops
timeout 240 $T sdpa --include-ignored --test-threads=1 > $OUT/tests.txt 2>&1
echo "sdpa tests rc $?"; grep -E "test result|panicked|FAIL" $OUT/tests.txt | head -8
timeout 120 $B/tests/gpukit_ops__determinism --include-ignored --test-threads=1 >> $OUT/tests.txt 2>&1
echo "determinism rc $?"; grep -E "test result|panicked" $OUT/tests.txt | tail -3
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 $T sdpa_at_device_position_and_decode_state::cuda \
  --include-ignored --test-threads=1 >> $OUT/tests.txt 2>&1
echo "memcheck rc $?"; grep -E "ERROR SUMMARY|test result" $OUT/tests.txt | tail -2
FILTER=${FILTER:-sdpa decode}
for round in 1 2 3; do
  for which in A B; do
    bin=$B/benches/gpukit-ops__ops
    [ $which = A ] && bin=target/ab-A/gpukit-ops__ops
    mkdir -p /tmp/ab-$which-$round
    GPUKIT_BENCH_OUT=/tmp/ab-$which-$round GPUKIT_BENCH_FILTER="$FILTER" timeout 120 $bin --bench > /tmp/ab-$which-$round/log 2>&1
    echo "== $which round $round"; grep "$FILTER" /tmp/ab-$which-$round/log
  done
done > $OUT/ab-merge.txt 2>&1
cat $OUT/ab-merge.txt
