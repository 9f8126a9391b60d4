#!/usr/bin/env bash
# Session 37, call 19 (H200): where each block of the ring GEMV is when the call ends:
# gemv_variants.py's stamp copy and probe.cu -DPROBE_STAMPS (each block's entry, PDL wait, last
# stage landed and end, for the timed graph's last call), against main for the stamps' cost;
# two alternated rounds.
set -u
. docs/bench/device-calls.sh
o=$OUT
D=docs/bench/2026-11-26-s37
gemv_probe_variants $D/gemv_variants.py
gemv_probe_build main main & gemv_probe_build stamp stamp -DPROBE_STAMPS &
wait
SHAPES="2048,8192,8,2,4,2 8192,2048,2,4,4,2 4096,14336,4,4,4,2 896,4864,4,2,8,8"
for r in 1 2; do
  gemv_probe_run main $SHAPES
  gemv_probe_run stamp $SHAPES
done 2>&1 | tee $OUT/gemv.txt | python3 $D/summarize.py
