#!/bin/bash
# Session 20, first look at the decode ring: the attention and determinism tests, memcheck on the
# device-position test, then the ops bench's decode cases beside torch.
set -u
export GPUKIT_CACHE_DIR=/tmp/gpukit-cache
B=target/gpu-bundle
for gz in $B/tests/*.gz $B/benches/*.gz $B/bin/*.gz; do [ -f "$gz" ] && gunzip -f "$gz" && chmod +x "${gz%.gz}"; done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
T=$B/tests/gpukit_ops__ops
timeout 240 $T sdpa --include-ignored --test-threads=1 --show-output > $OUT/sdpa-tests.txt 2>&1
echo "sdpa tests rc $?"; grep -E "^test |test result|panicked|assert" $OUT/sdpa-tests.txt | head -20
timeout 120 $B/tests/gpukit_ops__determinism --include-ignored --test-threads=1 > $OUT/determinism.txt 2>&1
echo "determinism rc $?"; grep -E "test result|panicked" $OUT/determinism.txt | head
timeout 200 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 $T sdpa_at_device_position --include-ignored --test-threads=1 > $OUT/memcheck.txt 2>&1
echo "memcheck rc $?"; tail -3 $OUT/memcheck.txt
mkdir -p $OUT/bench
GPUKIT_BENCH_OUT=$OUT/bench GPUKIT_BENCH_FILTER="sdpa decode" timeout 150 $B/benches/gpukit-ops__ops --bench > $OUT/bench/log 2>&1
echo "bench rc $?"
timeout 150 python3 bench/peer_ops.py $OUT/bench > $OUT/bench-decode.txt 2>&1; tail -9 $OUT/bench-decode.txt
