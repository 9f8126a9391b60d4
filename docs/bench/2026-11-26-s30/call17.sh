#!/usr/bin/env bash
# Session 30, call 17 (H100, bundle of cae72e8): the full ops bench beside torch; the tests call 16
# had no time left for (the attention tests with GPUKIT_SDPA_PORTABLE=1, the scheduler's); racecheck
# on the decode-state test.
set -u
. docs/bench/device-calls.sh
o="$OUT/call17"; mkdir -p "$o"
bench_ops "$o/ops" "" 300
GPUKIT_SDPA_PORTABLE=1 run_test tests-portable $b/tests/gpukit_ops__ops sdpa
run_test tests-sched $b/tests/gpukit_sched__gpu_sched
sanitize racecheck 580 $b/tests/gpukit_ops__ops sdpa_at_device_position
