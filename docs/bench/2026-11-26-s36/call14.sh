#!/usr/bin/env bash
# Session 36, call 14 (H200): run.sh test on the bundle of the session's final kernels.
set -u
. docs/bench/device-calls.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
all_tests "$OUT/run-test" 585
