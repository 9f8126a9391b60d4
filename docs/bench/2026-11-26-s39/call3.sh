#!/usr/bin/env bash
# Session 39, call 3: the small ring with every stage of a block resident (nst = the block's
# stages, not rounded down to a multiple of the groups: where a block has no more stages than
# the ring, each slot is filled once, so no phase can alias) against the launch rule's rings,
# on main's kernel; four alternated rounds, outputs checked.
set -u
. docs/bench/device-calls.sh
o=$OUT
gemv_probe_variants docs/bench/2026-11-26-s39/gemv_variants.py
gemv_probe_build main main
for r in 1 2 3 4; do
  gemv_probe_run main 896,4864,4,2,8,8 896,4864,4,2,10,10 896,4864,4,2,10,8 896,4864,4,2,12,12 \
    2048,1536,4,4,2,2 2048,1536,4,4,3,3 3072,1536,2,2,4,4 3072,1536,2,2,6,6
done > $o/gemv.txt 2>&1
python3 docs/bench/2026-11-26-s37/summarize.py < $o/gemv.txt
