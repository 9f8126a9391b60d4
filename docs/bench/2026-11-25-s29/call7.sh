#!/usr/bin/env bash
# Session 29, call 7 (H100; the final kernels, commit 187f227): the full ops bench
# beside torch, then the sampling, reduction and attention tests and the determinism tests.
set -u
b=target/gpu-bundle
o="$OUT/call7"; mkdir -p "$o"
OUT="$o" timeout 300 bash $b/run.sh bench ops > "$o/bench-ops.txt" 2>&1
echo "bench rc $?"; sed -n '/^device:/,$p' "$o/peer-ops.log"
t=$b/tests/gpukit_ops__ops
$t sampling reductions sdpa --include-ignored --test-threads=1 > "$o/tests.txt" 2>&1
echo "tests rc $?: $(grep -E '^test result' "$o/tests.txt")"
$b/tests/gpukit_ops__determinism --include-ignored --test-threads=1 > "$o/determinism.txt" 2>&1
echo "determinism rc $?: $(grep -E '^test result' "$o/determinism.txt")"
