#!/usr/bin/env bash
# Session 45, call 6 (H100): the bundle of 118c6d8 — the ops and determinism tests (this
# session's new cases had run only on the H200), the transformer determinism test on the
# portable attention kernels, and memcheck on the quantized-GEMV tests.
# (Refactored after it ran onto device-calls.sh's call_start: the same steps.)
set -u
. docs/bench/device-calls.sh
call_start
run_test ops $b/tests/gpukit_ops__ops
run_test determinism $b/tests/gpukit_ops__determinism
GPUKIT_SDPA_PORTABLE=1 run_test determinism-portable $b/tests/gpukit_ops__determinism transformer
sanitize memcheck $((SECONDS + 120)) $b/tests/gpukit_ops__ops quant
pack_out call6
