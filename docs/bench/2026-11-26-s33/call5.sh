#!/usr/bin/env bash
# Session 33, call 5 (and later ones on newer bundles): the multi-block sampler — the sampling
# test (every draw against the CPU reference at vocabularies 5 … 128_257), the determinism tests
# (sampling under graph replay), memcheck and racecheck on the sampling test, and the sampling
# rows of the ops bench beside torch.
set -u
. docs/bench/device-calls.sh
o="$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
unpack_bundle
run_test sampling $b/tests/gpukit_ops__ops sampl
run_test determinism $b/tests/gpukit_ops__determinism
sanitize memcheck 250 $b/tests/gpukit_ops__ops sampl
sanitize racecheck 330 $b/tests/gpukit_ops__ops sampl
bench_ops "$OUT/ops" "sampling" 150
