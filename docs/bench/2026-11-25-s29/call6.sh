#!/usr/bin/env bash
# Session 29, call 6: greedy sampling, c21f493's sampler ("main", target/ab/ops-main.gz) against
# the final batched_scan one ("new"), two alternated rounds (session 28's ab-greedy.sh); then
# the sampling and reduction tests, the determinism tests and memcheck on the first two.
set -u
. docs/bench/device-calls.sh
o="$OUT/call6"; mkdir -p "$o"
unpack_bundle
nvidia-smi --query-gpu=name --format=csv,noheader
. docs/bench/2026-11-25-s28/ab-greedy.sh; ab_greedy "$o"
run_test tests $b/tests/gpukit_ops__ops sampling reductions
run_test determinism $b/tests/gpukit_ops__determinism
sanitize memcheck 585 $b/tests/gpukit_ops__ops sampling reductions
