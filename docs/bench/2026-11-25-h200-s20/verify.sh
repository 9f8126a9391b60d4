#!/bin/bash
# Session 20 verification on the final decode ring: the ops bench's decode cases beside torch
# (ring, then the portable kernels forced, same run), then the GPU tests alongside
# compute-sanitizer memcheck and racecheck on the attention tests.
set -u
export GPUKIT_CACHE_DIR=/tmp/gpukit-cache
B=target/gpu-bundle
for gz in $B/tests/*.gz $B/benches/*.gz $B/bin/*.gz; do [ -f "$gz" ] && gunzip -f "$gz" && chmod +x "${gz%.gz}"; done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p $OUT/bench $OUT/portable
GPUKIT_BENCH_OUT=$OUT/bench GPUKIT_BENCH_FILTER="sdpa decode" timeout 100 $B/benches/gpukit-ops__ops --bench > $OUT/bench/log 2>&1
timeout 150 python3 bench/peer_ops.py $OUT/bench > $OUT/bench-decode.txt 2>&1; tail -8 $OUT/bench-decode.txt
GPUKIT_SDPA_PORTABLE=1 GPUKIT_BENCH_OUT=$OUT/portable GPUKIT_BENCH_FILTER="sdpa decode" timeout 100 $B/benches/gpukit-ops__ops --bench > $OUT/portable/log 2>&1
echo "== portable"; grep "sdpa decode" $OUT/portable/log
T=$B/tests/gpukit_ops__ops
{
  echo "== memcheck sdpa"; timeout 200 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 $T sdpa_at_device_position --include-ignored --test-threads=1 2>&1 | tail -3; echo "rc ${PIPESTATUS[0]}"
  echo "== racecheck sdpa"; timeout 280 compute-sanitizer --tool racecheck --report-api-errors no --error-exitcode 9 $T sdpa_at_device_position --include-ignored --test-threads=1 2>&1 | tail -3; echo "rc ${PIPESTATUS[0]}"
} > $OUT/sanitize.txt 2>&1 &
( OUT=$OUT/tests timeout 480 bash $B/run.sh test > $OUT/run-test.txt 2>&1 ) &
wait
tail -3 $OUT/run-test.txt; cat $OUT/sanitize.txt
cp $OUT/tests/gpu-tests.log $OUT/gpu-tests.log 2>/dev/null
