#!/usr/bin/env bash
# Session 43, call 12 (H100): does the small ring read more from HBM than its weights? Nsight
# Compute on one replay of the timed graph (50 launches with PDL, 16 rotated weight copies) as
# one workload (--graph-profiling graph): DRAM bytes read against 50 × the weights, for this
# tree's kernel at (896, 4864) and (8192, 2048).
set -u
. docs/bench/device-calls.sh
o=$OUT
nvidia-smi --query-gpu=name --format=csv,noheader
git show 2819fa2:gpukit-kernels/cuda/gemv.cu > /tmp/gemv_before.cu
chain_probe_variants /tmp/gemv_before.cu > /dev/null
cp gpukit-kernels/cuda/gemv.cu /tmp/gv/gemv_now.cu
chain_probe_build now now
for c in 896,4864,4,2,8,8 8192,2048,2,4,4,2; do
  timeout 150 ncu --graph-profiling graph --launch-skip 3 --launch-count 1 \
    --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum,gpu__time_duration.sum \
    /tmp/probe_now now $c > $o/ncu-${c%%,*}.txt 2>&1
  echo "$c rc $?"; grep -E "dram__|lts__|gpu__time|us  " $o/ncu-${c%%,*}.txt
done
