#!/usr/bin/env bash
# Session 29, call 9: the quantized GEMV without integer-to-float conversions (magic-number
# floats, bitwise the same sums) against main's bench binary (target/ab/ops-main.gz, built
# with c21f493's quant.cu), two alternated rounds; then the quantized tests, the GGUF model
# test, the determinism tests, and memcheck on the quantized tests.
set -u
b=target/gpu-bundle
o="$OUT/call9"; mkdir -p "$o"
for gz in $b/tests/*.gz $b/benches/*.gz; do gunzip -f "$gz"; done
chmod +x $b/tests/* $b/benches/*
nvidia-smi --query-gpu=name --format=csv,noheader
. docs/bench/2026-11-25-s28/ab-greedy.sh; ab_bench qgemv "$o"
t=$b/tests/gpukit_ops__ops
$t quantized k_quants --include-ignored --test-threads=1 > "$o/tests.txt" 2>&1
echo "tests rc $?: $(grep -E '^test result' "$o/tests.txt")"
$b/tests/gpukit_llm__gguf_model --include-ignored --test-threads=1 > "$o/gguf.txt" 2>&1
echo "gguf rc $?: $(grep -E '^test result' "$o/gguf.txt")"
$b/tests/gpukit_ops__determinism --include-ignored --test-threads=1 > "$o/determinism.txt" 2>&1
echo "determinism rc $?: $(grep -E '^test result' "$o/determinism.txt")"
timeout $((585 - SECONDS)) compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 \
  $t quantized k_quants --include-ignored --test-threads=1 > "$o/memcheck.txt" 2>&1
echo "memcheck rc $?: $(grep -E 'ERROR SUMMARY' "$o/memcheck.txt" | tail -1) $(grep -E '^test result' "$o/memcheck.txt")"
