#!/usr/bin/env bash
# Session 38, call 1: gemv_variants.py's cvt (bf16 packs widened as 32-bit words) against main at
# the small-ring, 32 MiB and 117 MB shapes, three alternated rounds, outputs checked; main with
# 128 blocks at the 32 MiB shapes (1024 stages: 8 a block instead of 8 or 7); the per-stage
# timelines of main and cvt; Nsight Compute's source view of main at (8192, 2048).
set -u
. docs/bench/device-calls.sh
o=$OUT
D=docs/bench/2026-11-26-s38
gemv_probe_variants $D/gemv_variants.py
gemv_probe_build main main & gemv_probe_build cvt cvt &
gemv_probe_build timeline timeline -DPROBE_TIMELINE & gemv_probe_build cvtline cvtline -DPROBE_TIMELINE &
wait
SHAPES="896,4864,4,2,8,8 2048,2048,4,4,4,4 3072,1024,2,2,4,4 2048,1024,4,4,2,2 2048,8192,8,2,4,2
  8192,2048,2,4,4,2 4096,14336,4,4,4,2 14336,4096,1,4,4,2"
for r in 1 2 3; do
  gemv_probe_run main $SHAPES
  gemv_probe_run cvt $SHAPES
  PROBE_GRID=128 gemv_probe_run main:grid128 2048,8192,8,2,4,2 8192,2048,2,4,4,2
done 2>&1 | tee $OUT/gemv.txt | python3 $D/summarize.py
for r in 1 2; do
  gemv_probe_run timeline 8192,2048,2,4,4,2 2048,8192,8,2,4,2 896,4864,4,2,8,8
  gemv_probe_run cvtline 8192,2048,2,4,4,2 2048,8192,8,2,4,2 896,4864,4,2,8,8
done 2>&1 | tee $OUT/timeline.txt | grep timeline
PROBE_NCU=1 timeout 150 ncu -k regex:gemv_ring --launch-skip 2 --launch-count 1 --set full \
  --import-source no -o $OUT/ncu-main /tmp/probe_main main 8192,2048,2,4,4,2 > $OUT/ncu-run.txt 2>&1
echo "ncu rc $? at ${SECONDS}s"
ncu --import $OUT/ncu-main.ncu-rep --page details > $OUT/ncu-details.txt 2>&1
ncu --import $OUT/ncu-main.ncu-rep --page source --csv --print-source sass > $OUT/ncu-sass.csv 2>&1
echo "ncu pages rc $?"; grep -iE "Duration|DRAM Throughput|Warp Cycles Per Issued|Issue Slots Busy|No Eligible|Active Warps" $OUT/ncu-details.txt | head -12
