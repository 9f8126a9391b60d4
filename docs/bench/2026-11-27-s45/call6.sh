#!/usr/bin/env bash
# Session 45, call 6 (H100): the bundle of 118c6d8 — the ops and determinism tests (this
# session's new cases had run only on the H200), the transformer determinism test on the
# portable attention kernels, and memcheck on the quantized-GEMV tests.
set -u
. docs/bench/device-calls.sh
o="$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
unpack_bundle
run_test ops $b/tests/gpukit_ops__ops
run_test determinism $b/tests/gpukit_ops__determinism
GPUKIT_SDPA_PORTABLE=1 run_test determinism-portable $b/tests/gpukit_ops__determinism transformer
sanitize memcheck $((SECONDS + 120)) $b/tests/gpukit_ops__ops quant
pack_out call6
