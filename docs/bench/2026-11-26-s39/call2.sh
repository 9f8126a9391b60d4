#!/usr/bin/env bash
# Session 39, call 2: L2 prefetches for the blocks that start last (pfm: the grid's first half
# for its mirror blocks; pfi: the blocks on idle multiprocessors for the last quarter) against
# main; four alternated rounds at the 32 MiB and 117 MB shapes on 128 blocks, two at the small
# ring's shapes; outputs checked.
set -u
. docs/bench/device-calls.sh
o=$OUT
gemv_probe_variants docs/bench/2026-11-26-s39/gemv_variants.py
gemv_probe_build main main & gemv_probe_build pfm pfm & gemv_probe_build pfi pfi &
wait
SMALL="896,4864,4,2,8,8 2048,2048,4,4,4,4 3072,1024,2,2,4,4"
LARGE="2048,8192,8,2,4,2 8192,2048,2,4,4,2 4096,14336,4,4,4,2 14336,4096,1,4,4,2"
for r in 1 2 3 4; do
  for v in main pfm pfi; do
    PROBE_GRID=128 gemv_probe_run $v $LARGE
    [ $r -le 2 ] && gemv_probe_run $v $SMALL
  done
done > $o/gemv.txt 2>&1
python3 docs/bench/2026-11-26-s37/summarize.py < $o/gemv.txt
