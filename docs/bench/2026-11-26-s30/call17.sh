#!/usr/bin/env bash
# Session 30, call 17 (H100, bundle of cae72e8): the full ops bench beside torch; the tests call 16
# had no time left for (the attention tests with GPUKIT_SDPA_PORTABLE=1, the scheduler's); racecheck
# on the decode-state test.
set -u
b=target/gpu-bundle
o="$OUT/call17"; mkdir -p "$o/ops"
OUT="$o/ops" timeout 300 bash $b/run.sh bench ops > "$o/ops/bench-ops.txt" 2>&1
echo "bench rc $? at ${SECONDS}s"; sed -n '/^device:/,$p' "$o/ops/peer-ops.log"
t=$b/tests/gpukit_ops__ops
GPUKIT_SDPA_PORTABLE=1 $t sdpa --include-ignored --test-threads=1 > "$o/tests-portable.txt" 2>&1
echo "portable sdpa tests rc $?: $(grep -E '^test result' "$o/tests-portable.txt")"
$b/tests/gpukit_sched__gpu_sched --include-ignored --test-threads=1 > "$o/tests-sched.txt" 2>&1
echo "sched tests rc $?: $(grep -E '^test result' "$o/tests-sched.txt")"
timeout $((580 - SECONDS)) compute-sanitizer --tool racecheck --report-api-errors no --error-exitcode 9 \
  $t sdpa_at_device_position --include-ignored --test-threads=1 > "$o/racecheck.txt" 2>&1
echo "racecheck rc $? at ${SECONDS}s: $(grep -E 'RACECHECK SUMMARY' "$o/racecheck.txt" | tail -1) $(grep -E '^test result' "$o/racecheck.txt")"
