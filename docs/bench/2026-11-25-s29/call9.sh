#!/usr/bin/env bash
# Session 29, call 9: the quantized GEMV without integer-to-float conversions (magic-number
# floats, bitwise the same sums) against main's bench binary (target/ab/ops-main.gz, built
# with c21f493's quant.cu), two alternated rounds; then the quantized tests, the GGUF model
# test, the determinism tests, and memcheck on the quantized tests.
set -u
. docs/bench/device-calls.sh
o="$OUT/${CALL:-call9}"; mkdir -p "$o"
unpack_bundle
nvidia-smi --query-gpu=name --format=csv,noheader
. docs/bench/2026-11-25-s28/ab-greedy.sh; ab_bench qgemv "$o"
run_test tests $b/tests/gpukit_ops__ops quantized k_quants
run_test gguf $b/tests/gpukit_llm__gguf_model
run_test determinism $b/tests/gpukit_ops__determinism
sanitize memcheck 585 $b/tests/gpukit_ops__ops quantized k_quants
