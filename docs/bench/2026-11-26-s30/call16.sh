#!/usr/bin/env bash
# Session 30, call 16 (bundle of cae72e8): every GPU test (run.sh test), then the full ops bench
# beside torch, then memcheck and racecheck on the decode-state test in the time left.
set -u
b=target/gpu-bundle
o="$OUT/call16"; mkdir -p "$o"
OUT="$o" timeout 450 bash $b/run.sh test > "$o/run-test.txt" 2>&1
echo "run.sh rc $? at ${SECONDS}s"; tail -1 "$o/run-test.txt"
grep -E "FAILED|panicked" "$o/gpu-tests.log" | head -10
mkdir -p "$o/ops"
OUT="$o/ops" timeout $((570 - SECONDS)) bash $b/run.sh bench ops > "$o/ops/bench-ops.txt" 2>&1
echo "bench rc $? at ${SECONDS}s"; sed -n '/^device:/,$p' "$o/ops/peer-ops.log"
t=$b/tests/gpukit_ops__ops
timeout $((590 - SECONDS)) compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 \
  $t sdpa_at_device_position --include-ignored --test-threads=1 > "$o/memcheck.txt" 2>&1
echo "memcheck rc $? at ${SECONDS}s: $(grep -E 'ERROR SUMMARY' "$o/memcheck.txt" | tail -1) $(grep -E '^test result' "$o/memcheck.txt")"
