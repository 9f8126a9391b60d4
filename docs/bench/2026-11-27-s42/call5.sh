#!/usr/bin/env bash
# Session 42, call 5 (H100): when the next launch is let in. main (once x has landed), trig (at
# entry) and trigw (right after the PDL wait), each with the blocks an SM the kernel's registers
# allow (three) and with two (PROBE_CARVEOUT=58: 132 KiB of shared memory an SM), so that at most
# two launches' blocks share an SM; three alternated rounds; then chains at (896, 4864).
set -u
. docs/bench/device-calls.sh
o=$OUT
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
mkdir -p /tmp/gv
python3 docs/bench/2026-11-27-s42/chain_variants.py gpukit-kernels/cuda/gemv.cu \
  docs/bench/2026-11-25-h200-s23/probe.cu /tmp/gv
for v in main trig trigw; do gemv_probe_build $v $v & done
for v in chain chaint; do
  /usr/local/cuda/bin/nvcc -O3 -std=c++17 -arch=sm_90a -w -I gpukit-kernels/cuda -DPROBE_CHAIN \
    -DGEMV_SRC="\"/tmp/gv/gemv_$v.cu\"" /tmp/gv/probe_chain.cu -o /tmp/probe_$v > $o/nvcc-$v.txt 2>&1 \
    || echo "nvcc $v failed" &
done
wait
C="896,4864,4,2,8,8 2048,2048,4,4,4,4 3072,1024,2,2,4,4"
for r in 1 2 3; do
  for v in main trig trigw; do
    gemv_probe_run $v $C
    PROBE_CARVEOUT=58 gemv_probe_run $v:$v-c58 $C
  done
done > $o/gemv.txt 2>&1
gemv_probe_summary
{ PROBE_CARVEOUT=58 gemv_probe_run chain:chain-c58 896,4864,4,2,8,8
  PROBE_CARVEOUT=58 gemv_probe_run chaint:chaint-c58 896,4864,4,2,8,8
  gemv_probe_run chaint 896,4864,4,2,8,8; } > $o/chain.txt 2>&1
cat $o/chain.txt
