#!/usr/bin/env bash
# Session 30, call 4 (commit 7c2aefc's bundle): the decode cases of the ops bench beside torch;
# the attention tests (ring and portable kernels) and the determinism tests; compute-sanitizer
# memcheck and racecheck on the decode-state test (ring cases, NaN past the position).
set -u
. docs/bench/device-calls.sh
o="$OUT/call4"; mkdir -p "$o"
bench_ops "$o" "sdpa decode" 200
run_test tests $b/tests/gpukit_ops__ops sdpa
GPUKIT_SDPA_PORTABLE=1 run_test tests-portable $b/tests/gpukit_ops__ops sdpa
run_test determinism $b/tests/gpukit_ops__determinism
sanitize memcheck 500 $b/tests/gpukit_ops__ops sdpa_at_device_position
sanitize racecheck 585 $b/tests/gpukit_ops__ops sdpa_at_device_position
