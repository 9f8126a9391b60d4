#!/usr/bin/env bash
# Session 33, call 12 (the final bundle, on the H100): the sampling test and the sampling rows
# of the ops bench beside torch.
set -u
. docs/bench/device-calls.sh
o="$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
unpack_bundle
run_test sampling $b/tests/gpukit_ops__ops sampl
bench_ops "$OUT/ops" "sampling" 100
