#!/usr/bin/env bash
# Session 41, call 9 (H100): session 40's decode ring at every cache length, measured until now
# on the H200 only: the decode bench of the three small models, prompts 128 and 2048, main's
# bundle against itself with GPUKIT_SDPA_PORTABLE=1 (the path main took below 4096 keys before
# session 40), three alternated rounds.
set -u
. docs/bench/device-calls.sh
o="$OUT"
export GPUKIT_DECODE_MODELS=/tmp/gpukit-decode-models
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
unpack_bundle
python3 bench/decode_models.py $GPUKIT_DECODE_MODELS --models llama3.2-1b,qwen2.5-0.5b,qwen3-0.6b \
  > $OUT/models.log 2>&1; echo "models rc $? at ${SECONDS}s"
for r in 1 2 3; do
  decode_bench $OUT/dec-ring$r $b
  decode_bench $OUT/dec-port$r $b GPUKIT_SDPA_PORTABLE=1
done
