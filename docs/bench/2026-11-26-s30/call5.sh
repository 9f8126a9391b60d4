#!/bin/bash
# Session 30, call 5: how fast one block reads data sitting in L2 (l2read.cu).
set -u
D=docs/bench/2026-11-26-s30
/usr/local/cuda/bin/nvcc -O3 -std=c++17 -arch=sm_90a -w $D/l2read.cu -o /tmp/l2read && /tmp/l2read 2>&1 | tee $OUT/l2read.txt
