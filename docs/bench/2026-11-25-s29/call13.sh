#!/usr/bin/env bash
# Session 29, call 13 (the final bundle: quant.cu's Q4 nibbles made floats without I2FP; the
# quantized GEMV test on a second shape; qgemv in the determinism test): the quantized GEMV
# against main's bench binary (target/ab/ops-main.gz), two alternated rounds; then every GPU test.
set -u
b=target/gpu-bundle
o="$OUT/call13"; mkdir -p "$o"
for gz in $b/tests/*.gz $b/benches/*.gz; do gunzip -f "$gz"; done
chmod +x $b/tests/* $b/benches/*
. docs/bench/2026-11-25-s28/ab-greedy.sh; ab_bench qgemv "$o"
OUT="$o" bash $b/run.sh test > "$o/run-test.txt" 2>&1
echo "run.sh rc $?"; tail -1 "$o/run-test.txt"
grep -E "FAILED|panicked" "$o/gpu-tests.log" | head -10
grep -E "quantized gemv|qgemv" "$o/gpu-tests.log" | head -4
