#!/usr/bin/env bash
# Session 39, call 8: is the ring GEMV's code size what it loses? The batch's stage loop rolled
# (roll: one inlined ring_rows instead of NB = 8 / R; roll3: held to three blocks an SM at R 2
# and 4; rolljld: with the joint last stage) against main; three alternated rounds at the large
# shapes (128 blocks), two at the small ones, the odd shapes once.
set -u
. docs/bench/device-calls.sh
o=$OUT
gemv_probe_variants docs/bench/2026-11-26-s39/gemv_variants.py
gemv_probe_build main main & gemv_probe_build roll roll & gemv_probe_build roll3 roll3 &
gemv_probe_build rolljld rolljld &
wait
SMALL="896,4864,4,2,8,8 2048,2048,4,4,4,4 3072,1024,2,2,4,4 2048,1536,4,4,3,3"
LARGE="2048,8192,8,2,4,2 8192,2048,2,4,4,2 4096,14336,4,4,4,2 14336,4096,1,4,4,2"
ODD="896,4866,4,2,8,8 2048,8193,8,2,4,2 8192,2047,2,4,4,2 2048,600,8,2,4,2 14336,5,1,4,4,2 3072,1023,2,2,4,4 14336,1001,1,4,4,2"
for r in 1 2 3; do
  for v in main roll roll3 rolljld; do
    PROBE_GRID=128 gemv_probe_run $v $LARGE
    [ $r -le 2 ] && gemv_probe_run $v $SMALL
  done
done > $o/gemv.txt 2>&1
for v in main roll3; do gemv_probe_run $v:$v-odd $ODD; done > $o/odd.txt 2>&1
python3 docs/bench/2026-11-26-s37/summarize.py < $o/gemv.txt
python3 docs/bench/2026-11-26-s37/summarize.py < $o/odd.txt
