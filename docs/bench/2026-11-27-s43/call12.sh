#!/usr/bin/env bash
# Session 43, call 12 (H100): does the small ring read more from HBM than its weights? Nsight
# Compute on one replay of the timed graph (50 launches with PDL, 16 rotated weight copies) as
# one workload (--graph-profiling graph): DRAM bytes read against 50 × the weights, for this
# tree's kernel at (896, 4864) and (8192, 2048). As run it profiled one launch instead (8.76 MB
# read at (896, 4864)): --graph-profiling did not take the probe's graph as the workload.
# (Refactored after it ran onto device-calls.sh's now_probe_setup: the same steps, and it
# prints the GPU's name.)
set -u
. docs/bench/device-calls.sh
o=$OUT
now_probe_setup
for c in 896,4864,4,2,8,8 8192,2048,2,4,4,2; do
  timeout 150 ncu --graph-profiling graph --launch-skip 3 --launch-count 1 \
    --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum,gpu__time_duration.sum \
    /tmp/probe_now now $c > $o/ncu-${c%%,*}.txt 2>&1
  echo "$c rc $?"; grep -E "dram__|lts__|gpu__time|us  " $o/ncu-${c%%,*}.txt
done
