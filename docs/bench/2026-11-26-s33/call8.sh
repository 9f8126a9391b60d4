#!/usr/bin/env bash
# Session 33, calls 8 and 9 (bundles of the shared-memory radix select, then its two-scan bin search): the sampling test, the
# determinism tests, memcheck on the sampling test, the sampling rows of the ops bench.
set -u
. docs/bench/device-calls.sh
o="$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
unpack_bundle
run_test sampling $b/tests/gpukit_ops__ops sampl
run_test determinism $b/tests/gpukit_ops__determinism
sanitize memcheck 60 $b/tests/gpukit_ops__ops sampl
bench_ops "$OUT/ops" "sampling" 100
