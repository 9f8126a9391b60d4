#!/usr/bin/env bash
# Session 29, call 6: greedy sampling, c21f493's sampler ("main", target/ab/ops-main.gz) against
# the final batched_scan one ("new"), two alternated rounds (session 28's ab-greedy.sh); then
# the sampling and reduction tests, the determinism tests and memcheck on the first two.
set -u
b=target/gpu-bundle
o="$OUT/call6"; mkdir -p "$o"
for gz in $b/tests/*.gz $b/benches/*.gz; do gunzip -f "$gz"; done
chmod +x $b/tests/* $b/benches/*
nvidia-smi --query-gpu=name --format=csv,noheader
. docs/bench/2026-11-25-s28/ab-greedy.sh; ab_greedy "$o"
t=$b/tests/gpukit_ops__ops
$t sampling reductions --include-ignored --test-threads=1 > "$o/tests.txt" 2>&1
echo "tests rc $?: $(grep -E '^test result' "$o/tests.txt")"
$b/tests/gpukit_ops__determinism --include-ignored --test-threads=1 > "$o/determinism.txt" 2>&1
echo "determinism rc $?: $(grep -E '^test result' "$o/determinism.txt")"
timeout $((585 - SECONDS)) compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 \
  $t sampling reductions --include-ignored --test-threads=1 > "$o/memcheck.txt" 2>&1
echo "memcheck rc $?: $(grep -E 'ERROR SUMMARY' "$o/memcheck.txt" | tail -1) $(grep -E '^test result' "$o/memcheck.txt")"
