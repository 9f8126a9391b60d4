#!/usr/bin/env bash
# Session 39, call 6: what the end of a block costs now — diagnostics with wrong outputs: no
# batch reduction (nored), each group's last stage not read (nolast), against main; three
# alternated rounds (the large shapes on 128 blocks).
set -u
. docs/bench/device-calls.sh
o=$OUT
gemv_probe_variants docs/bench/2026-11-26-s39/gemv_variants.py
gemv_probe_build main main & gemv_probe_build nored nored & gemv_probe_build nolast nolast &
wait
SMALL="896,4864,4,2,8,8 2048,2048,4,4,4,4"
LARGE="2048,8192,8,2,4,2 8192,2048,2,4,4,2 4096,14336,4,4,4,2"
for r in 1 2 3; do
  for v in main nored nolast; do
    PROBE_GRID=128 gemv_probe_run $v $LARGE
    gemv_probe_run $v $SMALL
  done
done > $o/gemv.txt 2>&1
python3 docs/bench/2026-11-26-s37/summarize.py < $o/gemv.txt
