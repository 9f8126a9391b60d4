#!/usr/bin/env bash
# Session 42, call 7 (H100): session 19's floor under one launch (floor.cu: the fastest kernel
# that only reads the bytes, in the ops bench's harness) on the H100, twice. Session 19 measured
# it on the H200 only; 1.5× torch at (896, 4864) on the H100 needs 3.85 µs.
set -u
o=$OUT
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
/usr/local/cuda/bin/nvcc -O3 -std=c++17 -arch=sm_90a docs/bench/2026-11-24-h200-s19/floor.cu \
  -o /tmp/floor > $o/nvcc.txt 2>&1 || { echo "nvcc failed"; tail -20 $o/nvcc.txt; }
for r in 1 2; do timeout 250 /tmp/floor > $o/floor-$r.txt 2>&1; echo "floor $r rc $? at ${SECONDS}s"; done
cut -c1-230 $o/floor-1.txt
grep -v "mode\|empty\|copy\|device" $o/floor-2.txt | cut -c1-230
