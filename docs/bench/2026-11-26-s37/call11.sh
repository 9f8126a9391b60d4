#!/usr/bin/env bash
# Session 37, call 11 (H200): gemv_variants.py's wearly (the first ring of weight stages copied
# into shared memory before the PDL wait: legal only for weights nothing writes while the GEMV
# may run) against main (a3aaa9c's kernels) at the small-ring and the large-ring shapes, three
# alternated rounds, outputs checked. Session 33 measured the same copies with one kernel for
# every R and the next launch let in at the kernel's entry.
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
build main main & build wearly wearly &
wait
run() {  # run BINARY CONFIG…: one probe process per config, npre in the label
  local bin=$1; shift
  for c in "$@"; do timeout 60 /tmp/probe_$bin $bin/p${c##*,} $c; done
}
SHAPES="896,4864,4,2,8,8 896,4864,4,2,12,12 2048,2048,4,4,4,4 3072,1024,2,2,4,4 2048,1024,4,4,2,2
  4864,896,2,4,4,4 2048,8192,8,2,4,2 8192,2048,2,4,4,2 4096,14336,4,4,4,2 14336,4096,1,4,4,2"
for r in 1 2 3; do
  run main $SHAPES
  run wearly $SHAPES
done 2>&1 | tee $OUT/gemv.txt | python3 $D/summarize.py
