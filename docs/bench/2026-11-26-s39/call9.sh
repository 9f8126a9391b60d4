#!/usr/bin/env bash
# Session 39, call 9: where the joint last stage (jld) loses its time — per-stage timestamps of
# jld and of main (probe.cu -DPROBE_TIMELINE), two rounds, at (8192, 2048) and (2048, 8192) on
# 128 blocks and at (14336, 5) (one stage a block).
set -u
. docs/bench/device-calls.sh
o=$OUT
gemv_probe_variants docs/bench/2026-11-26-s39/gemv_variants.py
gemv_probe_build maintl maintl -DPROBE_TIMELINE & gemv_probe_build jldtl jldtl -DPROBE_TIMELINE &
wait
for r in 1 2; do
  for v in maintl jldtl; do
    PROBE_GRID=128 gemv_probe_run $v 8192,2048,2,4,4,2 2048,8192,8,2,4,2
    gemv_probe_run $v 14336,5,1,4,4,2
  done
done > $o/timeline.txt 2>&1
grep -v timeline $o/timeline.txt | python3 docs/bench/2026-11-26-s37/summarize.py
grep timeline $o/timeline.txt | cut -c1-520
