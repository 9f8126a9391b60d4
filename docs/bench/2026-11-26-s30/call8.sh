#!/usr/bin/env bash
# Session 30, call 8 (bundle of bece7e7): every GPU test (run.sh test), then compute-sanitizer
# memcheck and racecheck on the decode-state test (ring cases, NaN past the position).
set -u
. docs/bench/device-calls.sh
o="$OUT/call8"; mkdir -p "$o"
all_tests "$o" 470
sanitize memcheck 560 $b/tests/gpukit_ops__ops sdpa_at_device_position
sanitize racecheck 590 $b/tests/gpukit_ops__ops sdpa_at_device_position
