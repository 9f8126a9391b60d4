#!/usr/bin/env bash
# Session 39, call 10: the final bundle (the small ring's rule: all of a block's stages where a
# multiple of the groups would leave one slot a group) — memcheck and racecheck on the GEMV test,
# then every GPU test (run.sh test) until the call's limit.
set -u
. docs/bench/device-calls.sh
o="$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
unpack_bundle
sanitize memcheck 60 $b/tests/gpukit_ops__ops matmul_and_linear::cuda
sanitize racecheck 110 $b/tests/gpukit_ops__ops matmul_and_linear::cuda
all_tests "$OUT/test" $((590 - SECONDS))
