#!/usr/bin/env bash
# Session 29, call 8: every GPU test on the final bundle (kernels and tests of 187f227).
set -u
. docs/bench/device-calls.sh
o="$OUT"
all_tests "$OUT"
grep -E "chi-square" $OUT/gpu-tests.log | head -4
