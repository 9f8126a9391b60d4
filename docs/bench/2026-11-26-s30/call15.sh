#!/bin/bash
# Session 30, call 15: the decode ring with the four-warp and split merges weighing by ex2.approx (working tree)
# against bece7e7 (target/ab/base), alternated in the probe; the outputs differ in rounding (the
# weights are rounded differently), so they are compared within bf16
# tolerance; then traced.
set -u
D=docs/bench/2026-11-26-s30
S19=docs/bench/2026-11-24-h200-s19
NVCC=/usr/local/cuda/bin/nvcc
mkdir -p /tmp/v/base /tmp/v/new /tmp/v/trace
cp target/ab/base/attention.cu target/ab/base/common.cuh /tmp/v/base/
cp gpukit-kernels/cuda/attention.cu gpukit-kernels/cuda/common.cuh /tmp/v/new/
cp gpukit-kernels/cuda/common.cuh /tmp/v/trace/
python3 $D/trace_patch.py gpukit-kernels/cuda/attention.cu /tmp/v/trace/attention.cu
build() {  # name extra-flags
  $NVCC -O3 -std=c++17 -arch=sm_90a -w $2 -I /tmp/v/$1 -I $S19 -DATTN_SRC="\"/tmp/v/$1/attention.cu\"" \
    $D/decode_probe.cu -o /tmp/probe_$1 -lcuda > $OUT/nvcc-$1.txt 2>&1 || { echo "nvcc $1 failed"; tail -30 $OUT/nvcc-$1.txt; }
}
build base "" &
build new "" &
build trace -DDECODE_TRACE &
wait
for r in 1 2; do
  OUTFILE=/tmp/out-base.bin /tmp/probe_base base
  OUTFILE=/tmp/out-new.bin /tmp/probe_new new
done 2>&1 | tee $OUT/ab.txt
python3 - <<'PY'
import struct
def load(p):
    b = open(p, "rb").read()
    return [struct.unpack("<f", struct.pack("<I", h << 16))[0] for (h,) in struct.iter_unpack("<H", b)]
a, b = load("/tmp/out-base.bin"), load("/tmp/out-new.bin")
diffs = [abs(x - y) for x, y in zip(a, b)]
rel = [d / max(abs(x), 1e-3) for d, x in zip(diffs, a)]
print(f"outputs: {len(a)} values, {sum(d == 0 for d in diffs)} equal, max |diff| {max(diffs):.3g}, max rel {max(rel):.3g}")
PY
/tmp/probe_trace trace 2>&1 | tee $OUT/probe-trace.txt
