#!/usr/bin/env bash
# Session 34, call 5: the decode ring (main) at other unit counts and ring depths, in the probe
# (PROBE_UNITS, PROBE_STAGES), two alternated rounds.
set -u
D=docs/bench/2026-11-26-s34
S19=docs/bench/2026-11-24-h200-s19
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
mkdir -p /tmp/dm && cp gpukit-kernels/cuda/attention.cu gpukit-kernels/cuda/common.cuh /tmp/dm/
/usr/local/cuda/bin/nvcc -O3 -std=c++17 -arch=sm_90a -w -I /tmp/dm -I $S19 -DATTN_SRC='"/tmp/dm/attention.cu"' \
  $D/decode_probe.cu -o /tmp/dprobe -lcuda || exit 1
for r in 1 2; do
  for cfg in "132 4" "132 5" "96 4" "96 5" "64 4" "64 5"; do
    set -- $cfg
    PROBE_UNITS=$1 PROBE_STAGES=$2 /tmp/dprobe "u$1-s$2"
  done
done 2>&1 | tee $OUT/sweep.txt
