#!/usr/bin/env bash
# Session 41, call 3 (H200): the small ring GEMV's grid. At (896, 4864) the rule launches 132
# blocks for 1216 four-row stages: 28 blocks take 10 stages, 104 take 9, and the ring holds 8,
# so a 10-stage block's last two wait for slots. 152 blocks give every block 8 stages (all
# resident, all asked of L2 before the PDL wait), 136 give at most 9, 174 at most 7; 20, 4 and
# 42 multiprocessors then hold two blocks. Main's kernel (session 23's probe, PROBE_GRID),
# three alternated rounds, outputs checked.
set -u
. docs/bench/device-calls.sh
o=$OUT
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
mkdir -p /tmp/gv && cp gpukit-kernels/cuda/gemv.cu /tmp/gv/gemv_main.cu
gemv_probe_build main main
for r in 1 2 3; do
  for g in 132 136 152 174 122; do
    PROBE_GRID=$g gemv_probe_run main:g$g 896,4864,4,2,8,8
  done
  PROBE_GRID=132 gemv_probe_run main:g132n10 896,4864,4,2,10,10
  for g in 132 128 116; do
    PROBE_GRID=$g gemv_probe_run main:g$g 2048,2048,4,4,4,4 2048,1536,4,4,3,3 3072,1536,2,2,6,6
  done
done > $o/gemv.txt 2>&1
python3 docs/bench/2026-11-26-s37/summarize.py < $o/gemv.txt > $o/summary.txt
cat $o/summary.txt
