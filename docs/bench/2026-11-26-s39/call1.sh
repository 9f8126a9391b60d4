#!/usr/bin/env bash
# Session 39, call 1: the joint last stage (jl) against main in the ring GEMV probe; four
# alternated rounds at the bench's shapes (the large ones on the launch rule's 128 blocks), and
# odd shapes once each for the outputs (a partial last stage; one stage a block, fewer than the
# groups).
set -u
. docs/bench/device-calls.sh
o=$OUT
gemv_probe_variants docs/bench/2026-11-26-s39/gemv_variants.py
gemv_probe_build main main & gemv_probe_build jl jl &
wait
SMALL="896,4864,4,2,8,8 2048,2048,4,4,4,4 3072,1024,2,2,4,4 2048,1024,4,4,2,2"
LARGE="2048,8192,8,2,4,2 8192,2048,2,4,4,2 4096,14336,4,4,4,2 14336,4096,1,4,4,2"
ODD="896,4866,4,2,8,8 2048,8193,8,2,4,2 8192,2047,2,4,4,2 2048,600,8,2,4,2 14336,5,1,4,4,2 3072,1023,2,2,4,4"
for r in 1 2 3 4; do
  for v in main jl; do
    gemv_probe_run $v $SMALL
    PROBE_GRID=128 gemv_probe_run $v $LARGE
  done
done > $o/gemv.txt 2>&1
for v in main jl; do gemv_probe_run $v:$v-odd $ODD; done > $o/odd.txt 2>&1
python3 docs/bench/2026-11-26-s37/summarize.py < $o/gemv.txt
python3 docs/bench/2026-11-26-s37/summarize.py < $o/odd.txt
