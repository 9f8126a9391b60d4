#!/usr/bin/env bash
# Session 34, call 13 (bundle of the registry tidy, which builds the PDL list from the sampling
# module): the sampling and decode-state ops tests, the determinism tests.
set -u
. docs/bench/device-calls.sh
o="$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
unpack_bundle
run_test sampling $b/tests/gpukit_ops__ops sampl
run_test decode_state $b/tests/gpukit_ops__ops decode_state
run_test determinism $b/tests/gpukit_ops__determinism
