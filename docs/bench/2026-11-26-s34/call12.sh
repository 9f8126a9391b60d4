#!/usr/bin/env bash
# Session 34, call 12 (the final bundle, on the H100): the ops and determinism tests, then the
# ring kernels' rows of the ops bench beside torch.
set -u
. docs/bench/device-calls.sh
o="$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
unpack_bundle
run_test ops $b/tests/gpukit_ops__ops
run_test determinism $b/tests/gpukit_ops__determinism
bench_ops "$OUT/ops-gemv" "gemv" 90
bench_ops "$OUT/ops-decode" "sdpa decode" 90
