#!/usr/bin/env bash
# Session 30, calls 19 (H200) and 20 (H100), bundle of cc999d7: the decode cases of the ops bench
# beside torch; on the H200 also the attention tests (ring), the determinism tests and memcheck
# on the decode-state test.
set -u
b=target/gpu-bundle
o="$OUT/ops"; mkdir -p "$o"
GPUKIT_BENCH_FILTER="sdpa decode" OUT="$o" timeout 200 bash $b/run.sh bench ops > "$o/bench-ops.txt" 2>&1
echo "bench rc $?"; sed -n '/^device:/,$p' "$o/peer-ops.log"
[ "${1:-}" = tests ] || exit 0
t=$b/tests/gpukit_ops__ops
$t sdpa --include-ignored --test-threads=1 > "$OUT/tests.txt" 2>&1
echo "sdpa tests rc $?: $(grep -E '^test result' "$OUT/tests.txt")"; grep -E "FAILED|panicked" "$OUT/tests.txt" | head
$b/tests/gpukit_ops__determinism --include-ignored --test-threads=1 > "$OUT/determinism.txt" 2>&1
echo "determinism rc $?: $(grep -E '^test result' "$OUT/determinism.txt")"
timeout $((560 - SECONDS)) compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 \
  $t sdpa_at_device_position --include-ignored --test-threads=1 > "$OUT/memcheck.txt" 2>&1
echo "memcheck rc $? at ${SECONDS}s: $(grep -E 'ERROR SUMMARY' "$OUT/memcheck.txt" | tail -1) $(grep -E '^test result' "$OUT/memcheck.txt")"
