#!/usr/bin/env bash
# Session 28, call 3: greedy sampling read as 16-byte vectors against main's ops bench binary
# (two alternated rounds); the sampling, reduction and determinism tests; memcheck on the
# sampling and reduction tests; the linear prefill shapes beside torch, two rounds.
set -u
b=target/gpu-bundle
o="$OUT/call3"; mkdir -p "$o"
for gz in $b/tests/*.gz $b/benches/*.gz; do gunzip -f "$gz"; done
chmod +x $b/tests/* $b/benches/*
. "$(dirname "$0")/ab-greedy.sh"; ab_greedy "$o"
t=$b/tests/gpukit_ops__ops
$t sampling reductions --include-ignored --test-threads=1 > "$o/tests.txt" 2>&1
echo "tests rc $?: $(grep -E '^test result' "$o/tests.txt")"
$b/tests/gpukit_ops__determinism --include-ignored --test-threads=1 > "$o/determinism.txt" 2>&1
echo "determinism rc $?: $(grep -E '^test result' "$o/determinism.txt")"
for r in 1 2; do
  mkdir -p "$o/linear-r$r"
  GPUKIT_BENCH_OUT="$o/linear-r$r" GPUKIT_BENCH_FILTER="linear" $b/benches/gpukit-ops__ops --bench > "$o/linear-r$r/log.txt" 2>&1
  python3 bench/peer_ops.py "$o/linear-r$r" > "$o/linear-r$r/peer.txt" 2>&1
  grep -E "^(linear|device)" "$o/linear-r$r/peer.txt"
done
timeout $((585 - SECONDS)) compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 \
  $t sampling reductions --include-ignored --test-threads=1 > "$o/memcheck.txt" 2>&1
echo "memcheck rc $?: $(grep -E 'ERROR SUMMARY' "$o/memcheck.txt" | tail -1) $(grep -E '^test result' "$o/memcheck.txt")"
