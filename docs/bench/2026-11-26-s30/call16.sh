#!/usr/bin/env bash
# Session 30, call 16 (bundle of cae72e8): every GPU test (run.sh test), then the full ops bench
# beside torch, then memcheck and racecheck on the decode-state test in the time left.
set -u
. docs/bench/device-calls.sh
o="$OUT/call16"; mkdir -p "$o"
all_tests "$o" 450
bench_ops "$o/ops" "" $((570 - SECONDS))
sanitize memcheck 590 $b/tests/gpukit_ops__ops sdpa_at_device_position
