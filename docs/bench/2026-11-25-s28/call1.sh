#!/usr/bin/env bash
# Session 28, call 1: the full ops bench beside torch on main's bundle, then compute-sanitizer
# racecheck on the attention test in the time left (memcheck ran on this kernel in session 27).
set -u
b=target/gpu-bundle
o="$OUT/call1"; mkdir -p "$o"
OUT="$o" timeout 330 bash $b/run.sh bench ops > "$o/bench-ops.txt" 2>&1
echo "bench rc $?"; grep -E "^(op|gemm|linear|gemv|rms|add|sdpa|qgemv|sampl|device)" "$o/bench-ops.txt" | head -60
t=$b/tests/gpukit_ops__ops
for tool in racecheck; do
  timeout $((585 - SECONDS)) compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 \
    $t sdpa_attention --include-ignored --test-threads=1 > "$o/sanitize-$tool-sdpa.txt" 2>&1
  echo "$tool rc $?: $(grep -E '(ERROR|RACECHECK) SUMMARY' "$o/sanitize-$tool-sdpa.txt" | tail -1) $(grep -E '^test result' "$o/sanitize-$tool-sdpa.txt" | tail -1)"
done
