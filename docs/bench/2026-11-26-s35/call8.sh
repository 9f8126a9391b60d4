#!/usr/bin/env bash
# Session 35, call 8: attention.cu's own decode ring (HEAD) in this session's probe: the
# tensor-map entry point (main) and the _swz one on a pre-swizzled cache (-DPROBE_SWZ
# -DATTN_PRESWIZZLED; its outputs compared bit for bit with main's at 132 units), the latter also
# at other unit counts (PROBE_UNITS 96, 66, 264: other split counts, other summation orders), two
# alternated rounds.
set -u
D=docs/bench/2026-11-26-s35
S19=docs/bench/2026-11-24-h200-s19
NVCC=/usr/local/cuda/bin/nvcc
K=gpukit-kernels/cuda
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
$NVCC -O3 -std=c++17 -arch=sm_90a -w -I $K -I $S19 -DATTN_SRC="\"$PWD/$K/attention.cu\"" \
  $D/decode_probe.cu -o /tmp/dprobe_main -lcuda > $OUT/nvcc-main.txt 2>&1 || tail -20 $OUT/nvcc-main.txt &
$NVCC -O3 -std=c++17 -arch=sm_90a -w -DPROBE_SWZ -DATTN_PRESWIZZLED -I $K -I $S19 -DATTN_SRC="\"$PWD/$K/attention.cu\"" \
  $D/decode_probe.cu -o /tmp/dprobe_swz -lcuda > $OUT/nvcc-swz.txt 2>&1 || tail -20 $OUT/nvcc-swz.txt &
wait
for r in 1 2; do
  OUTFILE=/tmp/dout-main.bin /tmp/dprobe_main main
  for u in 132 96 66 264; do OUTFILE=/tmp/dout-swz-$u.bin PROBE_UNITS=$u /tmp/dprobe_swz swz-u$u; done
done 2>&1 | tee $OUT/units.txt
cmp -s /tmp/dout-main.bin /tmp/dout-swz-132.bin && echo "swz outputs (132 units): bitwise equal to main" || echo "swz outputs: DIFFER"
