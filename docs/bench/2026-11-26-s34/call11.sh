#!/usr/bin/env bash
# Session 34, call 11 (the final bundle, after the review mends): run.sh test, every GPU test, then
# memcheck on the new refusal test.
set -u
. docs/bench/device-calls.sh
o="$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
all_tests "$OUT/test" 480
unpack_bundle
sanitize memcheck 560 $b/tests/gpukit_ops__ops refuses
