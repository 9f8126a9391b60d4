#!/usr/bin/env bash
# Session 33, call 7 (the bundle of call 6): memcheck and racecheck on the sampling test (greedy
# and every filter at vocabularies 5 … 128_257), the determinism tests.
set -u
. docs/bench/device-calls.sh
o="$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
unpack_bundle
run_test determinism $b/tests/gpukit_ops__determinism
sanitize memcheck 60 $b/tests/gpukit_ops__ops sampl
sanitize racecheck 300 $b/tests/gpukit_ops__ops sampl
