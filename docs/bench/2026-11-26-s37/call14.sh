#!/usr/bin/env bash
# Session 37, call 14 (H200): after the review's mends (2799546: a small-ring case whose blocks
# have fewer stages than the ring's groups), the GEMV test and determinism, then memcheck and
# racecheck on the GEMV test.
set -u
. docs/bench/device-calls.sh
o="$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
unpack_bundle
run_test ops $b/tests/gpukit_ops__ops matmul_and_linear
run_test determinism $b/tests/gpukit_ops__determinism
sanitize memcheck 300 $b/tests/gpukit_ops__ops matmul_and_linear::cuda
sanitize racecheck 580 $b/tests/gpukit_ops__ops matmul_and_linear::cuda
