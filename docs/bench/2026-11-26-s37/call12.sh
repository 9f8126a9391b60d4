#!/usr/bin/env bash
# Session 37, call 12 (H200): (896, 4864) on 8-row stages (14 KiB) with two blocks an SM:
# gemv_variants.py's r8co2 (the 8-row entry point compiled for two blocks: 96 registers, spills)
# and r8half (the same summing each stage as two passes of four rows: 84 registers), against
# main's 4-row small ring and its 8-row entry point at one block an SM; three alternated rounds,
# outputs checked.
set -u
D=docs/bench/2026-11-26-s37
NVCC=/usr/local/cuda/bin/nvcc
K=gpukit-kernels/cuda
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
mkdir -p /tmp/gv
python3 $D/gemv_variants.py $K/gemv.cu /tmp/gv > /dev/null
build() {  # build NAME SOURCE FLAGS…
  local name=$1 src=$2; shift 2
  $NVCC -O3 -std=c++17 -arch=sm_90a -w -Xptxas=-v -I $K -DGEMV_SRC="\"/tmp/gv/gemv_$src.cu\"" "$@" \
    docs/bench/2026-11-25-h200-s23/probe.cu -o /tmp/probe_$name > $OUT/nvcc-$name.txt 2>&1 \
    || { echo "nvcc $name failed"; tail -20 $OUT/nvcc-$name.txt; }
}
build main main & build r8co2 r8co2 & build r8half r8half &
wait
run() {  # run BINARY CONFIG…: one probe process per config, npre in the label
  local bin=$1; shift
  for c in "$@"; do timeout 60 /tmp/probe_$bin $bin/p${c##*,} $c; done
}
R8="896,4864,8,2,4,4 896,4864,8,2,4,8 896,4864,8,4,4,4 896,4864,8,4,6,6"
for r in 1 2 3; do
  run main 896,4864,4,2,8,8 896,4864,8,2,8,4
  run r8co2 $R8
  run r8half $R8
done 2>&1 | tee $OUT/gemv.txt | python3 $D/summarize.py
