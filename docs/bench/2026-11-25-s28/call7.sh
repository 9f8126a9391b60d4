#!/usr/bin/env bash
# Session 28, call 7 (H100): the linear prefill shapes and greedy sampling on the final build
# beside torch, two rounds (is call 1's 0.96× at 512×8192→2048 repeatable?).
set -u
b=target/gpu-bundle
o="$OUT/call7"; mkdir -p "$o"
gunzip -f $b/benches/gpukit-ops__ops.gz; chmod +x $b/benches/gpukit-ops__ops
for r in 1 2; do
  for f in linear "sampling greedy"; do
    d="$o/r$r-${f// /-}"; mkdir -p "$d"
    GPUKIT_BENCH_OUT="$d" GPUKIT_BENCH_FILTER="$f" $b/benches/gpukit-ops__ops --bench > "$d/log.txt" 2>&1
    python3 bench/peer_ops.py "$d" > "$d/peer.txt" 2>&1
    grep -E "^(linear|sampling|device)" "$d/peer.txt"
  done
done
