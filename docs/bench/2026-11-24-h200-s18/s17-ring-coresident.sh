#!/bin/bash
# Session 17 sweep: co-resident ring (launch bounds 288,2, budget) vs main.
# The experiment build (target/gpu-bundle-exp) and its GPUKIT_RING_* knobs lived on a branch
# that was not kept; this script is the record of how the table in docs/RESULTS.md was measured.
set -u
export GPUKIT_CACHE_DIR=/tmp/gpukit-cache
B=target/gpu-bundle
gunzip -f $B/benches/gpukit-ops__ops.gz; chmod +x $B/benches/gpukit-ops__ops
gunzip -f target/gpu-bundle-exp/gpukit-ops__ops.gz; chmod +x target/gpu-bundle-exp/gpukit-ops__ops
MAIN=$B/benches/gpukit-ops__ops; EXP=target/gpu-bundle-exp/gpukit-ops__ops
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
show() { python3 -c "
import json,sys
d=json.load(open('$1/bench-ops.json'))
print('%-34s'%'$2', ' '.join('%7.2f'%(c['ms']*1000) for c in d['cases']))"; }
run() { # label bin env...
  local label=$1 bin=$2; shift 2
  local o=/tmp/o_$RANDOM; mkdir -p $o
  env "$@" GPUKIT_BENCH_OUT=$o GPUKIT_BENCH_FILTER="gemv bf16 M=1" $bin --bench > $o/log 2>&1 || { echo "$label FAILED"; tail -5 $o/log; return; }
  show $o "$label"
}
for round in 1 2; do
  echo "== round $round (µs: 2048x8192 8192x2048 4096x14336 14336x4096 896x4864)"
  run main $MAIN
  run exp-lb2-default $EXP
  run exp-lb2-early $EXP GPUKIT_RING_EARLY=1
  run b108-s16-min0 $EXP GPUKIT_RING_BUDGET=110592 GPUKIT_RING_STAGE=16384 GPUKIT_RING_MIN=0
  run b108-s32-min0 $EXP GPUKIT_RING_BUDGET=110592 GPUKIT_RING_STAGE=32768 GPUKIT_RING_MIN=0
  run b108-s16-min0-early $EXP GPUKIT_RING_BUDGET=110592 GPUKIT_RING_STAGE=16384 GPUKIT_RING_MIN=0 GPUKIT_RING_EARLY=1
  run b108-s32-min0-early $EXP GPUKIT_RING_BUDGET=110592 GPUKIT_RING_STAGE=32768 GPUKIT_RING_MIN=0 GPUKIT_RING_EARLY=1
  run b80-s16-min0 $EXP GPUKIT_RING_BUDGET=81920 GPUKIT_RING_STAGE=16384 GPUKIT_RING_MIN=0
done
o=/tmp/o_torch; mkdir -p $o
GPUKIT_BENCH_OUT=$o GPUKIT_BENCH_FILTER="gemv bf16 M=1" $MAIN --bench > $o/log 2>&1
python3 bench/peer_ops.py $o 2>&1 | tail -8
