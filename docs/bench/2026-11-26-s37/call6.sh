#!/usr/bin/env bash
# Session 37, call 6 (H200): the small-matrix ring (main since a3aaa9c) at (896, 4864) with more
# stages asked of L2 than the ring holds (npre 10–16 against the rule's 8) and one warp per
# group, and gemv_variants.py's trig (the consumers let the next launch start at the kernel's
# entry) at the small and the 32 MiB shapes; three alternated rounds, outputs checked.
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
SMALL="896,4864,4,2,8,8 2048,2048,4,4,4,4 3072,1024,2,2,4,4 2048,1024,4,4,2,2"
BIG="2048,8192,8,2,4,2 8192,2048,2,4,4,2"
for r in 1 2 3; do
  run main 896,4864,0,1,0,0 $SMALL 896,4864,4,2,8,10 896,4864,4,2,8,12 896,4864,4,2,8,16 \
    896,4864,4,1,8,10 $BIG
  run trig $SMALL 896,4864,4,2,8,12 $BIG
done 2>&1 | tee $OUT/gemv.txt | python3 $D/summarize.py
