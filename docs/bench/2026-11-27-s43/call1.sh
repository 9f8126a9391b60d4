#!/usr/bin/env bash
# Session 43, call 1 (H100): the small ring's L2 prefetch before the PDL wait, paced
# (pace_variants.py), beside main, session 37's trig and an evict-last prefetch, at (896, 4864)
# and (2048, 2048), three alternated rounds; then the chain timelines of main and two paced
# copies.
set -u
. docs/bench/device-calls.sh
o=$OUT
chain_probe_variants
python3 docs/bench/2026-11-27-s43/pace_variants.py gpukit-kernels/cuda/gemv.cu \
  docs/bench/2026-11-25-h200-s23/probe.cu /tmp/gv > /dev/null
chain_probe_build main main & chain_probe_build trig trig & chain_probe_build pevl pevl &
chain_probe_build p2d150 pace -DPACE_P0=2 -DPACE_D=150 &
chain_probe_build p2d250 pace -DPACE_P0=2 -DPACE_D=250 &
chain_probe_build p0d200 pace -DPACE_P0=0 -DPACE_D=200 &
chain_probe_build p4d300 pace -DPACE_P0=4 -DPACE_D=300 &
chain_probe_build t0d350 tpace -DPACE_P0=0 -DPACE_D=350 &
chain_probe_build t0d500 tpace -DPACE_P0=0 -DPACE_D=500 &
wait
chain_probe_build chain chain -DPROBE_CHAIN & chain_probe_build chainp chainp -DPROBE_CHAIN -DPACE_P0=2 -DPACE_D=250 &
chain_probe_build chaintp chaintp -DPROBE_CHAIN -DPACE_P0=0 -DPACE_D=350 &
wait
for f in $o/nvcc-*.txt; do echo "${f##*/}: $(grep -A3 "entry function 'gemv_ring_bf16_r4'" $f | grep -o "Used [0-9]* registers")"; done
C=896,4864,4,2,8,8
C2=2048,2048,4,4,4,4
for r in 1 2 3; do
  for v in main p2d150 p2d250 p0d200 p4d300 pevl trig t0d350 t0d500; do
    gemv_probe_run $v $C
  done
  for v in main p2d250 p0d200; do gemv_probe_run $v $C2; done
done > $o/gemv.txt 2>&1
gemv_probe_summary
{ gemv_probe_run chain $C; gemv_probe_run chainp $C; gemv_probe_run chaintp $C; } > $o/chain.txt 2>&1
grep -A4 "chain k=" $o/chain.txt
