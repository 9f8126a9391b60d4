#!/bin/bash
# Session 18 verification: GEMV bench beside torch, then the GPU tests and sanitizers together.
set -u
export GPUKIT_CACHE_DIR=/tmp/gpukit-cache
B=target/gpu-bundle
for gz in $B/tests/*.gz $B/benches/*.gz $B/bin/*.gz; do [ -f "$gz" ] && gunzip -f "$gz" && chmod +x "${gz%.gz}"; done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p $OUT/gemv
GPUKIT_BENCH_OUT=$OUT/gemv GPUKIT_BENCH_FILTER="gemv bf16 M=1" $B/benches/gpukit-ops__ops --bench > $OUT/gemv/log 2>&1
python3 bench/peer_ops.py $OUT/gemv > $OUT/bench-gemv.txt 2>&1; tail -12 $OUT/bench-gemv.txt
T=$B/tests/gpukit_ops__ops
( OUT=$OUT/tests bash $B/run.sh test > $OUT/run-test.txt 2>&1 ) &
{
for t in reductions_and_softmax sampling_on_the_device pre_norm_projections matmul_and_linear; do
  echo "== memcheck $t"; timeout 100 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 $T $t --include-ignored --test-threads=1 2>&1 | tail -4; echo "rc ${PIPESTATUS[0]}"
done
for t in reductions_and_softmax; do
  echo "== racecheck $t"; timeout 150 compute-sanitizer --tool racecheck --report-api-errors no --error-exitcode 9 $T $t --include-ignored --test-threads=1 2>&1 | tail -4; echo "rc ${PIPESTATUS[0]}"
done
} > $OUT/sanitize.txt 2>&1
wait
tail -3 $OUT/run-test.txt; cat $OUT/sanitize.txt
