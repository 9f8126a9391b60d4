#!/usr/bin/env bash
# Session 29, call 13 (the final bundle: quant.cu's Q4 nibbles made floats without I2FP; the
# quantized GEMV test on a second shape; qgemv in the determinism test): the quantized GEMV
# against main's bench binary (target/ab/ops-main.gz), two alternated rounds; then every GPU test.
set -u
. docs/bench/device-calls.sh
o="$OUT/call13"; mkdir -p "$o"
unpack_bundle
. docs/bench/2026-11-25-s28/ab-greedy.sh; ab_bench qgemv "$o"
all_tests "$o" 600
grep -E "quantized gemv|qgemv" "$o/gpu-tests.log" | head -4
