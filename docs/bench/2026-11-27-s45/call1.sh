#!/usr/bin/env bash
# Session 45, call 1: the bundle of the new tests (issue 4 and 5 coverage: elementwise past one
# grid pass, `_into` forms poisoned, whole-tensor reductions, TF32, epilogues, device and dtype
# errors, f16 and more kernels under the determinism test, ALiBi at 6 and 12 heads, f16
# sampling, min-p and the repetition penalty under graph replay, the simple formats against
# gguf-py): the ops and determinism tests, both again with the portable attention kernels,
# then memcheck on the new elementwise and reduction cases.
# (Refactored after it ran onto device-calls.sh's call_start: the same steps.)
set -u
. docs/bench/device-calls.sh
call_start
run_test ops $b/tests/gpukit_ops__ops
run_test determinism $b/tests/gpukit_ops__determinism
GPUKIT_SDPA_PORTABLE=1 run_test ops-portable $b/tests/gpukit_ops__ops sdpa
GPUKIT_SDPA_PORTABLE=1 run_test determinism-portable $b/tests/gpukit_ops__determinism transformer
sanitize memcheck $((SECONDS + 150)) $b/tests/gpukit_ops__ops elementwise_large::cuda
pack_out call1
