#!/bin/bash
# Session 22 experiment: linear_const_into's GEMV with a grid of 1/DIV of the resident blocks
# (GPUKIT_GEMV_CONST_DIV, a temporary knob), so the next kernel's blocks fit beside it and its
# early loads overlap this one; (896, 4864) in alternated rounds.
set -u
export GPUKIT_CACHE_DIR=/tmp/gpukit-cache
B=target/gpu-bundle
for gz in $B/benches/*.gz; do [ -f "$gz" ] && gunzip -f "$gz" && chmod +x "${gz%.gz}"; done
W=/tmp/work; mkdir -p $W
for round in 1 2 3; do
  for d in 1 2 4; do
    GPUKIT_GEMV_CONST_DIV=$d GPUKIT_BENCH_OUT=$W/d$d GPUKIT_BENCH_FILTER="k=896 n=4864" timeout 60 $B/benches/gpukit-ops__ops --bench > $W/log 2>&1
    echo "== div $d round $round"; grep "gemv bf16" $W/log
  done
done | tee $OUT/ab.txt
