#!/usr/bin/env bash
# Session 37, call 2: ring GEMVs whose blocks fit twice on a multiprocessor (4-row stages: 90
# registers; a ring of ≤ ~100 KiB), so the next launch's blocks start beside the previous
# launch's and ask L2 for their stages before its end; against the ring rule's configs (main)
# and, at (896, 4864), the persistent kernel the ops bench uses there (its GEMV rows, same call).
# Labels carry npre (the stages asked of L2 before the PDL wait) and c100 where the preferred
# shared-memory carveout is 100%.
# Ran on gemv.cu and probe.cu as of 170c487; both changed later this session (see call 4 on).
set -u
D=docs/bench/2026-11-26-s37
NVCC=/usr/local/cuda/bin/nvcc
K=gpukit-kernels/cuda
source docs/bench/device-calls.sh
o=$OUT
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
mkdir -p /tmp/gv
python3 $D/gemv_variants.py $K/gemv.cu /tmp/gv > /dev/null
build() {  # build NAME SOURCE FLAGS…
  local name=$1 src=$2; shift 2
  $NVCC -O3 -std=c++17 -arch=sm_90a -w -Xptxas=-v -I $K -DGEMV_SRC="\"/tmp/gv/gemv_$src.cu\"" "$@" \
    docs/bench/2026-11-25-h200-s23/probe.cu -o /tmp/probe_$name > $OUT/nvcc-$name.txt 2>&1 \
    || { echo "nvcc $name failed"; tail -20 $OUT/nvcc-$name.txt; }
}
build main main & build one4 one -DRING_R=4 & build one1 one -DRING_R=1 &
unpack_bundle &
wait
run() {  # run BINARY LABEL CONFIG…: one probe process per config, npre in the label
  local bin=$1 label=$2; shift 2
  for c in "$@"; do timeout 60 /tmp/probe_$bin $label/p${c##*,} $c; done
}
for r in 1 2 3; do
  run main main 896,4864,8,2,8,4 2048,8192,8,2,4,2 8192,2048,2,4,4,2
  run one4 one4 896,4864,4,4,12,12 896,4864,4,4,12,4 896,4864,4,4,8,8 896,4864,4,2,12,12 \
    896,4864,4,4,14,14 896,4864,4,4,16,12 2048,8192,4,4,6,4 2048,8192,4,4,4,2
  PROBE_CARVEOUT=100 run one4 one4c100 896,4864,4,4,12,12 2048,8192,4,4,6,4
  run one1 one1 8192,2048,1,4,4,4 8192,2048,1,4,6,4
done 2>&1 | tee $OUT/gemv.txt | python3 $D/summarize.py
bench_ops $OUT/ops "gemv bf16" 200 | grep -i "gemv\|device"
