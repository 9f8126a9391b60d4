#!/usr/bin/env bash
# Session 45, call 11 (H100): the final bundle — every op test (the quantized-GEMV ring for
# several rows of x had run only on the H200) and the determinism tests.
# (Refactored after it ran onto device-calls.sh's call_start: the same steps.)
set -u
. docs/bench/device-calls.sh
call_start
run_test ops $b/tests/gpukit_ops__ops
run_test determinism $b/tests/gpukit_ops__determinism
pack_out call11
