#!/usr/bin/env bash
# Session 45, call 8: the final bundle — every op test (now with the GEMM plan-cache check), the
# determinism tests (the transformer one again on the portable attention kernels), and the
# driver, memory and scheduler GPU tests.
# (Refactored after it ran onto device-calls.sh's call_start: the same steps.)
set -u
. docs/bench/device-calls.sh
call_start
run_test ops $b/tests/gpukit_ops__ops
run_test determinism $b/tests/gpukit_ops__determinism
GPUKIT_SDPA_PORTABLE=1 run_test determinism-portable $b/tests/gpukit_ops__determinism transformer
run_test driver $b/tests/gpukit_driver__driver
run_test gpu_mem $b/tests/gpukit_mem__gpu_mem
run_test gpu_sched $b/tests/gpukit_sched__gpu_sched
pack_out call8
