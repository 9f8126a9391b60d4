#!/usr/bin/env bash
# Session 29, call 7 (H100; the final kernels, commit 187f227): the full ops bench
# beside torch, then the sampling, reduction and attention tests and the determinism tests.
set -u
. docs/bench/device-calls.sh
o="$OUT/call7"; mkdir -p "$o"
bench_ops "$o"
run_test tests $b/tests/gpukit_ops__ops sampling reductions sdpa
run_test determinism $b/tests/gpukit_ops__determinism
