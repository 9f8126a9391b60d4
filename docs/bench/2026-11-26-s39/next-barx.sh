#!/usr/bin/env bash
# Prepared in session 39 for the next session (not run): does keeping every consumer warp to the
# block's end cost what the joint last stage (jld) lost? barx and jld against main, three
# alternated rounds at the 32 MiB shapes on 128 blocks.
set -u
. docs/bench/device-calls.sh
o=$OUT
gemv_probe_variants docs/bench/2026-11-26-s39/gemv_variants.py
gemv_probe_build main main & gemv_probe_build barx barx & gemv_probe_build jld jld &
wait
for r in 1 2 3; do
  for v in main barx jld; do PROBE_GRID=128 gemv_probe_run $v 2048,8192,8,2,4,2 8192,2048,2,4,4,2; done
done > $o/gemv.txt 2>&1
python3 docs/bench/2026-11-26-s37/summarize.py < $o/gemv.txt
