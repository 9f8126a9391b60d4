#!/usr/bin/env bash
# Session 37, call 7 (H200): (896, 4864) on rings of 1-row stages (1.75 KiB; 58 registers and 60
# KiB, so three blocks fit on a multiprocessor), with the next launch let start after x lands
# (main) or at entry (trig: with three slots a multiprocessor, two launches can start early);
# against the small-matrix rule's 4-row ring; three alternated rounds, outputs checked.
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
build main main & build trig trig &
wait
run() {  # run BINARY CONFIG…: one probe process per config, npre in the label
  local bin=$1; shift
  for c in "$@"; do timeout 60 /tmp/probe_$bin $bin/p${c##*,} $c; done
}
for r in 1 2 3; do
  run main 896,4864,4,2,8,8 896,4864,1,1,32,32 896,4864,1,2,32,32 896,4864,1,1,24,24
  run trig 896,4864,1,1,32,32 896,4864,1,2,32,32
done 2>&1 | tee $OUT/gemv.txt | python3 $D/summarize.py
