#!/bin/bash
# Session 30, call 18: the split merge with whole groups of 16 splits on a path without bounds
# (working tree) against cae72e8 (target/ab/base), alternated in the probe, outputs compared.
set -u
D=docs/bench/2026-11-26-s30
S19=docs/bench/2026-11-24-h200-s19
NVCC=/usr/local/cuda/bin/nvcc
mkdir -p /tmp/v/base /tmp/v/new
cp target/ab/base/attention.cu target/ab/base/common.cuh /tmp/v/base/
cp gpukit-kernels/cuda/attention.cu gpukit-kernels/cuda/common.cuh /tmp/v/new/
build() {
  $NVCC -O3 -std=c++17 -arch=sm_90a -w -I /tmp/v/$1 -I $S19 -DATTN_SRC="\"/tmp/v/$1/attention.cu\"" \
    $D/decode_probe.cu -o /tmp/probe_$1 -lcuda > $OUT/nvcc-$1.txt 2>&1 || { echo "nvcc $1 failed"; tail -30 $OUT/nvcc-$1.txt; }
}
build base & build new & wait
for r in 1 2 3; do
  OUTFILE=/tmp/out-base.bin /tmp/probe_base base
  OUTFILE=/tmp/out-new.bin /tmp/probe_new new
done 2>&1 | tee $OUT/ab.txt
cmp /tmp/out-base.bin /tmp/out-new.bin && echo "outputs: bitwise equal" || echo "outputs: DIFFER"
