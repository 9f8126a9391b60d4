#!/usr/bin/env bash
# Session 29, call 5 (commit ace15f3's kernels): the full ops bench beside torch; the sampling,
# reduction, attention and determinism tests; compute-sanitizer memcheck on the sampling,
# reduction and decode-state tests, then racecheck on the decode-state test in the time left.
set -u
b=target/gpu-bundle
o="$OUT/call5"; mkdir -p "$o"
OUT="$o" timeout 300 bash $b/run.sh bench ops > "$o/bench-ops.txt" 2>&1
echo "bench rc $?"; sed -n '/^device:/,$p' "$o/peer-ops.log"
t=$b/tests/gpukit_ops__ops
$t sampling reductions sdpa --include-ignored --test-threads=1 > "$o/tests.txt" 2>&1
echo "tests rc $?: $(grep -E '^test result' "$o/tests.txt")"; grep -E "chi-square|FAILED" "$o/tests.txt"
$b/tests/gpukit_ops__determinism --include-ignored --test-threads=1 > "$o/determinism.txt" 2>&1
echo "determinism rc $?: $(grep -E '^test result' "$o/determinism.txt")"
timeout $((560 - SECONDS)) compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 \
  $t sampling reductions sdpa_at_device_position --include-ignored --test-threads=1 > "$o/memcheck.txt" 2>&1
echo "memcheck rc $?: $(grep -E 'ERROR SUMMARY' "$o/memcheck.txt" | tail -1) $(grep -E '^test result' "$o/memcheck.txt")"
timeout $((585 - SECONDS)) compute-sanitizer --tool racecheck --report-api-errors no --error-exitcode 9 \
  $t sdpa_at_device_position --include-ignored --test-threads=1 > "$o/racecheck.txt" 2>&1
echo "racecheck rc $? at ${SECONDS}s: $(grep -E 'RACECHECK SUMMARY' "$o/racecheck.txt" | tail -1) $(grep -E '^test result' "$o/racecheck.txt")"
