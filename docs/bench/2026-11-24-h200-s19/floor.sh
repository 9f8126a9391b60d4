#!/bin/bash
# Session 19: the floor under a single-launch read of the goals' sizes (floor.cu), beside our
# GEMV and decode attention and torch in the same run (ops bench + bench/peer_ops.py).
set -u
D=docs/bench/2026-11-24-h200-s19
B=target/gpu-bundle
export GPUKIT_CACHE_DIR=/tmp/gpukit-cache
for gz in $B/benches/*.gz; do [ -f "$gz" ] && gunzip -f "$gz" && chmod +x "${gz%.gz}"; done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
/usr/local/cuda/bin/nvcc -O3 -std=c++17 -arch=sm_90a $D/floor.cu -o /tmp/floor > $OUT/nvcc.txt 2>&1 \
  || { echo "nvcc failed"; tail -30 $OUT/nvcc.txt; }
[ -x /tmp/floor ] && /tmp/floor > $OUT/floor.txt 2>&1; echo "floor rc $?"
for f in "gemv bf16 M=1" "sdpa decode"; do
  d=$OUT/$(echo "$f" | tr ' =' '__')
  mkdir -p "$d"
  GPUKIT_BENCH_OUT="$d" GPUKIT_BENCH_FILTER="$f" $B/benches/gpukit-ops__ops --bench > "$d/log" 2>&1
  python3 bench/peer_ops.py "$d" > "$d/table.txt" 2>&1
done
/tmp/floor > $OUT/floor-2.txt 2>&1; echo "floor round 2 rc $?"
cat $OUT/floor.txt | cut -c1-250
for d in $OUT/*/table.txt; do tail -9 "$d"; done
