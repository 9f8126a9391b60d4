#!/usr/bin/env bash
# Session 33, call 6 (bundle of the greedy chunk sampler): run.sh test (every GPU test, HF parity
# and the HF-directory generation with top-k / top-p sampling among them), then the sampling rows
# of the ops bench beside torch.
set -u
. docs/bench/device-calls.sh
o="$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
unpack_bundle
all_tests "$OUT/test" 470
bench_ops "$OUT/ops" "sampling" 100
