#!/bin/bash
# Session 17: does the ring help inside the decode step? Llama-3.1-8B, ring on/off.
# The experiment build (target/gpu-bundle-exp) and its GPUKIT_RING_* knobs lived on a branch
# that was not kept; this script is the record of how the table in docs/RESULTS.md was measured.
set -u
export GPUKIT_CACHE_DIR=/tmp/gpukit-cache GPUKIT_DECODE_MODELS=/tmp/gpukit-decode-models
for f in target/gpu-bundle/benches/gpukit-llm__decode.gz target/gpu-bundle-exp/gpukit-llm__decode.gz; do gunzip -f $f; chmod +x ${f%.gz}; done
python3 bench/decode_models.py $GPUKIT_DECODE_MODELS --models llama3.1-8b 2>&1 | tail -4
MAIN=target/gpu-bundle/benches/gpukit-llm__decode; EXP=target/gpu-bundle-exp/gpukit-llm__decode
run() { local label=$1 bin=$2; shift 2; local o=/tmp/d_$RANDOM; mkdir -p $o
  env "$@" GPUKIT_BENCH_OUT=$o GPUKIT_BENCH_FILTER=8b GPUKIT_DECODE_PROMPTS=128,2048 GPUKIT_DECODE_TOKENS=128 $bin --bench > $o/log 2>&1 || { echo "$label FAILED"; tail -5 $o/log; return; }
  echo "-- $label"; grep -E "^llama" $o/log; }
for r in 1 2; do
  run main-ring $MAIN
  run exp-ring-off $EXP GPUKIT_RING_MIN=1000000000000
  run exp-ring-on $EXP
done
