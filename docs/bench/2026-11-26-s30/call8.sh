#!/usr/bin/env bash
# Session 30, call 8 (bundle of bece7e7): every GPU test (run.sh test), then compute-sanitizer
# memcheck and racecheck on the decode-state test (ring cases, NaN past the position).
set -u
b=target/gpu-bundle
o="$OUT/call8"; mkdir -p "$o"
OUT="$o" timeout 470 bash $b/run.sh test > "$o/run-test.txt" 2>&1
echo "run.sh rc $? at ${SECONDS}s"; tail -3 "$o/run-test.txt"
grep -E "FAILED|panicked" "$o/gpu-tests.log" | head -10
t=$b/tests/gpukit_ops__ops
timeout $((560 - SECONDS)) compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 \
  $t sdpa_at_device_position --include-ignored --test-threads=1 > "$o/memcheck.txt" 2>&1
echo "memcheck rc $?: $(grep -E 'ERROR SUMMARY' "$o/memcheck.txt" | tail -1) $(grep -E '^test result' "$o/memcheck.txt")"
timeout $((590 - SECONDS)) compute-sanitizer --tool racecheck --report-api-errors no --error-exitcode 9 \
  $t sdpa_at_device_position --include-ignored --test-threads=1 > "$o/racecheck.txt" 2>&1
echo "racecheck rc $? at ${SECONDS}s: $(grep -E 'RACECHECK SUMMARY' "$o/racecheck.txt" | tail -1) $(grep -E '^test result' "$o/racecheck.txt")"
