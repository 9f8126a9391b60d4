#!/usr/bin/env bash
# Session 38, call 5: gemv_variants.py's mma (full stages summed on the tensor cores; 2
# accumulator chains, and mma4 with 4) against main at every probe shape, three alternated
# rounds, outputs checked; then mma's per-stage timeline beside main's.
set -u
. docs/bench/device-calls.sh
o=$OUT
gemv_probe_variants docs/bench/2026-11-26-s38/gemv_variants.py
gemv_probe_build main main & gemv_probe_build mma mma & gemv_probe_build mma4 mma -DMMA_U=4 &
gemv_probe_build timeline timeline -DPROBE_TIMELINE & gemv_probe_build mmaline mmaline -DPROBE_TIMELINE &
wait
SHAPES="896,4864,4,2,8,8 2048,2048,4,4,4,4 3072,1024,2,2,4,4 2048,1024,4,4,2,2 2048,8192,8,2,4,2
  8192,2048,2,4,4,2 4096,14336,4,4,4,2"
for r in 1 2 3; do
  gemv_probe_run main $SHAPES
  gemv_probe_run mma $SHAPES
  gemv_probe_run mma4 $SHAPES
done > $OUT/gemv.txt 2>&1
python3 docs/bench/2026-11-26-s37/summarize.py < $OUT/gemv.txt
for v in timeline mmaline; do
  gemv_probe_run $v 8192,2048,2,4,4,2 2048,8192,8,2,4,2 896,4864,4,2,8,8
done > $OUT/timeline.txt 2>&1
grep timeline $OUT/timeline.txt
