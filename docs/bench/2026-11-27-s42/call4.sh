#!/usr/bin/env bash
# Session 42, call 4 (H100): where the small ring's 4 µs goes at (896, 4864). main and nodot
# (consumers release stages unread: a bound) with the weights from HBM (the ops bench's 16
# copies) and from L2 (PROBE_COPIES=3: 26 MB, all resident), three alternated rounds; then the
# chain timelines of main (both) and nodot (L2).
set -u
. docs/bench/device-calls.sh
o=$OUT
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
mkdir -p /tmp/gv
python3 docs/bench/2026-11-27-s42/chain_variants.py gpukit-kernels/cuda/gemv.cu \
  docs/bench/2026-11-25-h200-s23/probe.cu /tmp/gv
build() {  # NAME VARIANT [FLAGS…]
  local n=$1 v=$2; shift 2
  /usr/local/cuda/bin/nvcc -O3 -std=c++17 -arch=sm_90a -w -Xptxas=-v -I gpukit-kernels/cuda "$@" \
    -DGEMV_SRC="\"/tmp/gv/gemv_$v.cu\"" /tmp/gv/probe_chain.cu -o /tmp/probe_$n > $o/nvcc-$n.txt 2>&1 \
    || echo "nvcc $n failed"
}
build main main & build nodot nodot & build chain chain -DPROBE_CHAIN & build chainn chainn -DPROBE_CHAIN &
wait
C=896,4864,4,2,8,8
for r in 1 2 3; do
  for v in main nodot; do
    gemv_probe_run $v:$v-hbm $C
    PROBE_COPIES=3 gemv_probe_run $v:$v-l2 $C
  done
done > $o/gemv.txt 2>&1
gemv_probe_summary
{ gemv_probe_run chain:chain-hbm $C; PROBE_COPIES=3 gemv_probe_run chain:chain-l2 $C
  PROBE_COPIES=3 gemv_probe_run chainn:chainn-l2 $C; } > $o/chain.txt 2>&1
cat $o/chain.txt
