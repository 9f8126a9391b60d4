#!/bin/bash
# Session 21 verification of the persistent head_dim-64 prefill (ran with prefill-persistent.diff
# applied to f0b6323; not kept, see docs/RESULTS.md, session 21): the ops bench's prefill cases
# beside torch (this build), A/B against the previous build's ops bench (target/ab-old, carried)
# in alternated rounds, then the GPU tests alongside compute-sanitizer memcheck and racecheck on
# the attention test (SANITIZE=0: the tests alone).
set -u
export GPUKIT_CACHE_DIR=/tmp/gpukit-cache
B=target/gpu-bundle
for gz in $B/tests/*.gz $B/benches/*.gz $B/bin/*.gz target/ab-old/*.gz; do [ -f "$gz" ] && gunzip -f "$gz" && chmod +x "${gz%.gz}"; done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p $OUT/bench
GPUKIT_BENCH_OUT=$OUT/bench GPUKIT_BENCH_FILTER="sdpa prefill" timeout 120 $B/benches/gpukit-ops__ops --bench > $OUT/bench/log 2>&1
timeout 200 python3 bench/peer_ops.py $OUT/bench > $OUT/bench-prefill.txt 2>&1; tail -8 $OUT/bench-prefill.txt
for round in 1 2; do
  for which in new old; do
    bin=$B/benches/gpukit-ops__ops; [ $which = old ] && bin=target/ab-old/gpukit-ops__ops
    mkdir -p $OUT/ab-$which-$round
    GPUKIT_BENCH_OUT=$OUT/ab-$which-$round GPUKIT_BENCH_FILTER="sdpa prefill" timeout 120 $bin --bench > $OUT/ab-$which-$round/log 2>&1
    echo "== $which round $round"; grep "sdpa prefill" $OUT/ab-$which-$round/log
  done
done | tee $OUT/ab.txt
[ "${SANITIZE:-1}" = 1 ] || { OUT=$OUT/tests timeout 400 bash $B/run.sh test > $OUT/run-test.txt 2>&1; tail -3 $OUT/run-test.txt; cp $OUT/tests/gpu-tests.log $OUT/gpu-tests.log; exit; }
T=$B/tests/gpukit_ops__ops
{
  echo "== memcheck sdpa"; timeout 250 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 $T sdpa_attention --include-ignored --test-threads=1 2>&1 | tail -3; echo "rc ${PIPESTATUS[0]}"
  echo "== racecheck sdpa"; timeout 300 compute-sanitizer --tool racecheck --report-api-errors no --error-exitcode 9 $T sdpa_attention --include-ignored --test-threads=1 2>&1 | tail -3; echo "rc ${PIPESTATUS[0]}"
} > $OUT/sanitize.txt 2>&1 &
( OUT=$OUT/tests timeout 480 bash $B/run.sh test > $OUT/run-test.txt 2>&1 ) &
wait
tail -3 $OUT/run-test.txt; cat $OUT/sanitize.txt
cp $OUT/tests/gpu-tests.log $OUT/gpu-tests.log 2>/dev/null
