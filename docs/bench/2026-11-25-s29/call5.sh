#!/usr/bin/env bash
# Session 29, call 5 (commit ace15f3's kernels): the full ops bench beside torch; the sampling,
# reduction, attention and determinism tests; compute-sanitizer memcheck on the sampling,
# reduction and decode-state tests, then racecheck on the decode-state test in the time left.
set -u
. docs/bench/device-calls.sh
o="$OUT/call5"; mkdir -p "$o"
bench_ops "$o"
run_test tests $b/tests/gpukit_ops__ops sampling reductions sdpa; grep -E "chi-square" "$o/tests.txt"
run_test determinism $b/tests/gpukit_ops__determinism
sanitize memcheck 560 $b/tests/gpukit_ops__ops sampling reductions sdpa_at_device_position
sanitize racecheck 585 $b/tests/gpukit_ops__ops sdpa_at_device_position
