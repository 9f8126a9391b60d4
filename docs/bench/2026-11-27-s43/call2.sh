#!/usr/bin/env bash
# Session 43, call 2 (H100): call 1's closest paced copy (4 stages asked of L2 at entry, the
# other 4 one by one by the consumer warps) over its spacing and split, beside main, six
# alternated rounds at (896, 4864).
set -u
. docs/bench/device-calls.sh
o=$OUT
chain_probe_variants
python3 docs/bench/2026-11-27-s43/pace_variants.py gpukit-kernels/cuda/gemv.cu \
  docs/bench/2026-11-25-h200-s23/probe.cu /tmp/gv > /dev/null
V="main"
chain_probe_build main main &
for pd in 4,150 4,300 4,450 6,300 6,500 5,250; do
  n=p${pd%,*}d${pd#*,}; V="$V $n"
  chain_probe_build $n pace -DPACE_P0=${pd%,*} -DPACE_D=${pd#*,} &
done
wait
C=896,4864,4,2,8,8
for r in 1 2 3 4 5 6; do
  for v in $V; do gemv_probe_run $v $C; done
done > $o/gemv.txt 2>&1
gemv_probe_summary
