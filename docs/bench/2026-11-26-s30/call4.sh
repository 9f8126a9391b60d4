#!/usr/bin/env bash
# Session 30, call 4 (commit 7c2aefc's bundle): the decode cases of the ops bench beside torch;
# the attention tests (ring and portable kernels) and the determinism tests; compute-sanitizer
# memcheck and racecheck on the decode-state test (ring cases, NaN past the position).
set -u
b=target/gpu-bundle
o="$OUT/call4"; mkdir -p "$o"
GPUKIT_BENCH_FILTER="sdpa decode" OUT="$o" timeout 200 bash $b/run.sh bench ops > "$o/bench-ops.txt" 2>&1
echo "bench rc $?"; sed -n '/^device:/,$p' "$o/peer-ops.log"
t=$b/tests/gpukit_ops__ops
$t sdpa --include-ignored --test-threads=1 > "$o/tests.txt" 2>&1
echo "tests rc $?: $(grep -E '^test result' "$o/tests.txt")"; grep -E "FAILED|panicked" "$o/tests.txt" | head
GPUKIT_SDPA_PORTABLE=1 $t sdpa --include-ignored --test-threads=1 > "$o/tests-portable.txt" 2>&1
echo "portable tests rc $?: $(grep -E '^test result' "$o/tests-portable.txt")"; grep -E "FAILED|panicked" "$o/tests-portable.txt" | head
$b/tests/gpukit_ops__determinism --include-ignored --test-threads=1 > "$o/determinism.txt" 2>&1
echo "determinism rc $?: $(grep -E '^test result' "$o/determinism.txt")"
timeout $((500 - SECONDS)) compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 \
  $t sdpa_at_device_position --include-ignored --test-threads=1 > "$o/memcheck.txt" 2>&1
echo "memcheck rc $?: $(grep -E 'ERROR SUMMARY' "$o/memcheck.txt" | tail -1) $(grep -E '^test result' "$o/memcheck.txt")"
timeout $((585 - SECONDS)) compute-sanitizer --tool racecheck --report-api-errors no --error-exitcode 9 \
  $t sdpa_at_device_position --include-ignored --test-threads=1 > "$o/racecheck.txt" 2>&1
echo "racecheck rc $? at ${SECONDS}s: $(grep -E 'RACECHECK SUMMARY' "$o/racecheck.txt" | tail -1) $(grep -E '^test result' "$o/racecheck.txt")"
