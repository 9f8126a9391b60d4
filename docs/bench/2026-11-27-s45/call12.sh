#!/usr/bin/env bash
# Session 45, call 12: the determinism tests after their Q4_0 matrix grew from 600 to 1000 rows
# of 2048 (1.15 MB: on Hopper the tensor-core ring, for one row of x and for three; at 0.69 MB
# it had taken the one-warp kernels), and the transformer one on the portable attention kernels.
# (Refactored after it ran onto device-calls.sh's call_start: the same steps.)
set -u
. docs/bench/device-calls.sh
call_start
run_test determinism $b/tests/gpukit_ops__determinism
GPUKIT_SDPA_PORTABLE=1 run_test determinism-portable $b/tests/gpukit_ops__determinism transformer
pack_out call12
