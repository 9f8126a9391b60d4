#!/usr/bin/env bash
# Session 44, call 4 (H200): HEAD's bundle (9e08fe7) — the ops and determinism tests (the ops
# test's f32 (512, 2101) case, added at the end of session 43, had not run on a GPU), memcheck
# and racecheck on the GEMV test, then every GPU test (run.sh test) until the call's limit.
# (Refactored after it ran onto device-calls.sh's pack_out: the same steps.)
set -u
. docs/bench/device-calls.sh
o="$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
unpack_bundle
run_test ops $b/tests/gpukit_ops__ops
run_test determinism $b/tests/gpukit_ops__determinism
sanitize memcheck $((SECONDS + 100)) $b/tests/gpukit_ops__ops matmul_and_linear::cuda
sanitize racecheck $((SECONDS + 130)) $b/tests/gpukit_ops__ops matmul_and_linear::cuda
all_tests "$OUT/test" $((580 - SECONDS))
pack_out call4
