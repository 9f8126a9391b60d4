#!/usr/bin/env bash
# Session 34, call 6 (bundle of the ring_next commit, with the CPU sampler's new thresholds):
# run.sh test, every GPU test.
set -u
. docs/bench/device-calls.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
all_tests "$OUT/test" 560
