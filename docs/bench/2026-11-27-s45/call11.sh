#!/usr/bin/env bash
# Session 45, call 11 (H100): the final bundle — every op test (the quantized-GEMV ring for
# several rows of x had run only on the H200) and the determinism tests.
set -u
. docs/bench/device-calls.sh
o="$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
unpack_bundle
run_test ops $b/tests/gpukit_ops__ops
run_test determinism $b/tests/gpukit_ops__determinism
pack_out call11
