#!/bin/bash
# Session 30, call 1: the decode ring in a standalone probe (timing as the ops bench), then a
# trace of where one launch's time goes (trace_patch.py).
set -u
D=docs/bench/2026-11-26-s30
S19=docs/bench/2026-11-24-h200-s19
NVCC=/usr/local/cuda/bin/nvcc
mkdir -p /tmp/v/main /tmp/v/trace
cp gpukit-kernels/cuda/attention.cu gpukit-kernels/cuda/common.cuh /tmp/v/main/
cp gpukit-kernels/cuda/common.cuh /tmp/v/trace/
python3 $D/trace_patch.py gpukit-kernels/cuda/attention.cu /tmp/v/trace/attention.cu
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem --format=csv
build() {  # name extra-flags
  $NVCC -O3 -std=c++17 -arch=sm_90a -w $2 -I /tmp/v/$1 -I $S19 -DATTN_SRC="\"/tmp/v/$1/attention.cu\"" \
    $D/decode_probe.cu -o /tmp/probe_$1 -lcuda > $OUT/nvcc-$1.txt 2>&1 || { echo "nvcc $1 failed"; tail -30 $OUT/nvcc-$1.txt; }
}
build main "" &
build trace -DDECODE_TRACE &
wait
for r in 1 2; do /tmp/probe_main main; done 2>&1 | tee $OUT/probe-main.txt
/tmp/probe_trace trace 2>&1 | tee $OUT/probe-trace.txt
