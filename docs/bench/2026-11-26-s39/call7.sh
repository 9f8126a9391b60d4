#!/usr/bin/env bash
# Session 39, call 7: the joint last stage with each group's final batch reduced after it (jld;
# jld3: its 2- and 4-row entry points held to three blocks an SM) against main; three
# alternated rounds at the large shapes (128 blocks), two at the small ones, the odd shapes once.
set -u
. docs/bench/device-calls.sh
o=$OUT
gemv_probe_variants docs/bench/2026-11-26-s39/gemv_variants.py
gemv_probe_build main main & gemv_probe_build jld jld & gemv_probe_build jld3 jld3 &
wait
SMALL="896,4864,4,2,8,8 2048,2048,4,4,4,4 3072,1024,2,2,4,4 2048,1536,4,4,3,3"
LARGE="2048,8192,8,2,4,2 8192,2048,2,4,4,2 4096,14336,4,4,4,2 14336,4096,1,4,4,2"
ODD="896,4866,4,2,8,8 2048,8193,8,2,4,2 8192,2047,2,4,4,2 2048,600,8,2,4,2 14336,5,1,4,4,2 3072,1023,2,2,4,4 2048,1536,4,4,3,3"
for r in 1 2 3; do
  for v in main jld jld3; do
    PROBE_GRID=128 gemv_probe_run $v $LARGE
    [ $r -le 2 ] && gemv_probe_run $v $SMALL
  done
done > $o/gemv.txt 2>&1
for v in main jld3; do gemv_probe_run $v:$v-odd $ODD; done > $o/odd.txt 2>&1
python3 docs/bench/2026-11-26-s37/summarize.py < $o/gemv.txt
python3 docs/bench/2026-11-26-s37/summarize.py < $o/odd.txt
