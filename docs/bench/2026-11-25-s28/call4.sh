#!/usr/bin/env bash
# Session 28, call 4: the full ops bench beside torch on the final bundle (greedy sampling on
# 16-byte vectors), then the norm tests (aligned16 moved to common.cuh).
set -u
b=target/gpu-bundle
o="$OUT/call4"; mkdir -p "$o"
OUT="$o" timeout 420 bash $b/run.sh bench ops > "$o/bench-ops.txt" 2>&1
echo "bench rc $?"; sed -n '/^device:/,$p' "$o/peer-ops.log"
$b/tests/gpukit_ops__ops norms --include-ignored --test-threads=1 > "$o/norm-tests.txt" 2>&1
echo "norm tests rc $?: $(grep -E '^test result' "$o/norm-tests.txt")"
