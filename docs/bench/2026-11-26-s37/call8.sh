#!/usr/bin/env bash
# Session 37, call 8 (H200): every GPU test on the bundle of a3aaa9c (run.sh test), then
# memcheck on the GEMV test (the small-matrix ring at (1032, 2051) and the per-R ring entry
# points) until the deadline.
set -u
. docs/bench/device-calls.sh
o="$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
all_tests "$OUT/test" 500
unpack_bundle
sanitize memcheck 575 $b/tests/gpukit_ops__ops matmul_and_linear::cuda
