#!/bin/bash
# Session 30, call 13: bece7e7's decode ring traced, with the last split's merge broken down
# (when each group of staged partials is at hand, when the sums are done).
set -u
D=docs/bench/2026-11-26-s30
S19=docs/bench/2026-11-24-h200-s19
mkdir -p /tmp/v/trace
cp gpukit-kernels/cuda/common.cuh /tmp/v/trace/
python3 $D/trace_patch.py gpukit-kernels/cuda/attention.cu /tmp/v/trace/attention.cu
/usr/local/cuda/bin/nvcc -O3 -std=c++17 -arch=sm_90a -w -DDECODE_TRACE -I /tmp/v/trace -I $S19 \
  -DATTN_SRC="\"/tmp/v/trace/attention.cu\"" $D/decode_probe.cu -o /tmp/probe_trace -lcuda || exit 1
/tmp/probe_trace trace 2>&1 | tee $OUT/probe-trace.txt
