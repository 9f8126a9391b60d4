#!/usr/bin/env bash
# Session 38, call 8: every GPU test on the bundle of 13bf2f4 (run.sh test: unpack_f32 in the
# GEMV kernels, the large ring's balanced grid), then racecheck on the GEMV test until the
# deadline.
set -u
. docs/bench/device-calls.sh
o="$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
all_tests "$OUT/test" 480
unpack_bundle
sanitize racecheck 580 $b/tests/gpukit_ops__ops matmul_and_linear::cuda
